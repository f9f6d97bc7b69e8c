"""LabelledChildren hands back the same child labels() would, so samples are unchanged."""

from __future__ import annotations

from scheduler.metrics import LabelledChildren, SchedulerMetrics


def test_cached_child_is_the_labels_child_and_counts_the_same() -> None:
    m = SchedulerMetrics()
    requests = LabelledChildren(m.api_requests)
    requests("POST", "bindings", "201").inc()
    requests("POST", "bindings", "201").inc()
    requests("GET", "pods", "200").inc()
    assert requests("POST", "bindings", "201") is m.api_requests.labels(
        verb="POST", resource="bindings", code="201"
    )
    value = m.registry.get_sample_value
    assert (
        value(
            "scheduler_api_requests_total", {"verb": "POST", "resource": "bindings", "code": "201"}
        )
        == 2.0
    )
    assert (
        value("scheduler_api_requests_total", {"verb": "GET", "resource": "pods", "code": "200"})
        == 1.0
    )


def test_no_series_before_first_use() -> None:
    m = SchedulerMetrics()
    LabelledChildren(m.goroutines)
    assert m.registry.get_sample_value("scheduler_goroutines", {"operation": "binding"}) is None
