"""The fail-over benchmark's pure parts: each phase's figures from recorded instants, the
side-by-side rows and table, the clock mappings and /proc/PID/stat. No cluster."""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

import pytest

from bench import failover, failover_cli, procs
from bench import failover_figures as ff
from bench import pinned_workloads as pw
from bench.failover_figures import PhaseTimes


def test_failover_figures_are_cut_from_the_kill_and_the_lease() -> None:
    t = PhaseTimes(
        origin=100.0,
        pods=3,
        binds={"a": 118.5, "b": 119.0, "c": 121.25},
        acquired=118.0,
        cpu_at_origin=2.0,
        cpu_at_end=3.5,
    )
    f = ff.phase_figures(t)
    assert f == {
        "pods": 3,
        "bound": 3,
        "complete": True,
        "origin_to_lease_s": 18.0,
        "origin_to_first_bind_s": 18.5,
        "origin_to_all_bound_s": 21.25,
        "lease_to_first_bind_s": 0.5,
        "first_to_last_bind_s": 2.75,
        "cpu_s": 1.5,
    }


def test_an_incomplete_phase_has_no_all_bound_time_and_no_cpu() -> None:
    t = PhaseTimes(
        origin=0.0,
        pods=3,
        binds={"a": 4.0, "b": 5.0},
        acquired=None,
        cpu_at_origin=0.0,
        cpu_at_end=9.0,
    )
    f = ff.phase_figures(t)
    assert f["complete"] is False
    assert f["bound"] == 2
    assert f["origin_to_first_bind_s"] == 4.0
    assert f["origin_to_all_bound_s"] is None
    assert f["first_to_last_bind_s"] is None
    assert f["cpu_s"] is None
    assert f["lease_to_first_bind_s"] is None  # no lease seen


def test_no_bind_at_all_gives_no_times() -> None:
    f = ff.phase_figures(PhaseTimes(origin=1.0, pods=2, binds={}, acquired=3.0))
    assert f["origin_to_first_bind_s"] is None
    assert f["origin_to_lease_s"] == 2.0


def test_side_by_side_gives_ours_over_upstream_per_figure() -> None:
    figures = {
        "upstream": {
            ff.FAILOVER: {"origin_to_first_bind_s": 18.0, "cpu_s": 4.0},
            ff.COLD_START: {"origin_to_first_bind_s": 4.0},
        },
        "ours-async": {
            ff.FAILOVER: {"origin_to_first_bind_s": 18.9, "cpu_s": 1.0},
            ff.COLD_START: {"origin_to_first_bind_s": 6.0},
        },
    }
    rows = {label: (up, us, r) for label, up, us, r in ff.side_by_side(figures)}
    assert len(rows) == len(ff.ROWS)
    assert rows["fail-over: kill -> first bind (s)"] == (18.0, 18.9, 1.05)
    assert rows["fail-over: new leader CPU, kill -> all bound (s)"] == (4.0, 1.0, 0.25)
    assert rows["cold start: process start -> first bind (s)"] == (4.0, 6.0, 1.5)
    # a figure either side lacks has no ratio
    assert rows["fail-over: kill -> all bound (s)"] == (None, None, None)


def test_side_by_side_without_one_contender_keeps_the_other() -> None:
    rows = ff.side_by_side({"upstream": {ff.FAILOVER: {"cpu_s": 2.0}}})
    row = next(r for r in rows if r[0] == "fail-over: new leader CPU, kill -> all bound (s)")
    assert row == (row[0], 2.0, None, None)


def test_table_prints_every_row_with_its_ratio() -> None:
    text = ff.table([("kill -> first bind (s)", 18.3, 18.5, 1.01), ("cpu (s)", None, 1.0, None)])
    lines = text.splitlines()
    assert lines[0] == "| figure | upstream | ours | ours/upstream |"
    assert lines[2] == "| kill -> first bind (s) | 18.30 | 18.50 | 1.01x |"
    assert lines[3] == "| cpu (s) | - | 1.00 | - |"


def test_lease_micro_time_maps_onto_the_monotonic_clock() -> None:
    wall = ff.rfc3339_epoch("2026-12-06T01:50:00.250000Z")
    expected = datetime.datetime(2026, 12, 6, 1, 50, 0, 250000, tzinfo=datetime.UTC).timestamp()
    assert wall == pytest.approx(expected)
    # read together: wall 1000.0 was monotonic 50.0
    assert ff.wall_to_monotonic(1002.5, 1000.0, 50.0) == pytest.approx(52.5)
    assert ff.wall_to_monotonic(999.0, 1000.0, 50.0) == pytest.approx(49.0)


def test_cpu_seconds_are_utime_plus_stime_counted_after_the_command_name() -> None:
    # a command name with a space and a ")" in it must not shift the fields
    stat = "4242 (python -m x)) S 1 4242 4242 0 -1 4194304 10 0 0 0 250 125 0 0 20 0 3 0"
    assert ff.cpu_seconds_from_stat(stat, 100) == pytest.approx(3.75)
    assert ff.cpu_seconds_from_stat(stat, 250) == pytest.approx(1.5)


def test_both_contenders_get_the_same_explicit_lease_settings(tmp_path: Path) -> None:
    le = failover.leader_election("kas-bench-failover-3")
    assert le["leaderElect"] is True
    assert (le["leaseDuration"], le["renewDeadline"], le["retryPeriod"]) == ("15s", "10s", "2s")
    assert le["resourceName"] == "kas-bench-failover-3"
    up = procs.scheduler_config("upstream", tmp_path / "kc", 5000.0, 5000, le)
    ours = procs.scheduler_config("ours-async", tmp_path / "kc", 5000.0, 5000, le)
    assert up["leaderElection"] == ours["leaderElection"] == le
    # without it leader election stays off, as every other benchmark runs
    assert procs.scheduler_config("upstream", tmp_path / "kc", 1.0, 1)["leaderElection"] == {
        "leaderElect": False
    }


def test_the_workload_is_the_bound_pods_and_the_pending_ones() -> None:
    w = failover.workload(failover.FailoverOptions(nodes=10, bound_pods=40, pending=7))
    init = list(pw.init_pods(w, 1))
    assert len(init) == 40
    assert all(p["spec"].get("nodeName") for p in init)
    pending = list(pw.measured_pods(w, 1))
    assert len(pending) == 7
    assert not any(p["spec"].get("nodeName") for p in pending)


def test_figures_by_contender_skips_runs_without_figures() -> None:
    runs = [
        {"phase": ff.FAILOVER, "scheduler": "upstream", "figures": {"cpu_s": 1.0}},
        {"phase": ff.COLD_START, "scheduler": "upstream", "figures": None},
        {"phase": ff.FAILOVER, "scheduler": "ours-async", "figures": {"cpu_s": 0.5}},
    ]
    assert failover_cli.figures_by_contender(runs) == {
        "upstream": {ff.FAILOVER: {"cpu_s": 1.0}},
        "ours-async": {ff.FAILOVER: {"cpu_s": 0.5}},
    }


def test_proc_cpu_seconds_reads_a_live_process_and_none_for_a_gone_one() -> None:
    before = failover.proc_cpu_seconds(os.getpid())
    assert before is not None
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # burn a little CPU
        pass
    after = failover.proc_cpu_seconds(os.getpid())
    assert after is not None and after >= before
    assert failover.proc_cpu_seconds(2**22 + 7) is None  # above pid_max: never a process
