"""`run --config`: validated before the runtime is imported; every failure is exit 2 and
one line on stderr."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import scheduler.catalog
from scheduler import cli


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = cli.main(argv)
    return code, capsys.readouterr().err.splitlines()


def test_a_bad_file_exits_2_without_importing_the_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "scheduler.app", raising=False)
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\n"
                    "kind: KubeSchedulerConfiguration\nparallelism: -1\n")  # fmt: skip
    code, err = _run(["run", "--config", str(path)], capsys)
    assert code == 2
    assert err == [
        "kube-async-scheduler: invalid configuration: parallelism: "
        "should be an integer value greater than 0, got -1"
    ]
    assert "scheduler.app" not in sys.modules


def test_a_loader_bug_is_still_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: str, features: object = None) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(scheduler.catalog, "load_config", broken)
    code, err = _run(["run", "--config", str(tmp_path / "c.yaml")], capsys)
    assert code == 2
    assert len(err) == 1
    assert err[0].startswith("kube-async-scheduler: invalid configuration: ")
    assert "RuntimeError: boom\\nsecond line" in err[0]


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["run", "--config", str(tmp_path / "absent.yaml")], capsys)
    assert code == 2
    assert len(err) == 1 and "cannot read config file" in err[0]
