"""SchedulingQueue behaviour: ordering, backoff, unschedulable pods, hints, gating, in-flight
events, flushes, metrics. Time only moves through the FakeClock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler.framework.cluster_event import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.queue import (
    ACTIVE,
    BACKOFF,
    GATED,
    UNSCHEDULABLE,
    UNSCHEDULABLE_TIMEOUT,
    QueueClosedError,
    QueuedPodInfo,
    QueueState,
    SchedulingQueue,
)
from tests.unit.helpers.fake_clock import FakeClock


@dataclass(frozen=True)
class Pod:
    uid: str
    priority: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    scheduling_gates: tuple[str, ...] = ()
    scheduler_name: str = "kube-async-scheduler"
    resource_version: str = "1"

    @property
    def key(self) -> str:
        return f"default/{self.uid}"


NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
NODE_TAINT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT, "NodeTaintChange")
ASSIGNED_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete")


def _skip(_pod: Any, _old: Any, _new: Any) -> QueueingHint:
    return QueueingHint.SKIP


def _boom(_pod: Any, _old: Any, _new: Any) -> QueueingHint:
    raise RuntimeError("hint bug")


def _queue_if_new_is_big(_pod: Any, _old: Any, new: Any) -> QueueingHint:
    return QueueingHint.QUEUE if getattr(new, "big", False) else QueueingHint.SKIP


HINTS: dict[str, list[ClusterEventWithHint]] = {
    "NodeResourcesFit": [
        ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
        ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.DELETE)),
        ClusterEventWithHint(
            ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCALE_DOWN)
        ),
    ],
    "TaintToleration": [
        ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT), _skip),
        ClusterEventWithHint(
            ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION)
        ),
    ],
    "NodeAffinity": [
        ClusterEventWithHint(
            ClusterEvent(EventResource.NODE, ActionType.ADD), _queue_if_new_is_big
        ),
        ClusterEventWithHint(
            ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_LABEL)
        ),
    ],
    "Broken": [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD), _boom)],
    "SchedulingGates": [
        ClusterEventWithHint(
            ClusterEvent(
                EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
            )
        )
    ],
    "DefaultPreemption": [
        ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE))
    ],
}


@dataclass
class Node:
    big: bool = False


class Gates:
    """A PreEnqueue stand-in: scheduling gates, plus a set of pods 'preempting'."""

    def __init__(self) -> None:
        self.preempting: set[str] = set()

    def __call__(self, pod: Any) -> Status:
        if pod.scheduling_gates:
            return Status.unresolvable("waiting for scheduling gates", plugin="SchedulingGates")
        if pod.uid in self.preempting:
            return Status(
                code=Status.unschedulable().code,
                reasons=("waiting for the preemption for this pod to be finished",),
                plugin="DefaultPreemption",
            )
        return Status.success()


def make_queue(
    clock: FakeClock | None = None,
    gates: Callable[[Any], Status] | None = None,
    metrics: SchedulerMetrics | None = None,
    **kw: Any,
) -> tuple[SchedulingQueue[Pod], FakeClock]:
    clock = clock or FakeClock(1000.0)
    q: SchedulingQueue[Pod] = SchedulingQueue(
        pre_enqueue=gates or Gates(),
        events_to_register=HINTS,
        clock=clock,
        metrics=metrics,
        **kw,
    )
    return q, clock


async def pop_now(q: SchedulingQueue[Pod]) -> QueuedPodInfo[Pod]:
    info = await asyncio.wait_for(q.pop(), timeout=1)
    assert info is not None
    return info


async def fail(q: SchedulingQueue[Pod], uid: str, *rejectors: str) -> str | None:
    """Pop the given pod (must be the head), fail it with these rejectors, mark done."""
    info = await pop_now(q)
    assert info.uid == uid
    cycle = q.scheduling_cycle
    where = q.add_unschedulable_if_not_present(info, rejectors, cycle)
    q.done(info.uid)
    return where


# ---------------------------------------------------------------- ordering and pop


async def test_pop_orders_by_priority_then_arrival() -> None:
    q, clock = make_queue()
    for uid, prio in [("low", 0), ("high-early", 10), ("mid", 5), ("high-late", 10)]:
        q.add(Pod(uid, priority=prio))
        clock.advance(1)
    order = [(await pop_now(q)).uid for _ in range(4)]
    assert order == ["high-early", "high-late", "mid", "low"]


async def test_pop_waits_for_an_add() -> None:
    q, _ = make_queue()
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.add(Pod("p"))
    info = await asyncio.wait_for(waiter, timeout=1)
    assert info is not None
    assert info.uid == "p"


async def test_close_wakes_waiting_pop_with_none_and_later_pops_return_none() -> None:
    q, _ = make_queue()
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    q.close()
    assert await asyncio.wait_for(waiter, timeout=1) is None
    q.add(Pod("p"))
    assert await q.pop() is None
    assert q.state is QueueState.CLOSED


async def test_pop_counts_attempts_and_initial_attempt_timestamp_is_kept() -> None:
    q, clock = make_queue()
    q.add(Pod("p"))
    first = await pop_now(q)
    assert first.attempts == 1
    assert first.initial_attempt_timestamp == 1000.0
    q.add_unschedulable_if_not_present(first, [], q.scheduling_cycle)  # error: backoff
    q.done("p")
    clock.advance(1)
    q.flush_backoff_completed()
    second = await pop_now(q)
    assert second.attempts == 2
    assert second.initial_attempt_timestamp == 1000.0


async def test_update_of_active_pod_reorders_it() -> None:
    q, clock = make_queue()
    q.add(Pod("a", priority=5))
    clock.advance(1)
    q.add(Pod("b", priority=1))
    q.update(Pod("b", priority=1), Pod("b", priority=9))
    assert (await pop_now(q)).uid == "b"


async def test_add_of_a_known_pod_is_an_update() -> None:
    q, _ = make_queue()
    q.add(Pod("a"))
    q.add(Pod("a", priority=3))
    assert q.statistics().active == 1
    assert (await pop_now(q)).pod.priority == 3


# ---------------------------------------------------------------- backoff


@pytest.mark.parametrize(
    ("failures", "expected_backoff"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (6, 10.0)],
)
async def test_error_sends_pod_to_backoff_for_exactly_its_duration(
    failures: int, expected_backoff: float
) -> None:
    q, clock = make_queue()
    q.add(Pod("p"))
    for _ in range(failures - 1):  # earlier attempts, each waited out
        assert await fail(q, "p") == BACKOFF
        clock.advance(100)
        q.flush_backoff_completed()
    assert await fail(q, "p") == BACKOFF
    clock.advance(expected_backoff - 0.001)
    assert q.flush_backoff_completed() == 0
    assert q.where("p") == BACKOFF
    clock.advance(0.001)
    assert q.flush_backoff_completed() == 1
    assert q.where("p") == ACTIVE


async def test_backoff_uses_configured_initial_and_max() -> None:
    q, clock = make_queue(pod_initial_backoff=3.0, pod_max_backoff=5.0)
    q.add(Pod("p"))
    assert await fail(q, "p") == BACKOFF
    clock.advance(2.999)
    assert q.flush_backoff_completed() == 0
    clock.advance(0.001)
    assert q.flush_backoff_completed() == 1
    assert await fail(q, "p") == BACKOFF
    clock.advance(5.0)  # 6 capped to 5
    assert q.flush_backoff_completed() == 1


def test_backoff_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        SchedulingQueue(pod_initial_backoff=5, pod_max_backoff=1)


async def test_backoff_flush_releases_in_expiry_order() -> None:
    q, clock = make_queue()
    q.add(Pod("a", priority=1))
    q.add(Pod("b"))
    assert await fail(q, "a") == BACKOFF  # attempt 1: 1 s
    clock.advance(0.5)
    assert await fail(q, "b") == BACKOFF  # attempt 1: expires 0.5 s after a
    clock.advance(0.5)
    assert q.flush_backoff_completed() == 1
    assert (q.where("a"), q.where("b")) == (ACTIVE, BACKOFF)


# ---------------------------------------------------------------- unschedulable and hints


@pytest.mark.parametrize(
    ("rejectors", "event", "new", "moved"),
    [
        (["NodeResourcesFit"], NODE_ADD, None, True),  # registered, no hint fn
        (["NodeResourcesFit"], NODE_TAINT, None, False),  # not registered for taints
        (["TaintToleration"], NODE_TAINT, None, False),  # registered, hint says SKIP
        (["NodeAffinity"], NODE_ADD, Node(big=False), False),  # hint SKIP
        (["NodeAffinity"], NODE_ADD, Node(big=True), True),  # hint QUEUE
        (["TaintToleration", "NodeResourcesFit"], NODE_ADD, None, True),  # any rejector
        (["NodeResourcesFit"], ASSIGNED_DELETE, None, True),  # Pod covers AssignedPod
        (["Broken"], NODE_ADD, None, True),  # a failing hint requeues
        (["Unregistered"], NODE_ADD, None, False),
        (["Unregistered"], UNSCHEDULABLE_TIMEOUT, None, True),  # wildcard moves everyone
    ],
)
async def test_event_moves_pod_only_when_a_rejector_registered_it_and_hint_agrees(
    rejectors: list[str], event: ClusterEvent, new: Any, moved: bool
) -> None:
    q, clock = make_queue()
    q.add(Pod("p"))
    assert await fail(q, "p", *rejectors) == UNSCHEDULABLE
    clock.advance(0.5)  # still backing off
    assert q.move_all_to_active_or_backoff(event, None, new) == int(moved)
    assert q.where("p") == (BACKOFF if moved else UNSCHEDULABLE)
    if moved:
        clock.advance(0.5)
        q.flush_backoff_completed()
        assert q.where("p") == ACTIVE


async def test_event_after_backoff_expired_moves_pod_straight_to_active() -> None:
    q, clock = make_queue()
    q.add(Pod("p"))
    await fail(q, "p", "NodeResourcesFit")
    clock.advance(1.0)
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.where("p") == ACTIVE


async def test_pre_check_filters_moved_pods() -> None:
    q, _ = make_queue()
    q.add(Pod("a", priority=1))
    q.add(Pod("b"))
    await fail(q, "a", "NodeResourcesFit")
    await fail(q, "b", "NodeResourcesFit")
    moved = q.move_all_to_active_or_backoff(NODE_ADD, pre_check=lambda pod: pod.uid == "b")
    assert moved == 1
    assert (q.where("a"), q.where("b")) == (UNSCHEDULABLE, BACKOFF)


async def test_assigned_pod_deleted_moves_pods_rejected_for_resources() -> None:
    q, _ = make_queue()
    q.add(Pod("fit", priority=1))
    q.add(Pod("taint"))
    await fail(q, "fit", "NodeResourcesFit")
    await fail(q, "taint", "TaintToleration")
    q.assigned_pod_deleted(Pod("victim"))
    assert (q.where("fit"), q.where("taint")) == (BACKOFF, UNSCHEDULABLE)


async def test_assigned_pod_status_only_update_moves_nothing() -> None:
    q, _ = make_queue()
    q.add(Pod("p"))
    await fail(q, "p", "NodeResourcesFit")
    q.assigned_pod_updated(Pod("x"), Pod("x", resource_version="9"))
    assert q.where("p") == UNSCHEDULABLE


@pytest.mark.parametrize(
    ("rejector", "new", "moved"),
    [
        ("NodeAffinity", Pod("p", labels={"zone": "a"}), True),  # label change registered
        ("NodeAffinity", Pod("p", resource_version="2"), False),  # status-only change
        ("TaintToleration", Pod("p", labels={"zone": "a"}), False),  # not its event
    ],
)
async def test_update_of_unschedulable_pod_requeues_by_its_rejectors_events(
    rejector: str, new: Pod, moved: bool
) -> None:
    q, _ = make_queue()
    q.add(Pod("p"))
    await fail(q, "p", rejector)
    q.update(Pod("p"), new)
    assert q.where("p") == (BACKOFF if moved else UNSCHEDULABLE)
    got = q.get("p")
    assert got is not None
    assert got.pod == new  # the object is updated either way


async def test_leftover_flush_requeues_pods_unschedulable_over_five_minutes() -> None:
    q, clock = make_queue()
    q.add(Pod("p"))
    await fail(q, "p", "TaintToleration")
    clock.advance(300.0)
    assert q.flush_unschedulable_left_over() == 0
    clock.advance(0.001)
    assert q.flush_unschedulable_left_over() == 1
    assert q.where("p") == ACTIVE  # backoff long over


async def test_activate_skips_backoff_and_hints() -> None:
    q, _ = make_queue()
    q.add(Pod("u", priority=1))
    q.add(Pod("b"))
    await fail(q, "u", "TaintToleration")
    await fail(q, "b")
    q.activate([Pod("u"), Pod("b"), Pod("unknown")])
    assert (q.where("u"), q.where("b")) == (ACTIVE, ACTIVE)


# ---------------------------------------------------------------- in-flight events


@pytest.mark.parametrize(
    ("event", "rejector", "expected"),
    [
        (NODE_ADD, "NodeResourcesFit", BACKOFF),  # relevant event during the cycle
        (NODE_TAINT, "NodeResourcesFit", UNSCHEDULABLE),  # irrelevant
        (NODE_TAINT, "TaintToleration", UNSCHEDULABLE),  # hint SKIP
        (UNSCHEDULABLE_TIMEOUT, "TaintToleration", BACKOFF),
    ],
)
async def test_event_during_the_cycle_is_not_lost(
    event: ClusterEvent, rejector: str, expected: str
) -> None:
    q, _ = make_queue()
    q.add(Pod("p"))
    info = await pop_now(q)
    q.move_all_to_active_or_backoff(event)  # arrives while p is being scheduled
    assert q.add_unschedulable_if_not_present(info, [rejector], q.scheduling_cycle) == expected
    q.done("p")


async def test_event_before_the_pop_does_not_count() -> None:
    q, _ = make_queue()
    q.add(Pod("other"))
    q.add(Pod("p", priority=-1))
    other = await pop_now(q)  # keeps the in-flight log alive
    q.move_all_to_active_or_backoff(NODE_ADD)
    info = await pop_now(q)
    assert q.add_unschedulable_if_not_present(info, ["NodeResourcesFit"], 2) == UNSCHEDULABLE
    q.done(other.uid)
    q.done(info.uid)


async def test_events_stay_visible_to_pods_still_in_flight_after_another_is_done() -> None:
    q, _ = make_queue()
    q.add(Pod("a", priority=1))
    q.add(Pod("b"))
    a = await pop_now(q)
    b = await pop_now(q)
    q.move_all_to_active_or_backoff(NODE_ADD)
    q.done(a.uid)
    assert q.add_unschedulable_if_not_present(b, ["NodeResourcesFit"], 2) == BACKOFF


async def test_update_of_in_flight_pod_is_kept_as_an_event_and_the_latest_object_requeued() -> None:
    q, _ = make_queue()
    q.add(Pod("p"))
    info = await pop_now(q)
    q.update(Pod("p"), Pod("p", labels={"zone": "a"}))
    assert q.add_unschedulable_if_not_present(info, ["NodeAffinity"], 1) == BACKOFF
    assert info.pod.labels == {"zone": "a"}


async def test_pod_deleted_in_flight_is_not_requeued() -> None:
    q, _ = make_queue()
    q.add(Pod("p"))
    info = await pop_now(q)
    q.delete(Pod("p"))
    assert q.add_unschedulable_if_not_present(info, ["NodeResourcesFit"], 1) is None
    q.done("p")
    assert q.where("p") is None


async def test_activate_of_in_flight_pod_sends_it_to_active_after_failure() -> None:
    q, _ = make_queue()
    q.add(Pod("p"))
    info = await pop_now(q)
    q.activate([Pod("p")])
    assert q.add_unschedulable_if_not_present(info, ["TaintToleration"], 1) == ACTIVE


async def test_pod_not_popped_here_uses_the_move_request_cycle() -> None:
    q, _ = make_queue()
    q.add(Pod("x"))
    await pop_now(q)  # cycle 1
    q.move_all_to_active_or_backoff(NODE_TAINT)  # a move request in cycle 1
    stale = QueuedPodInfo(pod=Pod("s"), timestamp=0.0, attempts=1)
    assert q.add_unschedulable_if_not_present(stale, ["TaintToleration"], 1) == BACKOFF
    fresh = QueuedPodInfo(pod=Pod("f"), timestamp=0.0, attempts=1)
    assert q.add_unschedulable_if_not_present(fresh, ["TaintToleration"], 2) == UNSCHEDULABLE


async def test_add_unschedulable_refuses_a_pod_already_queued() -> None:
    q, _ = make_queue()
    q.add(Pod("p"))
    info = q.get("p")
    assert info is not None
    assert q.add_unschedulable_if_not_present(info, ["NodeResourcesFit"], 0) is None
    assert q.where("p") == ACTIVE


# ---------------------------------------------------------------- gating (PreEnqueue)


async def test_pod_with_scheduling_gates_is_gated_until_an_update_removes_them() -> None:
    q, _ = make_queue()
    q.add(Pod("p", scheduling_gates=("example.com/wait",)))
    assert q.where("p") == GATED
    info = q.get("p")
    assert info is not None
    assert info.gated
    assert info.unschedulable_plugins == {"SchedulingGates"}
    assert info.initial_attempt_timestamp is None  # gated time does not count for the SLI
    q.update(Pod("p", scheduling_gates=("example.com/wait",)), Pod("p"))
    assert q.where("p") == ACTIVE
    assert not info.gated
    assert info.initial_attempt_timestamp is not None


async def test_preemptor_gated_after_backoff_opens_on_its_plugins_event() -> None:
    gates = Gates()
    q, clock = make_queue(gates=gates)
    q.add(Pod("preemptor"))
    assert await fail(q, "preemptor", "NodeResourcesFit") == UNSCHEDULABLE
    gates.preempting.add("preemptor")  # the preemption task started
    clock.advance(1)
    q.move_all_to_active_or_backoff(NODE_ADD)  # would move it, but the gate is closed
    assert q.where("preemptor") == GATED
    info = q.get("preemptor")
    assert info is not None
    assert info.unschedulable_plugins == {"DefaultPreemption"}
    q.assigned_pod_deleted(Pod("victim"))  # gate still closed: stays gated
    assert q.where("preemptor") == GATED
    gates.preempting.clear()
    q.move_all_to_active_or_backoff(NODE_TAINT)  # not DefaultPreemption's event
    assert q.where("preemptor") == GATED
    q.assigned_pod_deleted(Pod("victim"))
    assert q.where("preemptor") == ACTIVE


async def test_backoff_completion_runs_pre_enqueue() -> None:
    gates = Gates()
    q, clock = make_queue(gates=gates)
    q.add(Pod("p"))
    await fail(q, "p")
    gates.preempting.add("p")
    clock.advance(1)
    q.flush_backoff_completed()
    assert q.where("p") == GATED


async def test_activate_re_checks_the_gate() -> None:
    gates = Gates()
    q, _ = make_queue(gates=gates)
    gates.preempting.add("p")
    q.add(Pod("p"))
    q.activate([Pod("p")])
    assert q.where("p") == GATED
    gates.preempting.clear()
    q.activate([Pod("p")])  # the preemption task ended
    assert q.where("p") == ACTIVE


async def test_leftover_flush_re_checks_gated_pods_after_five_minutes() -> None:
    gates = Gates()
    q, clock = make_queue(gates=gates)
    gates.preempting.add("p")
    q.add(Pod("p"))
    gates.preempting.clear()  # gate opened without an event
    clock.advance(300.0)
    assert q.flush_unschedulable_left_over() == 0
    assert q.where("p") == GATED
    clock.advance(0.001)
    assert q.flush_unschedulable_left_over() == 1
    assert q.where("p") == ACTIVE


async def test_leftover_flush_keeps_still_closed_gates_gated() -> None:
    q, clock = make_queue()
    q.add(Pod("p", scheduling_gates=("g",)))
    clock.advance(301)
    assert q.flush_unschedulable_left_over() == 0
    assert q.where("p") == GATED


@pytest.mark.parametrize("where", [ACTIVE, BACKOFF, UNSCHEDULABLE, GATED])
async def test_delete_removes_the_pod_from_any_queue(where: str) -> None:
    q, _ = make_queue()
    pod = Pod("p", scheduling_gates=("g",)) if where == GATED else Pod("p")
    q.add(pod)
    if where == BACKOFF:
        await fail(q, "p")
    elif where == UNSCHEDULABLE:
        await fail(q, "p", "NodeResourcesFit")
    assert q.where("p") == where
    q.delete(pod)
    assert q.where("p") is None
    assert q.statistics().pending_pods() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}


# ---------------------------------------------------------------- statistics and metrics


async def test_statistics_and_pending_pods_gauge() -> None:
    metrics = SchedulerMetrics()
    q, clock = make_queue(metrics=metrics)
    for pod in [Pod("a"), Pod("b"), Pod("c"), Pod("g", scheduling_gates=("x",))]:
        q.add(pod)
        clock.advance(0.1)
    await fail(q, "a")  # backoff
    await fail(q, "b", "NodeResourcesFit")  # unschedulable
    stats = q.statistics()
    assert stats.pending_pods() == {ACTIVE: 1, BACKOFF: 1, UNSCHEDULABLE: 1, GATED: 1}
    assert stats.in_flight == 0
    assert stats.scheduling_cycle == 2
    for queue in (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED):
        assert metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": queue}) == 1


async def test_incoming_pods_counter_by_queue_and_event() -> None:
    metrics = SchedulerMetrics()
    q, clock = make_queue(metrics=metrics)
    q.add(Pod("p"))
    await fail(q, "p", "NodeResourcesFit")
    clock.advance(1)
    q.move_all_to_active_or_backoff(NODE_ADD)

    def value(queue: str, event: str) -> float | None:
        return metrics.registry.get_sample_value(
            "scheduler_queue_incoming_pods_total", {"queue": queue, "event": event}
        )

    assert value(ACTIVE, "PodAdd") == 1
    assert value(UNSCHEDULABLE, "ScheduleAttemptFailure") == 1
    assert value(ACTIVE, "NodeAdd") == 1


async def test_unschedulable_pods_gauge_counts_rejector_plugins_until_the_next_pop() -> None:
    metrics = SchedulerMetrics()
    q, clock = make_queue(metrics=metrics)
    q.add(Pod("p"))
    await fail(q, "p", "NodeResourcesFit", "TaintToleration")

    def value(plugin: str) -> float | None:
        return metrics.registry.get_sample_value(
            "scheduler_unschedulable_pods",
            {"plugin": plugin, "profile": "kube-async-scheduler"},
        )

    assert (value("NodeResourcesFit"), value("TaintToleration")) == (1, 1)
    clock.advance(1)
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert value("NodeResourcesFit") == 1  # still counted while waiting in activeQ
    await pop_now(q)
    assert (value("NodeResourcesFit"), value("TaintToleration")) == (0, 0)


async def test_unschedulable_pods_gauge_drops_on_delete() -> None:
    metrics = SchedulerMetrics()
    q, _ = make_queue(metrics=metrics)
    q.add(Pod("p"))
    await fail(q, "p", "NodeResourcesFit")
    q.delete(Pod("p"))
    assert (
        metrics.registry.get_sample_value(
            "scheduler_unschedulable_pods",
            {"plugin": "NodeResourcesFit", "profile": "kube-async-scheduler"},
        )
        == 0
    )


# ---------------------------------------------------------------- lifecycle


async def test_run_flushes_periodically_and_close_stops_the_tasks() -> None:
    q, clock = make_queue(backoff_flush_interval=0.0, unschedulable_flush_interval=0.0)
    q.add(Pod("p"))
    await fail(q, "p")
    q.run()
    assert q.state is QueueState.RUNNING
    with pytest.raises(QueueClosedError):
        q.run()
    clock.advance(1)
    for _ in range(5):
        await asyncio.sleep(0)
    assert q.where("p") == ACTIVE
    tasks = q.tasks
    q.close()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert tasks and all(t.cancelled() for t in tasks)
    with pytest.raises(QueueClosedError):
        q.run()


async def test_a_failing_flush_is_logged_and_the_task_keeps_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q, clock = make_queue(backoff_flush_interval=0.0, unschedulable_flush_interval=3600.0)
    calls = 0
    real = q.flush_backoff_completed

    def flaky() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("bug")
        return real()

    q.flush_backoff_completed = flaky  # type: ignore[method-assign]
    q.add(Pod("p"))
    await fail(q, "p")
    clock.advance(1)
    q.run()
    for _ in range(5):
        await asyncio.sleep(0)
    q.close()
    await asyncio.gather(*q.tasks, return_exceptions=True)
    assert calls >= 2
    assert q.where("p") == ACTIVE
    assert "queue flush failed" in caplog.text


def test_pod_record_replace_keeps_uid() -> None:
    # the test Pod is a frozen dataclass like the real records: updates are new objects
    assert replace(Pod("p"), priority=3).uid == "p"


async def test_events_of_the_first_fill_are_acted_on_once_when_the_caches_are_synced() -> None:
    gates = Gates()
    q, _ = make_queue(gates=gates)
    q.defer_moves()
    gates.preempting.update({"a", "b"})  # gated by DefaultPreemption, as by a missing claim
    q.add(Pod("a"))
    q.add(Pod("b"))
    q.add(Pod("gated", scheduling_gates=("g",)))
    assert q.where("a") == GATED
    gates.preempting.discard("a")  # what a listed object would open
    for _ in range(3):
        assert q.move_all_to_active_or_backoff(ASSIGNED_DELETE) == 0  # counted, not acted on
        q.assigned_pod_deleted(Pod("victim"))
    assert q.where("a") == GATED
    assert q.resume_moves() == 1  # a's PreEnqueue again: open now
    assert q.where("a") == ACTIVE
    assert q.where("b") == GATED  # still closed
    assert q.where("gated") == GATED
    assert q.resume_moves() == 0  # once
    gates.preempting.clear()
    q.assigned_pod_deleted(Pod("victim"))  # events act at once again
    assert q.where("b") == ACTIVE


async def test_without_events_held_back_resume_moves_nothing() -> None:
    gates = Gates()
    q, _ = make_queue(gates=gates)
    q.defer_moves()
    gates.preempting.add("a")
    q.add(Pod("a"))
    gates.preempting.clear()
    assert q.resume_moves() == 0  # no event: nothing could have opened it
    assert q.where("a") == GATED
