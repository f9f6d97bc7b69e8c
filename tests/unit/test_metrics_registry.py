"""scheduler.metrics: names as upstream, fresh registries, bucket layouts, coroutine timing."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from scheduler.metrics import SchedulerMetrics, exponential_buckets

UPSTREAM_NAMES = [
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_scheduling_algorithm_duration_seconds",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_pod_scheduling_attempts",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims",
    "scheduler_preemption_goroutines_execution_total",
    "scheduler_preemption_goroutines_duration_seconds",
    "scheduler_goroutines",
    "scheduler_pending_pods",
    "scheduler_queue_incoming_pods_total",
    "scheduler_unschedulable_pods",
    "scheduler_cache_size",
]

OWN_NAMES = [
    "scheduler_binding_duration_seconds",
    "scheduler_api_requests_total",
    "scheduler_api_request_duration_seconds",
    "scheduler_api_dispatcher_pending_calls",
    "scheduler_informer_events_total",
    "scheduler_informer_relists_total",
    "scheduler_leader_election_is_leader",
    "scheduler_pod_status_patches_total",
    "scheduler_events_dropped_total",
    "scheduler_api_write_failures_total",
]


def _exposed_names(m: SchedulerMetrics) -> set[str]:
    names: set[str] = set()
    for family in m.registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


@pytest.mark.parametrize("name", UPSTREAM_NAMES + OWN_NAMES)
def test_every_metric_is_registered_under_its_name(name: str) -> None:
    assert name in _exposed_names(SchedulerMetrics())


def test_no_metric_outside_the_scheduler_prefix() -> None:
    assert all(n.startswith("scheduler_") for n in _exposed_names(SchedulerMetrics()))


def test_two_instances_do_not_share_samples() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.schedule_attempts.labels(result="scheduled", profile="p").inc()
    value_a = a.registry.get_sample_value(
        "scheduler_schedule_attempts_total", {"result": "scheduled", "profile": "p"}
    )
    value_b = b.registry.get_sample_value(
        "scheduler_schedule_attempts_total", {"result": "scheduled", "profile": "p"}
    )
    assert value_a == 1.0
    assert value_b is None


@pytest.mark.parametrize(
    ("attr", "first", "last", "count"),
    [
        ("scheduling_attempt_duration", 0.001, 0.001 * 2**14, 15),
        ("pod_scheduling_sli_duration", 0.01, 0.01 * 2**19, 20),
        ("pod_scheduling_attempts", 1, 16, 5),
        ("preemption_victims", 1, 64, 7),
    ],
)
def test_buckets_are_as_upstream(attr: str, first: float, last: float, count: int) -> None:
    histogram = getattr(SchedulerMetrics(), attr)
    bounds = [b for b in histogram._upper_bounds if b != float("inf")]
    assert len(bounds) == count
    assert bounds[0] == pytest.approx(first)
    assert bounds[-1] == pytest.approx(last)


@pytest.mark.parametrize(
    ("args", "expected"),
    [((1, 2, 3), (1, 2, 4)), ((0.5, 3, 2), (0.5, 1.5))],
)
def test_exponential_buckets(args: tuple[float, float, int], expected: tuple[float, ...]) -> None:
    assert exponential_buckets(*args) == pytest.approx(expected)


@pytest.mark.parametrize("args", [(0, 2, 3), (1, 1, 3), (1, 2, 0)])
def test_exponential_buckets_rejects_nonsense(args: tuple[float, float, int]) -> None:
    with pytest.raises(ValueError):
        exponential_buckets(*args)


def test_exposition_renders() -> None:
    m = SchedulerMetrics()
    m.pending_pods.labels(queue="active").set(3)
    text = generate_latest(m.registry).decode()
    assert 'scheduler_pending_pods{queue="active"} 3.0' in text
