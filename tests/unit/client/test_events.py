"""scheduler.client.events: aggregation into series, bounded buffer, never blocking."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
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
from tests.unit.helpers.fake_clock import FakeClock

T0 = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
POD = pod_ref("ns", "web-1", "uid-1")
KEY = (POD, WARNING, "FailedScheduling", "Scheduling", "async-scheduler", None)


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
    scheduled = (POD, NORMAL, "Scheduled", "Binding", "async-scheduler", None)
    assert agg.observe(scheduled, "x", 0.0, T0)[0] == "create"
    other = (pod_ref("ns", "web-2"), *KEY[1:])
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
    body = build_event(entry, "async-scheduler-host-1")
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
    assert "related" not in body
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
        self.gone_namespaces: set[str] = set()
        self.create_attempts = 0
        self.fail_next = 0

    async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        self.create_attempts += 1
        if event["metadata"]["namespace"] in self.gone_namespaces:
            raise NotFound(404, "NotFound", "namespaces not found")
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


async def settle(done: Callable[[], bool], turns: int = 100) -> None:
    """Give the writer task turns until `done` (no timing: the fake sink never waits)."""
    for _ in range(turns):
        if done():
            return
        await asyncio.sleep(0)
    raise AssertionError("the writer did not get there")


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
    rec, _ = recorder(sink, buffer_size=3, on_dropped=lambda reason: drops.append(reason))
    for i in range(5):  # not started: nothing drains the buffer
        rec.event(pod_ref("ns", f"p{i}"), NORMAL, "Scheduled", "Binding", "ok")
    assert rec.statistics().dropped == 2
    assert drops == ["buffer_full", "buffer_full"]
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
    rec.start()
    rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "x")
    await settle(lambda: len(sink.created) == 1)
    for _ in range(3):  # the second occurrence queues a patch; the writer sends count 4
        rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "x")
    await settle(lambda: len(sink.patched) == 1)
    for _ in range(2):  # later occurrences only count in memory
        rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "x")
    await rec.flush_series()  # the writer does this every series_interval
    assert [p[2]["series"]["count"] for p in sink.patched] == [4, 6]
    await rec.flush_series()
    assert len(sink.patched) == 2  # nothing new to say
    await rec.stop()


async def test_events_after_stop_are_dropped() -> None:
    rec, _ = recorder(FakeSink())
    await rec.stop()
    rec.event(POD, NORMAL, "Scheduled", "Binding", "late")
    assert rec.statistics().dropped == 1


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
            out = await super().create_event(event)
            written.set()
            return out

    written = asyncio.Event()
    sink = SlowSink()
    rec, _ = recorder(sink, buffer_size=50)
    rec.start()
    for i in range(200):  # 200 distinct pods, 40 at a time: more than one write at a time
        rec.event(pod_ref("ns", f"p{i}"), NORMAL, "Scheduled", "Binding", "ok")
        if i % 40 == 39:
            # the next 40 come once the writer has caught up, however slow the machine:
            # a fixed sleep here made the test fail under CPU load
            while len(sink.created) < i + 1 - 10:  # >= 10 writes pending: more will come
                written.clear()
                await written.wait()
    await rec.stop(grace=5.0)
    assert SlowSink.peak > 1
    assert rec.statistics().dropped == 0
    assert len(sink.created) == 200


# ---- drops under bursts: counted, logged, repeats before first events ----------------


async def test_a_full_buffer_evicts_a_repeat_before_any_first_event() -> None:
    sink = FakeSink()
    drops: list[str] = []
    rec, _ = recorder(sink, buffer_size=3, on_dropped=drops.append)
    a, b, c = (pod_ref("ns", n) for n in "abc")
    rec.event(a, WARNING, "FailedScheduling", "Scheduling", "no fit")
    rec.event(a, WARNING, "FailedScheduling", "Scheduling", "no fit")  # a repeat (patch)
    rec.event(b, WARNING, "FailedScheduling", "Scheduling", "no fit")
    rec.event(c, WARNING, "FailedScheduling", "Scheduling", "no fit")  # evicts a's patch
    assert drops == []  # a's count survives in its series: nothing is lost
    rec.event(a, NORMAL, "Scheduled", "Binding", "ok")  # a already has an event: a repeat
    assert drops == ["buffer_full"]
    rec.start()
    await rec.stop()
    assert sorted(e["regarding"]["name"] for e in sink.created) == ["a", "b", "c"]
    assert all(e["reason"] == "FailedScheduling" for e in sink.created)
    # a's evicted repeat rode on its create
    assert [e.get("series", {}).get("count") for e in sink.created] == [2, None, None]


async def test_only_a_buffer_of_first_events_drops_a_first_event_and_counts_it() -> None:
    sink = FakeSink()
    drops: list[str] = []
    rec, _ = recorder(sink, buffer_size=2, on_dropped=drops.append)
    for name in "abc":
        rec.event(pod_ref("ns", name), WARNING, "FailedScheduling", "Scheduling", "no fit")
    assert drops == ["buffer_full"] and rec.statistics().dropped == 1
    rec.start()
    await settle(lambda: len(sink.created) == 2)
    assert [e["regarding"]["name"] for e in sink.created] == ["b", "c"]  # the oldest went
    # the lost event's series is forgotten: a later occurrence creates a fresh Event
    rec.event(pod_ref("ns", "a"), WARNING, "FailedScheduling", "Scheduling", "no fit")
    await rec.stop()
    assert [e["regarding"]["name"] for e in sink.created] == ["b", "c", "a"]
    assert all("series" not in e for e in sink.created)


async def test_drops_are_logged_at_most_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec, clock = recorder(FakeSink(), buffer_size=1, drop_log_interval=10.0)
    with caplog.at_level("WARNING", logger="scheduler.client.events"):
        for i in range(50):
            rec.event(pod_ref("ns", f"p{i}"), NORMAL, "Scheduled", "Binding", "ok")
        assert len([r for r in caplog.records if "events dropped" in r.message]) == 1
        clock.advance(10.0)
        rec.event(pod_ref("ns", "late"), NORMAL, "Scheduled", "Binding", "ok")
    lines = [r.message for r in caplog.records if "events dropped" in r.message]
    assert len(lines) == 2
    assert "buffer_full=49" in lines[1] and "total=50" in lines[1]


async def test_an_event_answered_404_is_dropped_at_once_and_never_resent() -> None:
    sink = FakeSink()
    sink.gone_namespaces.add("deleted-ns")
    drops: list[str] = []
    rec, clock = recorder(sink, series_interval=30.0, on_dropped=drops.append)
    gone = pod_ref("deleted-ns", "p")
    rec.start()
    rec.event(gone, WARNING, "FailedScheduling", "Scheduling", "no fit")
    await settle(lambda: sink.create_attempts == 1)
    await settle(lambda: drops == ["rejected"])
    for _ in range(3):  # the periodic flush has nothing to resend
        clock.advance(31.0)
        await rec.flush_series()
    assert sink.create_attempts == 1 and sink.patched == []
    await rec.stop()
    assert sink.create_attempts == 1
    assert rec.statistics().series == 0


async def test_what_is_still_buffered_when_stop_gives_up_is_counted() -> None:
    class StuckSink(FakeSink):
        async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
            await asyncio.Event().wait()  # never answers
            raise AssertionError

    drops: list[str] = []
    rec, _ = recorder(StuckSink(), concurrency=1, on_dropped=drops.append)
    rec.start()
    for i in range(3):
        rec.event(pod_ref("ns", f"p{i}"), NORMAL, "Scheduled", "Binding", "ok")
    await rec.stop(grace=0.05)
    # one was being written when the writer was cancelled; the two behind it are counted
    assert drops == ["stopped", "stopped"]


async def test_each_event_names_the_profile_that_reports_it_and_its_related_object() -> None:
    """upstream: one recorder per profile (pkg/scheduler/profile/profile.go newProfile), so
    the same pod's events from two profiles are two series, each under its own name; a
    Preempted event names the preemptor as related (framework/preemption/executor.go)."""
    sink = FakeSink()
    rec = EventRecorder(sink, reporting_instance="i-1", clock=FakeClock(), wall=lambda: T0)
    rec.start()
    preemptor = pod_ref("ns", "high", "uid-h")
    rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "x", controller="first")
    rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "x", controller="second")
    rec.event(POD, NORMAL, "Preempted", "Preempting", "y", controller="second", related=preemptor)
    await settle(lambda: len(sink.created) == 3)
    assert [e["reportingController"] for e in sink.created] == ["first", "second", "second"]
    assert all(e.get("series") is None for e in sink.created)
    assert "related" not in sink.created[0]
    assert sink.created[2]["related"] == preemptor.as_dict()
    with pytest.raises(ValueError, match="names no reporting controller"):
        rec.event(POD, WARNING, "FailedScheduling", "Scheduling", "x")
    await rec.stop()
