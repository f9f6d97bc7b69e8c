"""scheduler.loop: a cycle that crashes requeues its pod with backoff, tells it with a
FailedScheduling event and counts scheduler_schedule_attempts_total{result="error"}, as
upstream's handleSchedulingFailure with an error status; a bind answered 409 is logged by
its cause and handled as upstream's handleBindingCycleError + handleSchedulingFailure
handle it (pkg/scheduler/schedule_one.go, v1.37.2), by the informer's copy of the pod."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.algorithm import ProfileAlgorithm
from scheduler.cache import Cache, Nominator
from scheduler.client.errors import Conflict
from scheduler.framework.status import Code, Status
from scheduler.loop import SchedulingLoop
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.queue import SchedulingQueue
from scheduler.scheduling_failure import truncate_message
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


class Patches:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.sent.append((name, patch))
        return {}


def build(
    current_pod: Callable[[PodInfo], PodInfo | None] | None = None, patch: Any = _no_patch
) -> tuple[SchedulingLoop, SchedulingQueue[PodInfo], Events, SchedulerMetrics, Any]:
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
        algorithms={fwk.profile_name: ProfileAlgorithm(fwk, m)},
        events=events,  # type: ignore[arg-type]
        status_writer=StatusWriter(patch, metrics=m),
        metrics=m,
        clock=clock,
        current_pod=current_pod,
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

    monkeypatch.setitem(loop.algorithms, fwk.profile_name, overflow)
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
    with caplog.at_level("INFO", logger="scheduler.binding_cycle"):
        loop.schedule_one(info)
        await loop.drain_binds(5.0)
    lines = [r.getMessage() for r in caplog.records if "bind conflict" in r.getMessage()]
    assert lines == [f"bind conflict pod=default/web node=n1: {logged}"]
    assert not loop.cache.is_assumed(p)


BIND_409 = (
    'running Bind plugin "DefaultBinder": Operation cannot be fulfilled on pods/binding '
    '"web": pod web is already assigned to node "n2"'
)


@pytest.mark.parametrize(
    ("informer", "requeued", "told"),
    [
        ("pending", "backoff", True),  # e.g. being deleted, nodeName still empty
        ("assigned", None, True),  # bound by another binder
        ("gone", None, True),
        ("recreated", None, False),  # same name, another UID
    ],
)
async def test_a_409_on_bind_is_counted_told_and_requeued_as_upstream(
    monkeypatch: pytest.MonkeyPatch, informer: str, requeued: str | None, told: bool
) -> None:
    """upstream handleBindingCycleError -> handleSchedulingFailure: result="error" always;
    requeue only when the informer's pod is this one and unassigned; the event and the
    PodScheduled=False status (SchedulerError, the Bind plugin's message, the nomination
    cleared) unless the pod was recreated."""
    p = make_pod("web").nominated("n1").obj()
    current = {
        "pending": p,
        "assigned": make_pod("web").uid(p.uid).nominated("n1").node("n2").obj(),
        "gone": None,
        "recreated": make_pod("web").uid("uid-other").obj(),
    }[informer]
    patches = Patches()
    loop, queue, events, m, fwk = build(lambda pod: current, patches)

    async def conflict(*args: Any) -> Status:
        err = Conflict(409, "Conflict", BIND_409.split(": ", 1)[1])
        return Status(Code.ERROR, (BIND_409,), "DefaultBinder", err)

    monkeypatch.setattr(fwk, "run_bind", conflict)
    queue.add(p)
    info = await queue.pop()
    assert info is not None
    loop.schedule_one(info)
    await loop.drain_binds(5.0)
    await loop.failures.status_writer.wait_idle()
    assert not loop.cache.is_assumed(p)
    assert attempts(m, "error") == 1.0
    assert queue.where(p.uid) == requeued
    if not told:
        assert events.sent == [] and patches.sent == []
        return
    assert events.sent == [("web", "FailedScheduling", BIND_409)]
    ((name, patch),) = patches.sent
    (condition,) = patch["status"]["conditions"]
    assert (name, condition["reason"], condition["message"]) == ("web", "SchedulerError", BIND_409)
    assert patch["status"]["nominatedNodeName"] is None  # upstream's clearNominatedNode


async def test_a_deleting_pod_popped_is_skipped_with_upstreams_event() -> None:
    """upstream skipPodSchedule: 'skip schedule deleting pod: ns/name', not scheduled."""
    loop, queue, events, _, _ = build()
    p = make_pod("web").terminating().obj()
    queue.add(p)
    info = await queue.pop()
    assert info is not None
    loop.schedule_one(info)
    assert events.sent == [("web", "FailedScheduling", "skip schedule deleting pod: default/web")]
    assert queue.where(p.uid) is None and not loop.cache.is_assumed(p)


def test_a_note_over_the_event_limit_is_cut_as_upstream_cuts_it() -> None:
    """upstream truncateMessage: the first 1020 bytes and " ..."."""
    assert truncate_message("x" * 1024) == "x" * 1024
    cut = truncate_message("x" * 1019 + "é" + "y" * 10)
    assert cut == "x" * 1019 + " ..."  # the 2-byte character does not fit whole
