"""The leader-election fence (issue 10, fault case leader_pause): a write only the leader
may make is sent only while the last successful acquisition or renewal STARTED less than
renewDeadline ago on the monotonic clock; a closed fence nudges the elector to step down.

Time is the injectable FakeClock; a "freeze" (SIGSTOP) is the clock jumping while no
task runs, which is what a thawed process sees."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.client.connection import Response
from scheduler.client.dispatcher import Dispatcher, DispatcherSettings
from scheduler.client.errors import LeaseNotHeld, ServerError
from scheduler.framework.status import Status
from scheduler.leader import LeaderElectionSettings, LeaderElector, LeaseFence
from scheduler.loop import FENCED_BIND
from scheduler.preemption.victim_evictions import FENCED_DELETE, FENCED_PATCH
from tests.unit.client.test_dispatcher import FakeConnection, FakeSleep
from tests.unit.helpers.fake_clock import FakeClock
from tests.unit.preemption.test_executor import decision, harness, pod
from tests.unit.test_leader_election import LeaseStore, VirtualTime
from tests.unit.test_loop import attempts
from tests.unit.test_loop import build as build_loop

RENEW_DEADLINE = 10.0  # the settings' default, as kube-scheduler's


class CountingStore(LeaseStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        self.gets += 1
        return await super().get_lease(namespace, name)


class HeldStore(LeaseStore):
    """A LeaseStore whose next update can be held in flight (the webhook of the fault
    case), to freeze the leader while its renewal is on the way."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: asyncio.Event | None = None
        self.entered = asyncio.Event()

    async def update_lease(
        self, namespace: str, name: str, lease: dict[str, Any]
    ) -> dict[str, Any]:
        if self.hold is not None:
            self.entered.set()
            await self.hold.wait()
        return await super().update_lease(namespace, name, lease)


def elector(vt: VirtualTime, store: LeaseStore, events: list[str]) -> LeaderElector:
    return LeaderElector(
        store,
        LeaderElectionSettings("kube-system", "async-scheduler", "a"),
        on_started_leading=lambda: events.append("started"),
        on_stopped_leading=lambda: events.append("stopped"),
        clock=vt.clock,
        wall=vt.wall,
        sleep=vt.sleep,
        rand=lambda: 0.0,
    )


async def test_the_fence_closes_renew_deadline_after_the_last_renewal_started() -> None:
    vt, store, events = VirtualTime(), LeaseStore(), []
    e = elector(vt, store, events)
    task = asyncio.create_task(e.run())
    await vt.run_for(0)
    assert e.is_leader and e.holds_lease()
    await vt.run_for(4)  # renewed at 2 and 4
    renewed_at = vt.clock.now()
    store.fail["update"] = ServerError(500, "InternalError")  # no renewal succeeds now
    # the clock moves with no task running: only the comparison decides
    vt.clock.advance(RENEW_DEADLINE - 0.001)
    assert e.holds_lease()
    vt.clock.advance(0.001)
    assert vt.clock.now() - renewed_at == pytest.approx(RENEW_DEADLINE)
    assert not e.holds_lease()
    e.stop()
    await vt.run_for(0)
    await task


async def test_a_renewal_answered_after_a_freeze_leaves_the_fence_closed_and_steps_down() -> None:
    vt, store, events = VirtualTime(), HeldStore(), []
    e = elector(vt, store, events)
    task = asyncio.create_task(e.run())
    await vt.run_for(0)
    assert events == ["started"]
    store.hold = asyncio.Event()
    await vt.run_for(2)  # the renewal at t=2 is sent and held in flight
    assert store.entered.is_set()
    sent_at = vt.clock.now()
    vt.clock.advance(20.0)  # SIGSTOP past the lease (15 s), then SIGCONT
    assert not e.holds_lease()  # before any task has run: the start is what counts
    store.hold.set()  # the answer arrives: a success for a request sent 20 s ago
    await vt.settle()  # no virtual time passes: no retry period is waited out
    assert store.spec["renewTime"] is not None and store.rv == 2  # it did succeed
    assert not e.holds_lease()
    assert events == ["started", "stopped"]
    assert vt.clock.now() - sent_at == pytest.approx(20.0)
    await task


async def test_a_closed_fence_is_counted_and_nudges_the_elector_to_step_down_at_once() -> None:
    vt, store, events = VirtualTime(), LeaseStore(), []
    e = elector(vt, store, events)
    task = asyncio.create_task(e.run())
    await vt.run_for(0)
    closed: list[str] = []
    fence = LeaseFence(e, on_closed=closed.append)
    assert fence.open(FENCED_BIND) and closed == []
    store.fail["update"] = ServerError(500, "InternalError")
    await vt.run_for(2.5)  # the renewal at 2 failed; the elector waits a retry period
    vt.clock.advance(RENEW_DEADLINE)  # frozen: its sleep has not woken yet
    assert e.is_leader  # still believes it leads...
    assert not fence.open(FENCED_BIND)  # ...but nothing is sent
    assert closed == [FENCED_BIND]
    await vt.settle()  # the nudge, not a timer, ends the pause
    assert events == ["started", "stopped"] and not e.is_leader
    await task


async def test_a_follower_is_fenced_but_not_nudged() -> None:
    vt, store, events = VirtualTime(), CountingStore(), []
    store.lease = {
        "metadata": {"name": "async-scheduler", "resourceVersion": "1"},
        "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15},
    }
    e = elector(vt, store, events)
    task = asyncio.create_task(e.run())
    await vt.run_for(0)
    reads = store.gets
    closed: list[str] = []
    fence = LeaseFence(e, on_closed=closed.append)
    assert not e.is_leader
    assert not fence.open(FENCED_PATCH)  # a follower writes no pod status...
    assert closed == [FENCED_PATCH]  # ...counted
    await vt.settle()
    # ...and its acquire loop is not woken early (a burst of refused pods must not
    # turn into a burst of Lease reads): it still waits out its retry period
    assert store.gets == reads == 1
    e.stop()
    await vt.run_for(0)
    await task


async def schedule_one_pod(loop: Any, queue: Any) -> Any:
    """A pod through the scheduling cycle and its binding cycle."""
    from tests.unit.helpers.builders import make_pod

    p = make_pod("web").obj()
    queue.add(p)
    info = await queue.pop()
    assert info is not None
    loop.schedule_one(info)
    await loop.drain_binds(5.0)
    return p


def test_without_leader_election_the_fence_is_always_open() -> None:
    assert LeaseFence().open(FENCED_BIND)


async def test_the_binding_cycle_sends_no_bind_when_the_fence_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, queue, events, m, fwk = build_loop()
    binds: list[str] = []

    async def bind(state: Any, pod: Any, node: str) -> Status:
        binds.append(pod.name)
        return Status.success()

    monkeypatch.setattr(fwk, "run_bind", bind)
    asked: list[str] = []

    def closed(operation: str) -> bool:
        asked.append(operation)
        return False

    loop.binding._fence = closed
    p = await schedule_one_pod(loop, queue)
    assert binds == [] and asked == [FENCED_BIND]
    assert not loop.cache.is_assumed(p) and loop.cache.get_pod(p.uid) is None
    assert queue.where(p.uid) == "backoff"  # requeued, not lost
    assert events.sent == []  # no FailedScheduling for a replica that is stepping down
    assert attempts(m, "error") == 0.0


async def test_the_binding_cycle_treats_the_dispatchers_refusal_as_fenced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, queue, events, _, fwk = build_loop()

    async def refused(state: Any, pod: Any, node: str) -> Status:
        err = LeaseNotHeld(FENCED_BIND)
        return Status.from_error(err, plugin="DefaultBinder")

    monkeypatch.setattr(fwk, "run_bind", refused)
    p = await schedule_one_pod(loop, queue)
    assert not loop.cache.is_assumed(p)
    assert queue.where(p.uid) == "backoff"
    assert events.sent == []


async def test_the_dispatcher_checks_the_fence_after_the_rate_limiter() -> None:
    clock = FakeClock()
    conn = FakeConnection(Response(201, {}), Response(200, {}))
    d = Dispatcher(
        conn,  # type: ignore[arg-type]
        DispatcherSettings(qps=1, burst=1),
        clock=clock,
        sleep=FakeSleep(clock),
    )
    held_until = clock.now() + 0.5
    checks: list[str] = []

    def fence(operation: str) -> bool:
        checks.append(operation)
        return clock.now() < held_until

    d.fence = fence
    await d.bind("ns", "p1", "u1", "n1")  # the burst token: sent at once
    with pytest.raises(LeaseNotHeld):
        # waits 1 s for a token (the FakeSleep moves the clock): the lease ran out
        # meanwhile, so the bind is not sent
        await d.bind("ns", "p2", "u2", "n1")
    assert [c["path"] for c in conn.calls] == ["/api/v1/namespaces/ns/pods/p1/binding"]
    assert checks == [FENCED_BIND, FENCED_BIND]
    await d.get_lease("kube-system", "l")  # unfenced calls still go out
    assert len(conn.calls) == 2


async def test_the_executor_sends_no_delete_or_status_patch_when_the_fence_is_closed() -> None:
    h = harness()
    asked: list[str] = []

    def closed(operation: str) -> bool:
        asked.append(operation)
        return False

    h.executor._fence = closed
    ok = await h.start(decision([pod("v1"), pod("v2")]))
    assert not ok
    assert h.api.calls == []
    assert FENCED_PATCH in asked and FENCED_DELETE not in asked  # the patch failed first
    assert h.sample("scheduler_preemption_goroutines_execution_total", result="error") == 1.0
    assert h.activated  # the preemptor is requeued for the next leader


async def test_the_executor_checks_the_fence_before_each_victim_delete() -> None:
    h = harness()
    allowed = {FENCED_PATCH}
    asked: list[str] = []

    def fence(operation: str) -> bool:
        asked.append(operation)
        return operation in allowed

    h.executor._fence = fence
    ok = await h.start(decision([pod("v1", marked=True)]))
    assert not ok
    assert h.api.called("delete") == []
    assert asked[-1] == FENCED_DELETE


async def test_a_prebind_write_refused_by_the_fence_is_fenced_not_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VolumeBinding's PreBind writes PVs and PVCs through the dispatcher, fenced like the
    bind: a refusal there requeues the pod quietly, as a refused bind does."""
    loop, queue, events, m, fwk = build_loop()
    binds: list[str] = []

    async def pre_bind(state: Any, pod: Any, node: str) -> Status:
        return Status.from_error(LeaseNotHeld("update persistentvolumes"), plugin="VolumeBinding")

    async def bind(state: Any, pod: Any, node: str) -> Status:
        binds.append(pod.name)
        return Status.success()

    monkeypatch.setattr(fwk, "run_pre_bind", pre_bind)
    monkeypatch.setattr(fwk, "run_bind", bind)
    p = await schedule_one_pod(loop, queue)
    assert binds == []
    assert not loop.cache.is_assumed(p)
    assert queue.where(p.uid) == "backoff"
    assert events.sent == []
    assert attempts(m, "error") == 0.0
