"""scheduler.client.events: aggregation into series, bounded buffer, never blocking."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from scheduler.client.errors import NotFound, ServerError
from scheduler.client.events import (
    NORMAL,
    WARNING,
    EventAggregator,
    EventRecorder,
    build_event,
    micro_time,
    pod_ref,
)
from scheduler.clock import FakeClock

T0 = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
POD = pod_ref("ns", "web-1", "uid-1")
KEY = (POD, WARNING, "FailedScheduling", "Scheduling")


def test_micro_time_is_rfc3339_with_microseconds() -> None:
    assert micro_time(T0) == "2024-05-01T12:00:00.123456Z"


def test_first_occurrence_creates_the_second_patches_later_ones_count() -> None:
    agg = EventAggregator()
    assert agg.observe(KEY, "0/3 nodes", 0.0, T0)[0] == "create"
    assert agg.observe(KEY, "0/4 nodes", 1.0, T0)[0] == "patch"
    what, entry = agg.observe(KEY, "0/5 nodes", 2.0, T0)
    assert what == "count"
    assert entry.count == 3
    assert entry.note == "0/5 nodes"


def test_different_reason_or_object_is_a_different_series() -> None:
    agg = EventAggregator()
    assert agg.observe(KEY, "x", 0.0, T0)[0] == "create"
    assert agg.observe((POD, NORMAL, "Scheduled", "Binding"), "x", 0.0, T0)[0] == "create"
    other = (pod_ref("ns", "web-2"), WARNING, "FailedScheduling", "Scheduling")
    assert agg.observe(other, "x", 0.0, T0)[0] == "create"
    assert len(agg) == 3


def test_a_series_idle_past_the_expiry_starts_over_with_a_new_event() -> None:
    agg = EventAggregator(series_expiry=360.0)
    _, first = agg.observe(KEY, "x", 0.0, T0)
    what, second = agg.observe(KEY, "x", 361.0, T0 + dt.timedelta(seconds=361))
    assert what == "create"
    assert second.name != first.name


def test_expire_forgets_idle_series() -> None:
    agg = EventAggregator(series_expiry=10.0)
    agg.observe(KEY, "x", 0.0, T0)
    assert agg.expire(5.0) == 0
    assert agg.expire(11.0) == 1
    assert len(agg) == 0


def test_event_body_is_events_k8s_io_v1_with_series_and_limits() -> None:
    agg = EventAggregator()
    _, entry = agg.observe(KEY, "n" * 2000, 0.0, T0)
    later = T0 + dt.timedelta(seconds=5)
    agg.observe(KEY, "n" * 2000, 5.0, later)
    body = build_event(entry, "async-scheduler", "async-scheduler-host-1")
    assert body["apiVersion"] == "events.k8s.io/v1"
    assert body["metadata"]["namespace"] == "ns"
    assert body["metadata"]["name"].startswith("web-1.")
    assert body["regarding"] == {
        "kind": "Pod",
        "name": "web-1",
        "namespace": "ns",
        "uid": "uid-1",
        "apiVersion": "v1",
    }
    assert body["reportingController"] == "async-scheduler"
    assert (body["type"], body["reason"], body["action"]) == (
        WARNING,
        "FailedScheduling",
        "Scheduling",
    )
    assert len(body["note"].encode()) == 1024
    assert body["eventTime"] == "2024-05-01T12:00:00.123456Z"
    assert body["series"] == {"count": 2, "lastObservedTime": micro_time(later)}


class FakeSink:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, str, dict[str, Any]]] = []
        self.missing: set[str] = set()
        self.fail_next = 0

    async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        if self.fail_next:
            self.fail_next -= 1
            raise ServerError(500, "InternalError")
        self.created.append(event)
        return event

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        if name in self.missing:
            raise NotFound(404, "NotFound")
        self.patched.append((namespace, name, patch))
        return patch


def recorder(sink: FakeSink, **kwargs: Any) -> tuple[EventRecorder, FakeClock]:
    clock = FakeClock()
    rec = EventRecorder(
        sink,
        reporting_controller="async-scheduler",
        reporting_instance="i-1",
        clock=clock,
        wall=lambda: T0,
        series_interval=kwargs.pop("series_interval", 3600.0),
        **kwargs,
    )
    return rec, clock


async def test_a_storm_of_failed_scheduling_becomes_one_event_and_one_series() -> None:
    sink = FakeSink()
    rec, clock = recorder(sink)
    rec.start()
    for i in range(100):
        rec.event(POD, WARNING, "FailedScheduling", "Scheduling", f"0/{i} nodes")
        clock.advance(0.1)
        await asyncio.sleep(0)  # the writer gets a turn between scheduling cycles
    assert len(sink.created) == 1
    assert "series" not in sink.created[0]
    assert len(sink.patched) == 1  # the second occurrence, sent at once (count as then)
    assert sink.patched[0][2]["series"]["count"] < 10
    await rec.stop()  # the final flush reports the whole count
    assert len(sink.patched) == 2
    assert sink.patched[-1][2]["series"]["count"] == 100
    assert rec.statistics().created == 1


async def test_event_never_blocks_and_drops_the_oldest_when_full() -> None:
    sink = FakeSink()
    drops: list[int] = []
    rec, _ = recorder(sink, buffer_size=3, on_dropped=lambda: drops.append(1))
    for i in range(5):  # not started: nothing drains the buffer
        rec.event(pod_ref("ns", f"p{i}"), NORMAL, "Scheduled", "Binding", "ok")
    assert rec.dropped == 2
    assert len(drops) == 2
    rec.start()
    await rec.stop()
    assert [e["regarding"]["name"] for e in sink.created] == ["p2", "p3", "p4"]


async def test_a_series_whose_event_is_gone_is_created_again() -> None:
    sink = FakeSink()
    rec, _ = recorder(sink)
    rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "a")
    rec.start()
    await asyncio.sleep(0)
    sink.missing.add(sink.created[0]["metadata"]["name"])
    rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "b")
    await rec.stop()
    assert len(sink.created) == 2
    assert sink.created[1]["series"]["count"] == 2


async def test_api_failures_are_counted_not_raised() -> None:
    sink = FakeSink()
    sink.fail_next = 1
    rec, _ = recorder(sink)
    rec.start()
    rec.event(POD, NORMAL, "Scheduled", "Binding", "Successfully assigned ns/web-1 to n1")
    rec.event(pod_ref("ns", "web-2"), NORMAL, "Scheduled", "Binding", "ok")
    await rec.stop()
    assert rec.statistics().failed == 1
    assert len(sink.created) == 1


async def test_the_periodic_flush_patches_grown_series() -> None:
    sink = FakeSink()
    rec, _ = recorder(sink, series_interval=10.0)
    for _ in range(4):
        rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "x")
    await rec.flush_series()  # the writer would do this every series_interval
    assert [p[2]["series"]["count"] for p in sink.patched] == [4]
    await rec.flush_series()
    assert len(sink.patched) == 1  # nothing new to say


async def test_events_after_stop_are_dropped() -> None:
    rec, _ = recorder(FakeSink())
    await rec.stop()
    rec.event(POD, NORMAL, "Scheduled", "Binding", "late")
    assert rec.dropped == 1


def test_an_unknown_event_type_is_refused() -> None:
    rec, _ = recorder(FakeSink())
    with pytest.raises(ValueError):
        rec.event(POD, "Error", "X", "Y", "z")


async def test_repeats_queued_before_the_create_is_written_ride_on_the_create() -> None:
    sink = FakeSink()
    rec, _ = recorder(sink)
    for _ in range(5):
        rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "x")
    rec.start()
    await rec.stop()
    assert [e["series"]["count"] for e in sink.created] == [5]
    assert sink.patched == []


async def test_writes_overlap_so_a_slow_api_does_not_drop_events_at_the_bind_rate() -> None:
    class SlowSink(FakeSink):
        in_flight = 0
        peak = 0

        async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
            SlowSink.in_flight += 1
            SlowSink.peak = max(SlowSink.peak, SlowSink.in_flight)
            await asyncio.sleep(0.01)
            SlowSink.in_flight -= 1
            return await super().create_event(event)

    sink = SlowSink()
    rec, _ = recorder(sink, buffer_size=50)
    rec.start()
    for i in range(200):  # 200 distinct pods, faster than one write at a time could keep up
        rec.event(pod_ref("ns", f"p{i}"), NORMAL, "Scheduled", "Binding", "ok")
        if i % 40 == 39:
            await asyncio.sleep(0.05)
    await rec.stop(grace=5.0)
    assert SlowSink.peak > 1
    assert rec.dropped == 0
    assert len(sink.created) == 200
