"""scheduler.loop: a cycle that crashes requeues its pod with backoff, tells it with a
FailedScheduling event and counts scheduler_schedule_attempts_total{result="error"}, as
upstream's handleSchedulingFailure with an error status; a bind answered 409 because the
pod is being deleted is logged as such."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.cache import Cache, Nominator
from scheduler.client.errors import Conflict
from scheduler.framework.status import Code, Status
from scheduler.loop import SchedulingLoop
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.queue import SchedulingQueue
from scheduler.status_writer import StatusWriter
from tests.unit.builders import make_framework, make_node, make_pod
from tests.unit.fake_clock import FakeClock


class Events:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    def event(
        self, regarding: Any, type: str, reason: str, action: str, note: str, **kw: Any
    ) -> None:
        self.sent.append((regarding.name, reason, note))


async def _no_patch(namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    return {}


def build() -> tuple[SchedulingLoop, SchedulingQueue[PodInfo], Events, SchedulerMetrics, Any]:
    clock = FakeClock()
    m = SchedulerMetrics()
    cache = Cache()
    cache.add_node(make_node("n1").obj())
    queue: SchedulingQueue[PodInfo] = SchedulingQueue(clock=clock, metrics=m)
    fwk = make_framework()
    events = Events()
    loop = SchedulingLoop(
        cache=cache,
        queue=queue,
        nominator=Nominator(),
        frameworks={fwk.profile_name: fwk},
        events=events,  # type: ignore[arg-type]
        status_writer=StatusWriter(_no_patch, metrics=m),
        metrics=m,
        clock=clock,
    )
    return loop, queue, events, m, fwk


def attempts(m: SchedulerMetrics, result: str) -> float:
    value = m.registry.get_sample_value(
        "scheduler_schedule_attempts_total", {"result": result, "profile": "default-scheduler"}
    )
    return value or 0.0


async def test_an_exception_in_the_algorithm_requeues_with_backoff_an_event_and_a_metric(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, queue, events, m, fwk = build()

    def overflow(*args: Any, **kwargs: Any) -> Any:
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(fwk, "schedule_pod", overflow)
    p = make_pod("web").obj()
    queue.add(p)
    info = await queue.pop()
    assert info is not None
    loop.schedule_one(info)
    assert queue.where(p.uid) == "backoff"  # not dropped, and not retried at once
    assert attempts(m, "error") == 1.0
    assert events.sent == [
        (
            "web",
            "FailedScheduling",
            "internal error in the scheduling cycle: OverflowError: "
            "int too large to convert to float",
        )
    ]


async def test_a_crash_after_assume_undoes_the_assumption_before_requeueing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, queue, events, m, fwk = build()

    def broken_reserve(*args: Any) -> Status:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(fwk, "run_reserve", broken_reserve)
    p = make_pod("web").obj()
    queue.add(p)
    info = await queue.pop()
    assert info is not None
    loop.schedule_one(info)
    assert not loop.cache.is_assumed(p)
    assert loop.cache.get_pod(p.uid) is None  # its room on n1 is free again
    assert queue.where(p.uid) == "backoff"
    assert loop.binds_in_flight == 0
    assert attempts(m, "error") == 1.0
    assert "ZeroDivisionError" in events.sent[0][2]


async def test_the_loop_survives_when_even_failure_handling_crashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, queue, _, _, _ = build()

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("broken")

    monkeypatch.setattr(loop, "schedule_one", boom)
    p = make_pod("web").obj()
    queue.add(p)
    queue.run()
    task = asyncio.create_task(loop.run())
    try:
        for _ in range(100):  # turns, not time: the loop pops, crashes and requeues
            if queue.where(p.uid) == "backoff":
                break
            await asyncio.sleep(0)
        assert queue.where(p.uid) == "backoff"
        assert not task.done()  # the loop goes on
    finally:
        loop.stop()
        queue.close()
        await task


@pytest.mark.parametrize(
    ("message", "logged"),
    [
        (
            'Operation cannot be fulfilled on pods/binding "web": pod web is being deleted, '
            "cannot be assigned to a host",
            "pod is being deleted",
        ),
        (
            'Operation cannot be fulfilled on pods/binding "web": pod web is already assigned '
            'to node "n2"',
            "already bound",
        ),
    ],
)
async def test_a_409_on_bind_is_logged_by_its_cause(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    message: str,
    logged: str,
) -> None:
    loop, queue, _, _, fwk = build()

    async def conflict(*args: Any) -> Status:
        err = Conflict(409, "Conflict", message)
        return Status(Code.ERROR, (str(err),), "DefaultBinder", err)

    monkeypatch.setattr(fwk, "run_bind", conflict)
    p = make_pod("web").obj()
    queue.add(p)
    info = await queue.pop()
    assert info is not None
    with caplog.at_level("INFO", logger="scheduler.loop"):
        loop.schedule_one(info)
        await loop.drain_binds(5.0)
    lines = [r.getMessage() for r in caplog.records if "bind conflict" in r.getMessage()]
    assert lines == [f"bind conflict pod=default/web node=n1: {logged}"]
    assert not loop.cache.is_assumed(p)
    assert queue.where(p.uid) is None  # nothing to requeue: the informer has the rest
