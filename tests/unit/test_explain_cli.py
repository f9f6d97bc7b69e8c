"""`kube-async-scheduler explain`: argument errors, the table, an unreachable scheduler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kas_dev.cluster.ports import free_port
from scheduler.cli import main
from scheduler.explain_cli import format_table

BODY: dict[str, Any] = {
    "pod": "ns/p", "uid": "u", "leader": True, "schedulerName": "s", "priority": 1000,
    "queue": "unschedulable", "schedulingGates": [], "nominatedNode": None,
    "lastAttempt": {
        "time": "2026-01-01T00:00:00Z", "message": "0/2 nodes are available: 2 Insufficient cpu.",
        "nominatedNode": None,
        "nodes": [
            {"node": "n1", "code": "UNSCHEDULABLE", "plugin": "NodeResourcesFit",
             "reason": "Insufficient cpu"},
        ],
    },
    "now": {
        "result": "Unschedulable", "message": "0/2 nodes are available: 2 Insufficient cpu.",
        "nodes": [],
        "preemption": {"node": "n1", "victims": [{"pod": "b/v", "uid": "v", "priority": 10}],
                       "policies": ["guard"], "message": "", "code": "Success"},
    },
}  # fmt: skip


def test_the_table_shows_verdicts_plan_and_policy() -> None:
    text = format_table(BODY)
    assert "  n1    UNSCHEDULABLE  NodeResourcesFit  Insufficient cpu" in text
    assert "Preemption:    on node n1, 1 victim(s)" in text
    assert "  b/v     10" in text and "Policies:      guard" in text
    hidden = BODY["now"] | {
        "preemption": BODY["now"]["preemption"] | {"victimCount": 3, "hiddenVictims": 2}
    }
    text = format_table(BODY | {"now": hidden})
    assert "on node n1, 3 victim(s)" in text and "and 2 in namespace(s) you may not read" in text
    brief = BODY | {"lastAttempt": {k: v for k, v in BODY["lastAttempt"].items() if k != "nodes"}}
    assert "NODE" not in format_table(brief) and "Last attempt:  2026" in format_table(brief)
    follower = format_table(BODY | {"leader": False, "lastAttempt": None})
    assert "a follower answered" in follower and "Last attempt:  none recorded" in follower


def test_a_malformed_target_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "no-slash", "--url", "http://127.0.0.1:1"]) == 2
    assert "expected NAMESPACE/POD" in capsys.readouterr().err


def test_an_unreachable_scheduler_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"https://127.0.0.1:{free_port()}"
    assert main(["explain", "ns/p", "--url", url, "--timeout", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"kube-async-scheduler: error: cannot reach {url}") and (
        err.count("\n") == 1
    )


def test_plain_http_urls_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "ns/p", "--url", "http://127.0.0.1:10251"]) == 2
    assert "--url must be https://" in capsys.readouterr().err


def test_an_unreadable_kubeconfig_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "absent")
    assert main(["explain", "ns/p", "--kubeconfig", missing, "--timeout", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kube-async-scheduler: error: cannot reach the API server")
    assert err.count("\n") == 1
