"""The scheduling loop (scheduler/loop.py): its failure paths (issue 15), first against a
scriptable fake framework (tests/unit/helpers/fake_framework.py) with the real Cache,
SchedulingQueue, Nominator, StatusWriter and SchedulerMetrics, then against a real
framework: a cycle that crashes requeues its pod with backoff, tells it with a
FailedScheduling event and counts scheduler_schedule_attempts_total{result="error"}, as
upstream's handleSchedulingFailure with an error status; a bind answered 409 is logged by
its cause and handled as upstream's handleBindingCycleError + handleSchedulingFailure
handle it (pkg/scheduler/schedule_one.go, v1.37.2), by the informer's copy of the pod.

Every path must end with the pod in exactly one place (a queue, or done because the
informer will tell the rest), the cache holding no stale assumption, and queue.done
called exactly once, so the pod is never left in flight. Upstream's rule book:
pkg/scheduler/schedule_one.go (schedulingCycle, bindingCycle, handleBindingCycleError,
handleSchedulingFailure).

Nothing waits for time: a binding cycle is awaited through loop.drain_binds (its grace is
only a safety net) and the status writes through StatusWriter.wait_idle.
"""


from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from scheduler.algorithm import ProfileAlgorithm, SchedulingError
from scheduler.binding_cycle import FENCED_BIND
from scheduler.cache import Cache, Nominator, Snapshot
from scheduler.client.errors import ApiError, Conflict
from scheduler.framework.cluster_event import ClusterEventWithHint
from scheduler.framework.diagnosis import FitError, ScheduleResult
from scheduler.framework.interfaces import PostFilterResult
from scheduler.framework.status import Code, Status
from scheduler.loop import SchedulingLoop
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.queue import SchedulingQueue
from scheduler.queue.events import ASSIGNED_POD_DELETE
from scheduler.scheduling_failure import RESULT_SCHEDULED, RESULT_UNSCHEDULABLE, truncate_message
from scheduler.status_writer import StatusWriter
from tests.unit.helpers.builders import make_framework, make_node, make_pod
from tests.unit.helpers.fake_clock import FakeClock
from tests.unit.helpers.fake_framework import (
    NODE,
    DeclaredPostFilter,
    FakeFramework,
    Harness,
    async_raising,
    does_not_fit,
    harness,
    raising,
)

SAFETY = 30.0  # seconds; only ever reached when a test is about to fail


def conditions(h: Harness, pod: str) -> list[dict[str, Any]]:
    return [c for name, body in h.patches if name == pod for c in body["status"]["conditions"]]


def assert_nothing_bound(h: Harness, pod: PodInfo) -> None:
    assert h.fwk.called("run_bind") == []
    assert h.fwk.called("run_post_bind") == []
    assert not [e for e in h.events.sent if e.reason == "Scheduled"]
    assert h.attempts(RESULT_SCHEDULED) == 0.0
    assert h.cache_clean(pod)


# ---------------------------------------------------------------- binding cycle


@pytest.mark.parametrize(
    "message",
    [
        'Operation cannot be fulfilled on pods/binding "web": pod web is being deleted, '
        "cannot be assigned to a host",
        'Operation cannot be fulfilled on pods/binding "web": pod web is already assigned '
        'to node "n2"',
    ],
    ids=["being-deleted", "already-assigned"],
)
async def test_a_bind_conflict_is_undone_requeued_and_told_as_any_bind_error(
    message: str,
) -> None:
    """upstream makes no exception for a 409 (handleBindingCycleError): the informer still
    shows the pod pending and unassigned here, so it is requeued with backoff, counted as
    result="error" and told (the tests over a real framework below cover the informer's other
    answers: assigned, gone, recreated)."""
    h = harness()

    async def conflict(pod: PodInfo, node: str) -> Status:
        return Status.from_error(Conflict(409, "Conflict", message), plugin="DefaultBinder")

    h.fwk.bind = conflict
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.fwk.called("run_bind") == ["web"]
    assert h.fwk.called("run_unreserve") == ["web"]
    assert h.cache_clean(p)
    assert h.queue.where(p.uid) == "backoff"
    assert h.queue.done_calls[p.uid] == 1
    assert [e.reason for e in h.events.sent] == ["FailedScheduling"]
    assert h.attempts("error") == 1.0
    assert [c["reason"] for c in conditions(h, "web")] == ["SchedulerError"]
    assert h.fwk.called("run_post_bind") == []


BIND_MESSAGE = 'running Bind plugin "DefaultBinder": etcdserver: request timed out'


async def _api_error(pod: PodInfo, node: str) -> Status:
    # what Framework.run_bind answers when DefaultBinder's API call fails
    err = ApiError(500, "InternalError", "etcdserver: request timed out")
    return Status(Code.ERROR, (BIND_MESSAGE,), "DefaultBinder", err)


PREBIND_MESSAGE = 'running PreBind plugin "VolumeBinding": binding volumes: timed out'


async def _pre_bind_fails(pod: PodInfo, node: str) -> Status:
    return Status(Code.ERROR, (PREBIND_MESSAGE,), "VolumeBinding")


@pytest.mark.parametrize(
    ("point", "script", "message", "bind_called"),
    [
        (
            "bind",
            _api_error,
            BIND_MESSAGE,  # upstream's wording, as Framework.run_bind gives it
            True,
        ),
        # upstream's PreBind message as is, with no prefix of ours
        ("pre_bind", _pre_bind_fails, PREBIND_MESSAGE, False),
        (
            "bind",
            async_raising(RuntimeError("bind plugin bug")),
            "binding failed: bind plugin bug",
            True,
        ),
    ],
    ids=["bind-api-error", "pre-bind-failure", "bind-plugin-crash"],
)
async def test_a_failed_bind_is_undone_and_requeued_with_backoff_and_told(
    point: str, script: Any, message: str, bind_called: bool
) -> None:
    h = harness()
    setattr(h.fwk, point, script)
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.fwk.called("run_bind") == (["web"] if bind_called else [])
    assert h.fwk.called("run_unreserve") == ["web"]
    assert h.cache_clean(p)
    assert h.queue.where(p.uid) == "backoff"
    assert h.queue.done_calls[p.uid] == 1
    assert h.events.failed_scheduling() == [("web", message)]
    assert h.attempts("error") == 1.0
    assert h.attempts(RESULT_SCHEDULED) == 0.0
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in conditions(h, "web")] == [
        ("PodScheduled", "False", "SchedulerError", message)
    ]
    assert h.fwk.called("run_post_bind") == []


@pytest.mark.parametrize(
    ("point", "script"),
    [
        ("bind", _api_error),
        ("pre_bind", _pre_bind_fails),
        ("bind", async_raising(RuntimeError("bind plugin bug"))),
    ],
    ids=["bind-api-error", "pre-bind-failure", "bind-plugin-crash"],
)
async def test_a_failed_bind_frees_the_room_for_the_pods_waiting_for_it(
    point: str, script: Any
) -> None:
    """handleBindingCycleError: forgetting the assumed pod is an AssignedPodDelete."""
    h = harness({"NodeResourcesFit": [ClusterEventWithHint(ASSIGNED_POD_DELETE)]})
    h.fwk.schedule = does_not_fit()
    waiting_for_room = make_pod("small").obj()
    await h.attempt(waiting_for_room)
    assert h.queue.where(waiting_for_room.uid) == "unschedulable"
    h.fwk.schedule = lambda pod, snapshot: ScheduleResult(NODE, 1, 1)
    setattr(h.fwk, point, script)
    await h.attempt(make_pod("web").obj())
    assert h.queue.where(waiting_for_room.uid) in ("backoff", "active")


async def test_draining_with_no_grace_cancels_a_bind_in_flight_and_forgets_its_pod() -> None:
    h = harness()
    entered = asyncio.Event()
    never = asyncio.Event()
    returned: list[str] = []

    async def hanging_bind(pod: PodInfo, node: str) -> Status:
        entered.set()
        await never.wait()
        returned.append(pod.name)
        return Status.success()

    h.fwk.bind = hanging_bind
    p = make_pod("web").obj()
    h.loop.schedule_one(await h.pop(p))
    await asyncio.wait_for(entered.wait(), SAFETY)
    (task,) = h.binds.tasks
    assert h.loop.binds_in_flight == 1 and h.cache.is_assumed(p)
    await h.loop.drain_binds(0)
    assert task.cancelled()
    assert h.loop.binds_in_flight == 0
    assert returned == []
    assert h.fwk.called("run_unreserve") == ["web"]
    assert h.fwk.called("run_post_bind") == []
    assert h.cache_clean(p)
    assert h.queue.done_calls[p.uid] == 1
    assert h.queue.where(p.uid) is None  # shutting down: the next leader schedules it
    assert h.events.sent == []


async def test_a_closed_lease_fence_sends_no_bind_and_requeues_quietly() -> None:
    h = harness()
    h.fence_open = False
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.fence_asked == [FENCED_BIND]
    assert h.fwk.called("run_pre_bind") == ["web"]
    assert_nothing_bound(h, p)
    assert h.fwk.called("run_unreserve") == ["web"]
    assert h.queue.where(p.uid) == "backoff"  # not lost
    assert h.queue.done_calls[p.uid] == 1
    assert h.events.sent == []  # a replica stepping down does not speak for the pod
    assert h.patches == []
    assert h.attempts("error") == 0.0


# ---------------------------------------------------------------- crashes in the cycle


def _crash_in(fwk: FakeFramework, point: str) -> None:
    boom = ZeroDivisionError("division by zero")
    if point == "post_filter":
        fwk.schedule = does_not_fit()
        fwk.post_filter_plugins = (DeclaredPostFilter(),)
    setattr(fwk, point, raising(boom))


@pytest.mark.parametrize(
    ("point", "assumed"),
    [("schedule", False), ("reserve", True), ("permit", True), ("post_filter", False)],
)
async def test_a_plugin_crash_in_the_scheduling_cycle_requeues_with_backoff(
    point: str, assumed: bool
) -> None:
    h = harness()
    _crash_in(h.fwk, point)
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.queue.where(p.uid) == "backoff"  # not lost, not retried at once
    assert h.queue.done_calls[p.uid] == 1
    assert h.cache_clean(p)
    # what was reserved is unreserved; nothing else is
    assert h.fwk.called("run_unreserve") == (["web"] if assumed else [])
    assert h.fwk.called("run_pre_bind") == []
    assert h.loop.binds_in_flight == 0 and len(h.fwk.waiting_pods) == 0
    assert h.events.failed_scheduling() == [
        ("web", "internal error in the scheduling cycle: ZeroDivisionError: division by zero")
    ]
    assert h.attempts("error") == 1.0
    assert h.attempts(RESULT_UNSCHEDULABLE) == 0.0
    assert [c["reason"] for c in conditions(h, "web")] == ["SchedulerError"]
    assert len(h.nominator) == 0


async def test_an_internal_error_reported_by_the_algorithm_requeues_with_backoff() -> None:
    h = harness()
    st = Status(Code.ERROR, ("reading the claim: boom",), "VolumeBinding")
    h.fwk.schedule = raising(SchedulingError(st))
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.queue.where(p.uid) == "backoff"
    assert h.queue.done_calls[p.uid] == 1
    assert h.cache_clean(p)
    assert h.events.failed_scheduling() == [("web", str(SchedulingError(st)))]
    assert h.attempts("error") == 1.0


# ---------------------------------------------------------------- Permit


async def test_a_permit_rejection_undoes_the_assumption_and_makes_the_pod_unschedulable() -> None:
    h = harness()
    h.fwk.permit = lambda pod, node: (Status.unschedulable("gang not ready", plugin="Gang"), 0.0)
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.fwk.called("run_unreserve") == ["web"]
    assert_nothing_bound(h, p)
    assert h.fwk.called("run_pre_bind") == []
    assert h.queue.where(p.uid) == "unschedulable"
    info = h.queue.get(p.uid)
    assert info is not None and info.unschedulable_plugins == {"Gang"}
    assert h.queue.done_calls[p.uid] == 1
    assert h.events.failed_scheduling() == [("web", "gang not ready")]
    assert h.attempts(RESULT_UNSCHEDULABLE) == 1.0
    assert [c["reason"] for c in conditions(h, "web")] == ["Unschedulable"]


def _wait_at_permit(h: Harness, timeout: float) -> None:
    h.fwk.permit = lambda pod, node: (Status(Code.WAIT, plugin="Gang"), timeout)


async def test_a_pod_waiting_at_permit_binds_once_allowed() -> None:
    h = harness()
    _wait_at_permit(h, SAFETY)
    p = make_pod("web").obj()
    h.loop.schedule_one(await h.pop(p))
    waiting = h.fwk.waiting_pods.get(p.uid)
    assert waiting is not None and waiting.node == NODE
    for _ in range(20):  # turns of the event loop, not time: the wait holds
        await asyncio.sleep(0)
    assert h.fwk.called("run_pre_bind") == []
    assert h.queue.where(p.uid) == "in_flight"
    waiting.allow()
    await h.loop.drain_binds(SAFETY)
    assert h.fwk.calls[-3:] == [
        ("run_pre_bind", "web"),
        ("run_bind", "web"),
        ("run_post_bind", "web"),
    ]
    assert len(h.fwk.waiting_pods) == 0
    assert h.cache.is_assumed(p)  # until the informer confirms the bind
    assert h.fwk.called("run_unreserve") == []
    assert [e.reason for e in h.events.sent] == ["Scheduled"]
    assert h.attempts(RESULT_SCHEDULED) == 1.0
    assert h.queue.done_calls[p.uid] == 1
    assert h.queue.where(p.uid) is None


async def test_a_pod_rejected_while_waiting_at_permit_is_undone_and_unschedulable() -> None:
    """What preemption does to a victim held at Permit (upstream bindingCycle turns the
    rejection into a FitError on the one node: the pod is Unschedulable, the plugin its
    rejector)."""
    h = harness()
    _wait_at_permit(h, SAFETY)
    p = make_pod("web").obj()
    h.loop.schedule_one(await h.pop(p))
    assert h.fwk.waiting_pods.reject(p.uid, "DefaultPreemption", "preempted")
    await h.loop.drain_binds(SAFETY)
    await h.status_writer.wait_idle()
    message = "0/1 nodes are available: 1 preempted."
    assert h.fwk.called("run_pre_bind") == []
    assert_nothing_bound(h, p)
    assert h.fwk.called("run_unreserve") == ["web"]
    assert len(h.fwk.waiting_pods) == 0
    assert h.queue.where(p.uid) == "unschedulable"
    info = h.queue.get(p.uid)
    assert info is not None and info.unschedulable_plugins == {"DefaultPreemption"}
    assert h.queue.done_calls[p.uid] == 1
    assert h.events.failed_scheduling() == [("web", message)]
    assert h.attempts(RESULT_UNSCHEDULABLE) == 1.0
    assert h.attempts("error") == 0.0
    assert [(c["reason"], c["message"]) for c in conditions(h, "web")] == [
        ("Unschedulable", message)
    ]


async def test_a_pod_waiting_at_permit_past_its_timeout_is_rejected() -> None:
    h = harness()
    _wait_at_permit(h, 0.001)  # real time on the real event loop; awaited, never slept on
    p = make_pod("web").obj()
    h.loop.schedule_one(await h.pop(p))
    await h.loop.drain_binds(SAFETY)
    await h.status_writer.wait_idle()
    # upstream's words and rejector (waiting_pods_map.go newWaitingPod): the wait as Go
    # prints a time.Duration, the plugin that asked to wait
    message = "0/1 nodes are available: 1 rejected due to timeout after waiting 1ms at plugin Gang."
    assert h.fwk.called("run_pre_bind") == []
    assert_nothing_bound(h, p)
    assert h.fwk.called("run_unreserve") == ["web"]
    assert len(h.fwk.waiting_pods) == 0
    assert h.queue.done_calls[p.uid] == 1
    # the plugin that asked to wait rejected it: Unschedulable, with Gang as its rejector
    assert h.queue.where(p.uid) == "unschedulable"
    info = h.queue.get(p.uid)
    assert info is not None and info.unschedulable_plugins == {"Gang"}
    assert [c["reason"] for c in conditions(h, "web")] == ["Unschedulable"]
    assert h.events.failed_scheduling() == [("web", message)]
    assert h.attempts(RESULT_UNSCHEDULABLE) == 1.0


async def test_a_permit_rejection_frees_the_room_for_the_others_but_not_for_the_pod() -> None:
    """handleBindingCycleError: the forgotten pod's room is an AssignedPodDelete for the
    pods waiting for room, sent after the pod's own requeue and never moving the pod."""
    room_freed = [ClusterEventWithHint(ASSIGNED_POD_DELETE)]
    h = harness({"NodeResourcesFit": room_freed, "DefaultPreemption": room_freed})
    h.fwk.schedule = does_not_fit()
    waiting_for_room = make_pod("small").obj()
    await h.attempt(waiting_for_room)
    assert h.queue.where(waiting_for_room.uid) == "unschedulable"
    h.fwk.schedule = lambda pod, snapshot: ScheduleResult(NODE, 1, 1)
    _wait_at_permit(h, SAFETY)
    p = make_pod("web").obj()
    h.loop.schedule_one(await h.pop(p))
    assert h.fwk.waiting_pods.reject(p.uid, "DefaultPreemption", "preempted")
    await h.loop.drain_binds(SAFETY)
    assert h.queue.where(waiting_for_room.uid) in ("backoff", "active")
    assert h.queue.where(p.uid) == "unschedulable"


# ---------------------------------------------------------------- PostFilter


def _post_filter_answers(h: Harness, result: PostFilterResult | None, st: Status) -> None:
    h.fwk.schedule = does_not_fit()
    h.fwk.post_filter_plugins = (DeclaredPostFilter(),)
    h.fwk.post_filter = lambda pod: (result, st)


async def test_a_nomination_from_post_filter_is_recorded_and_written() -> None:
    h = harness()
    _post_filter_answers(h, PostFilterResult(nominated_node_name=NODE), Status.success())
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.nominator.nominated_node(p) == NODE
    assert [body["status"].get("nominatedNodeName") for _, body in h.patches] == [NODE]
    assert h.queue.where(p.uid) == "unschedulable"
    assert h.queue.done_calls[p.uid] == 1
    assert h.attempts(RESULT_UNSCHEDULABLE) == 1.0
    assert h.events.failed_scheduling() == [("web", "0/1 nodes are available: 1 Insufficient cpu.")]


@pytest.mark.parametrize("had_one", [True, False])
async def test_an_empty_nomination_clears_it_and_the_status_only_when_the_pod_had_one(
    had_one: bool,
) -> None:
    h = harness()
    builder = make_pod("web")
    if had_one:
        builder = builder.nominated("n0")
    p = builder.obj()
    h.nominator.add(p)  # as the informer would
    _post_filter_answers(
        h, PostFilterResult(nominated_node_name=""), Status.unschedulable("no victims")
    )
    await h.attempt(p)
    assert h.nominator.nominated_node(p) is None
    (body,) = [body for _, body in h.patches]
    if had_one:
        assert "nominatedNodeName" in body["status"]
        assert body["status"]["nominatedNodeName"] is None  # JSON null clears it
    else:
        assert "nominatedNodeName" not in body["status"]


async def test_pods_post_filter_cleared_lose_their_nomination() -> None:
    h = harness()
    low = make_pod("low").obj()
    other = make_pod("other").obj()
    h.nominator.add(low, NODE)
    h.nominator.add(other, NODE)
    _post_filter_answers(
        h, PostFilterResult(nominated_node_name=NODE, cleared=(low,)), Status.success()
    )
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.nominator.nominated_node(low) is None
    assert h.nominator.nominated_node(other) == NODE
    assert {x.name for x in h.nominator.nominated_pods_for_node(NODE)} == {"other", "web"}


async def test_a_post_filter_whose_task_writes_the_status_gets_no_write_from_the_loop() -> None:
    h = harness()
    _post_filter_answers(
        h, PostFilterResult(nominated_node_name=NODE, status_by_task=True), Status.success()
    )
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.patches == []
    assert h.nominator.nominated_node(p) == NODE  # the loop still records it
    assert len(h.events.failed_scheduling()) == 1  # and still tells the pod
    assert h.queue.where(p.uid) == "unschedulable"
    assert h.queue.done_calls[p.uid] == 1


async def test_a_post_filter_error_records_no_nomination() -> None:
    h = harness()
    _post_filter_answers(
        h, PostFilterResult(nominated_node_name=NODE), Status(Code.ERROR, ("listing pdbs",))
    )
    p = make_pod("web").obj()
    await h.attempt(p)
    assert h.nominator.nominated_node(p) is None
    assert "nominatedNodeName" not in h.patches[0][1]["status"]
    assert h.queue.where(p.uid) == "unschedulable"


async def test_run_awaits_what_post_filter_asks_to_settle_before_popping_the_next_pod() -> None:
    h = harness()
    first, second = make_pod("first").priority(10).obj(), make_pod("second").obj()
    settling, released, second_popped = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def settle() -> None:
        h.fwk.calls.append(("settle-begin", "first"))
        settling.set()
        await released.wait()
        h.fwk.calls.append(("settle-end", "first"))

    no_fit = does_not_fit()

    def schedule(pod: PodInfo, snapshot: Snapshot) -> ScheduleResult | FitError:
        if pod.name == "second":
            second_popped.set()
            return ScheduleResult(NODE, 1, 1)
        result: ScheduleResult | FitError = no_fit(pod, snapshot)
        return result

    h.fwk.schedule = schedule
    h.fwk.post_filter_plugins = (DeclaredPostFilter(),)
    h.fwk.post_filter = lambda pod: (
        PostFilterResult(nominated_node_name=NODE, settle=settle()),
        Status.success(),
    )
    h.queue.add(first)
    h.queue.add(second)
    runner = asyncio.create_task(h.loop.run())
    try:
        await asyncio.wait(
            [asyncio.ensure_future(settling.wait()), asyncio.ensure_future(second_popped.wait())],
            timeout=SAFETY,
            return_when=asyncio.FIRST_COMPLETED,
        )
        assert settling.is_set() and not second_popped.is_set()
        for _ in range(20):  # turns of the event loop: the loop stays parked on settle
            await asyncio.sleep(0)
        assert h.fwk.called("schedule_pod") == ["first"]
        assert h.queue.where(second.uid) == "active"
        released.set()
        await asyncio.wait_for(second_popped.wait(), SAFETY)
        assert [c for c in h.fwk.calls if c[0] in ("settle-end", "schedule_pod")] == [
            ("schedule_pod", "first"),
            ("settle-end", "first"),
            ("schedule_pod", "second"),
        ]
    finally:
        h.loop.stop()
        h.queue.close()
        await asyncio.wait_for(runner, SAFETY)
        await h.loop.drain_binds(SAFETY)


# ---------------------------------------------------------------- over a real framework

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


# ----- a standby's snapshot (keep_snapshot_current) --------------------------------------


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_standby_keeps_the_snapshot_current_so_the_first_cycle_copies_nothing() -> None:
    h = harness()
    # the loop's snapshot was made with the loop, before these arrived (as the app makes
    # it before its informers list anything)
    for i in range(5):
        h.cache.add_node(make_node(f"n{i}").obj())
        h.cache.add_pod(make_pod(f"p{i}").node(f"n{i}").obj())
    assert h.loop.snapshot.get("n4") is None
    leading = asyncio.Event()
    task = asyncio.create_task(h.loop.keep_snapshot_current(leading, period=0.01, step=2))
    try:
        async with asyncio.timeout(SAFETY):
            while h.loop.snapshot.get("n4") is None:  # noqa: ASYNC110 - steps on this loop
                await asyncio.sleep(0)
        view = h.loop.snapshot.get("n3")
        assert view is not None and len(view.pods) == 1
        # a change while standing by is copied within a period
        h.cache.add_node(make_node("late").obj())
        async with asyncio.timeout(SAFETY):
            while h.loop.snapshot.get("late") is None:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        # the first cycle as leader: nothing left to copy
        assert h.cache.update_snapshot(h.loop.snapshot) == 0
    finally:
        leading.set()
        async with asyncio.timeout(SAFETY):
            await task


async def test_the_standby_refresh_copies_in_steps_and_lets_other_tasks_run_between() -> None:
    h = harness()
    for i in range(10):
        h.cache.add_node(make_node(f"n{i}").obj())
    copied: list[int] = []
    leading = asyncio.Event()

    async def observer() -> None:
        # what the snapshot holds each time this task gets a turn
        while len(copied) < 50 and not leading.is_set():
            copied.append(sum(1 for i in range(10) if h.loop.snapshot.get(f"n{i}")))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(observer())
    task = asyncio.create_task(h.loop.keep_snapshot_current(leading, period=60.0, step=3))
    await _turns(20)
    leading.set()
    async with asyncio.timeout(SAFETY):
        await task
        await watcher
    # the observer saw partial snapshots between steps of 3 entries (the harness's own
    # node, in the snapshot from the start, is not counted)
    partial = sorted(set(copied) - {0, 10})
    assert partial, copied
    assert copied[-1] == 10


async def test_the_standby_refresh_ends_when_leading_and_leaves_the_snapshot_alone() -> None:
    h = harness()
    leading = asyncio.Event()
    task = asyncio.create_task(h.loop.keep_snapshot_current(leading, period=0.01))
    await _turns(5)
    leading.set()
    h.cache.add_node(make_node("after").obj())
    async with asyncio.timeout(SAFETY):
        await task  # returns on its own
    await asyncio.sleep(0.05)  # more than a period
    assert h.loop.snapshot.get("after") is None  # left for the loop's own update
    assert h.cache.update_snapshot(h.loop.snapshot) == 1
