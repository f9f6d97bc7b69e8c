"""The chart refuses what the scheduler refuses: every value below renders into a
KubeSchedulerConfiguration field that the scheduler's config loader refuses (exit 2, one
line naming the field), and `helm template` with the chart's schema and templates must fail
on it too, instead of installing pods that crash-loop.

One source of truth: scheduler/config/bounds.py, written into values.schema.json and
files/config-bounds.json by `python -m kas_dev.chart_bounds`; the first test fails when
they are out of step. The refused names come from the config corpus (tests/config_corpus.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kas_dev import chart_bounds
from scheduler.config.bounds import INT32_MAX
from tests.chart.test_chart_render import HELM, render, render_fails, scheduler_config
from tests.config_corpus import (
    BAD_QUALIFIED,
    BAD_SUBDOMAIN,
    PREFIX,
    Case,
    _parse_path,
    _set,
    check_in_process,
    check_process,
)

pytestmark = pytest.mark.skipif(HELM is None, reason="helm not found (hack/install-binaries.sh)")


def test_the_chart_is_in_step_with_the_scheduler_bounds() -> None:
    assert chart_bounds.main(["--check"]) == 0, "run: python -m kas_dev.chart_bounds"


@dataclass(frozen=True)
class Refused:
    id: str
    values: dict[str, Any]  # chart values (over the defaults, leader election on)
    config: dict[str, Any]  # the rendered config's fields (paths) that carry them
    field: str  # the config field the scheduler names
    words: tuple[str, ...] = ()  # what helm's error names


LE = "leaderElection"


def _lease(lease: str, renew: str, retry: str, named: str) -> Refused:
    return Refused(
        f"lease {lease}/{renew}/{retry}",
        {LE: {"leaseDuration": lease, "renewDeadline": renew, "retryPeriod": retry}},
        {f"{LE}.leaseDuration": lease, f"{LE}.renewDeadline": renew, f"{LE}.retryPeriod": retry},
        f"{LE}.{named}",
        (named,),
    )


def _profile_name(name: str) -> Refused:
    return Refused(
        f"schedulerName {name[:24]!r}",
        {"config": {"profiles": [{"schedulerName": name}]}},
        {"profiles[0].schedulerName": name},
        "profiles[0].schedulerName",
        ("schedulerName",),
    )


def _lease_name(name: str) -> Refused:
    return Refused(
        f"resourceName {name[:24]!r}",
        {LE: {"resourceName": name}},
        {f"{LE}.resourceName": name},
        f"{LE}.resourceName",
        ("resourceName",),
    )


CASES = [
    *(_profile_name(n) for n in BAD_QUALIFIED),
    _profile_name("a" * 64),
    *(_lease_name(n) for n in BAD_SUBDOMAIN),
    # a lease under 1 s, or beyond the Lease's int32 seconds
    _lease("900ms", "500ms", "100ms", "leaseDuration"),
    _lease("999ms", "10ms", "1ms", "leaseDuration"),
    _lease("600000h", "10s", "2s", "leaseDuration"),
    _lease("596524h", "1h", "1s", "leaseDuration"),
    # inconsistent timings
    _lease("20s", "20s", "4s", "leaseDuration"),
    _lease("30s", "4.8s", "4s", "renewDeadline"),
    Refused("percentageOfNodesToScore 101", {"config": {"percentageOfNodesToScore": 101}},
            {"percentageOfNodesToScore": 101}, "percentageOfNodesToScore",
            ("percentageOfNodesToScore",)),
    Refused("profile percentageOfNodesToScore -1",
            {"config": {"profiles": [{"schedulerName": "a", "percentageOfNodesToScore": -1}]}},
            {"profiles[0].percentageOfNodesToScore": -1},
            "profiles[0].percentageOfNodesToScore", ("percentageOfNodesToScore",)),
    Refused("podInitialBackoffSeconds 0", {"config": {"podInitialBackoffSeconds": 0}},
            {"podInitialBackoffSeconds": 0}, "podInitialBackoffSeconds",
            ("podInitialBackoffSeconds",)),
    Refused("podMaxBackoffSeconds below the initial",
            {"config": {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2}},
            {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2}, "podMaxBackoffSeconds",
            ("podMaxBackoffSeconds",)),
    Refused("minCandidateNodesAbsolute beyond int32",
            {"config": {"preemption": {"minCandidateNodesAbsolute": INT32_MAX + 1}}},
            {"profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute": INT32_MAX + 1},
            "profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute",
            ("minCandidateNodesAbsolute",)),
]


@pytest.fixture(scope="module")
def rendered_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The configuration the chart renders from its defaults, leader election on."""
    cfg = scheduler_config(render(tmp_path_factory.mktemp("render"), {LE: {"enabled": True}}))
    assert cfg["leaderElection"]["leaderElect"] is True
    assert cfg["profiles"][0]["pluginConfig"][0]["name"] == "DefaultPreemption"
    return cfg


def _config_case(base: dict[str, Any], case: Refused) -> Case:
    doc = copy.deepcopy(base)
    for path, value in case.config.items():
        doc = _set(doc, _parse_path(path), value)
    return Case(case.id, "chart", yaml.safe_dump(doc).encode(), case.field)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_value_the_scheduler_refuses_is_refused_by_the_chart(
    tmp_path: Path, rendered_config: dict[str, Any], case: Refused
) -> None:
    verdict = check_in_process(_config_case(rendered_config, case))
    assert verdict.refused and verdict.one_line and verdict.field_named, verdict.message
    values = copy.deepcopy(case.values)
    values.setdefault(LE, {})["enabled"] = True
    err = render_fails(tmp_path, values)
    assert all(w in err for w in case.words), err


def test_the_process_exits_2_naming_the_field_for_each_kind_of_refusal(
    tmp_path: Path, rendered_config: dict[str, Any]
) -> None:
    """Through `python -m scheduler run --config`: one case per refused field."""
    by_field = {c.field: c for c in CASES}
    for case in by_field.values():
        verdict = check_process(_config_case(rendered_config, case), tmp_path)
        assert verdict.exit_code == 2, (case.id, verdict.message)
        assert verdict.one_line and verdict.field_named, (case.id, verdict.message)
        assert verdict.message.startswith(PREFIX + case.field + ": ")


def test_the_values_at_the_bounds_are_accepted_by_both(
    tmp_path: Path, rendered_config: dict[str, Any]
) -> None:
    """The chart is not stricter than it must be at the edges it shares with the scheduler."""
    edge = Refused(
        "edges",
        {"config": {"profiles": [{"schedulerName": "a" * 63}],
                    "preemption": {"minCandidateNodesAbsolute": INT32_MAX}},
         LE: {"leaseDuration": "1s", "renewDeadline": "500ms", "retryPeriod": "100ms",
              "enabled": True}},
        {"profiles[0].schedulerName": "a" * 63,
         "profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute": INT32_MAX,
         f"{LE}.leaseDuration": "1s", f"{LE}.renewDeadline": "500ms",
         f"{LE}.retryPeriod": "100ms"},
        "",
    )  # fmt: skip
    assert check_in_process(_config_case(rendered_config, edge)).message == "accepted"
    cfg = scheduler_config(render(tmp_path, edge.values))
    assert cfg["profiles"][0]["schedulerName"] == "a" * 63
    assert cfg["leaderElection"]["leaseDuration"] == "1s"
