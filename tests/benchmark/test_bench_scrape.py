"""bench/scrape.py: the pod-group attempt figures read from /metrics text (what
kube-scheduler and ours serve), and how the pinned suite starts both schedulers to serve
it. In memory: no process, no port."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import procs, scrape

# the exposition as kube-scheduler v1.37.2 writes it (buckets cut short), two profiles so
# that the sum over the labels that are not selected shows
UPSTREAM = """\
# HELP scheduler_podgroup_scheduling_attempt_duration_seconds [ALPHA] Pod group scheduling attempt latency in seconds
# TYPE scheduler_podgroup_scheduling_attempt_duration_seconds histogram
scheduler_podgroup_scheduling_attempt_duration_seconds_bucket{profile="kas-bench",result="scheduled",le="0.001"} 0
scheduler_podgroup_scheduling_attempt_duration_seconds_bucket{profile="kas-bench",result="scheduled",le="+Inf"} 10
scheduler_podgroup_scheduling_attempt_duration_seconds_sum{profile="kas-bench",result="scheduled"} 0.04
scheduler_podgroup_scheduling_attempt_duration_seconds_count{profile="kas-bench",result="scheduled"} 10
scheduler_podgroup_scheduling_attempt_duration_seconds_bucket{profile="other",result="scheduled",le="+Inf"} 10
scheduler_podgroup_scheduling_attempt_duration_seconds_sum{profile="other",result="scheduled"} 0.02
scheduler_podgroup_scheduling_attempt_duration_seconds_count{profile="other",result="scheduled"} 10
scheduler_podgroup_scheduling_attempt_duration_seconds_sum{profile="kas-bench",result="waiting_on_preemption"} 1.5
scheduler_podgroup_scheduling_attempt_duration_seconds_count{profile="kas-bench",result="waiting_on_preemption"} 5
# HELP scheduler_podgroup_scheduling_algorithm_duration_seconds [ALPHA] Pod group scheduling algorithm latency in seconds
# TYPE scheduler_podgroup_scheduling_algorithm_duration_seconds histogram
scheduler_podgroup_scheduling_algorithm_duration_seconds_bucket{le="+Inf"} 25
scheduler_podgroup_scheduling_algorithm_duration_seconds_sum 0.5
scheduler_podgroup_scheduling_algorithm_duration_seconds_count 25
# a histogram whose name starts the same is not taken for it
scheduler_podgroup_scheduling_attempt_duration_seconds_extra_count{result="scheduled"} 99
scheduler_podgroup_schedule_attempts_total{profile="kas-bench",result="scheduled"} 20
"""

# prometheus_client's exposition (ours): label order and float formatting differ
OURS = """\
scheduler_podgroup_scheduling_attempt_duration_seconds_bucket{le="0.001",profile="kas-bench",result="scheduled"} 3.0
scheduler_podgroup_scheduling_attempt_duration_seconds_count{result="scheduled",profile="kas-bench"} 4.0
scheduler_podgroup_scheduling_attempt_duration_seconds_sum{result="scheduled",profile="kas-bench"} 0.008
scheduler_podgroup_scheduling_attempt_duration_seconds_created{result="scheduled",profile="kas-bench"} 1.7e+09
"""


def test_histograms_read_sum_and_count_per_series_in_either_label_order() -> None:
    up = scrape.histograms(UPSTREAM, scrape.ATTEMPT_METRIC)
    key = (("profile", "kas-bench"), ("result", "scheduled"))
    assert up[key] == (0.04, 10)
    assert up[(("profile", "kas-bench"), ("result", "waiting_on_preemption"))] == (1.5, 5)
    assert len(up) == 3  # the _extra_count and the counter are not series of it
    assert scrape.histograms(OURS, scrape.ATTEMPT_METRIC) == {key: (0.008, 4.0)}
    assert scrape.histograms(UPSTREAM, scrape.ALGORITHM_METRIC) == {(): (0.5, 25)}
    assert scrape.histograms("", scrape.ATTEMPT_METRIC) == {}


def test_label_values_are_unescaped() -> None:
    text = 'm_count{a="x\\"y",b="c\\\\d",c="e,f=g"} 2\nm_sum{a="x\\"y",b="c\\\\d",c="e,f=g"} 1\n'
    assert scrape.histograms(text, "m") == {(("a", 'x"y'), ("b", "c\\d"), ("c", "e,f=g")): (1, 2)}


def test_the_mean_is_summed_sums_over_summed_counts_of_the_matching_series() -> None:
    t = scrape.histograms(UPSTREAM, scrape.ATTEMPT_METRIC)
    # result=scheduled across both profiles: (0.04 + 0.02) / 20, as scheduler_perf's Average
    assert scrape.mean_of(t, {"result": "scheduled"}) == {"attempts": 20, "mean_ms": 3.0}
    assert scrape.mean_of(t) == {"attempts": 25, "mean_ms": 62.4}
    assert scrape.mean_of(t, {"result": "error"}) == {"attempts": 0, "mean_ms": None}


def test_delta_is_what_each_series_gained_and_a_new_series_starts_at_zero() -> None:
    a = (("result", "scheduled"),)
    b = (("result", "unschedulable"),)
    before = {a: (1.0, 100.0)}
    after = {a: (1.3, 150.0), b: (0.2, 2.0)}
    d = scrape.delta(before, after)
    assert d[a] == pytest.approx((0.3, 50.0))
    assert d[b] == (0.2, 2.0)
    assert scrape.mean_of(d, {"result": "scheduled"}) == {"attempts": 50, "mean_ms": 6.0}


def test_attempt_figures_of_a_run_against_a_scrape_at_its_start() -> None:
    fresh = scrape.attempt_figures(UPSTREAM)
    assert fresh["metric"] == "scheduler_podgroup_scheduling_attempt_duration_seconds"
    assert fresh["scheduled"] == {"attempts": 20, "mean_ms": 3.0}
    assert fresh["all"] == {"attempts": 25, "mean_ms": 62.4}
    assert fresh["by_result"] == {
        "scheduled": {"attempts": 20, "mean_ms": 3.0},
        "waiting_on_preemption": {"attempts": 5, "mean_ms": 300.0},
    }
    assert fresh["algorithm"] == {"attempts": 25, "mean_ms": 20.0}
    # the same text at both ends: nothing happened in between
    same = scrape.attempt_figures(UPSTREAM, before=UPSTREAM)
    assert same["scheduled"] == {"attempts": 0, "mean_ms": None}
    assert same["by_result"]["scheduled"] == {"attempts": 0, "mean_ms": None}
    # a process that never ran a pod-group cycle (the gate off) has no series
    assert scrape.attempt_figures("up 1\n")["all"] == {"attempts": 0, "mean_ms": None}


def _argv(contender: str, tmp_path: Path, port: int | None) -> list[str]:
    return procs.command_for(
        contender,
        run_dir=tmp_path,
        bin_dir=tmp_path,
        kubeconfig=tmp_path / "kubeconfig",
        qps=10,
        burst=10,
        concurrency=1,
        feature_gates=["--feature-gates=GenericWorkload=true"],
        metrics_port=port,
    )


def test_a_metrics_port_opens_metrics_on_loopback_for_both_schedulers(tmp_path: Path) -> None:
    up = _argv("upstream", tmp_path, 12345)
    assert "--secure-port=12345" in up and "--bind-address=127.0.0.1" in up
    assert "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics" in up
    assert up[-1] == "--feature-gates=GenericWorkload=true"
    ours = _argv("ours-async", tmp_path, 12345)
    assert ours[ours.index("--secure-port") + 1] == "12345"
    assert ours[ours.index("--bind-address") + 1] == "127.0.0.1"
    assert ours[ours.index("--authorization-always-allow-paths") + 1].endswith(",/metrics")


def test_without_a_metrics_port_the_command_lines_are_as_before(tmp_path: Path) -> None:
    up = _argv("upstream", tmp_path, None)
    assert up[2:4] == ["--secure-port=0", "-v=1"]
    assert not any(a.startswith(("--bind-address", "--authorization")) for a in up)
    ours = _argv("ours-async", tmp_path, None)
    assert ours[ours.index("--secure-port") + 1] == "0"
    assert "--authorization-always-allow-paths" not in ours
    assert "--secure-port" not in " ".join(_argv("ceiling", tmp_path, 12345))
