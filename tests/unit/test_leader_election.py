"""scheduler.leader: client-go lease semantics on virtual time and an in-memory Lease."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import heapq
import itertools
from typing import Any

import pytest

from scheduler.client.errors import AlreadyExists, Conflict, NotFound, ServerError
from scheduler.leader import (
    ElectorState,
    LeaderElectionSettings,
    LeaderElector,
    LeaderRecord,
    can_acquire,
)
from tests.unit.helpers.fake_clock import FakeClock


class VirtualTime:
    """asyncio sleeps on a FakeClock; run_for() moves time and wakes sleepers in order."""

    def __init__(self) -> None:
        self.clock = FakeClock(0.0)
        self._waiters: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    async def sleep(self, delay: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (self.clock.now() + delay, next(self._seq), fut))
        await fut

    async def settle(self) -> None:
        for _ in range(50):
            await asyncio.sleep(0)

    async def run_for(self, seconds: float) -> None:
        end = self.clock.now() + seconds
        await self.settle()
        while self._waiters and self._waiters[0][0] <= end:
            when, _, fut = heapq.heappop(self._waiters)
            if fut.done():
                continue
            self.clock.advance(max(0.0, when - self.clock.now()))
            fut.set_result(None)
            await self.settle()
        self.clock.advance(end - self.clock.now())
        await self.settle()

    def wall(self) -> dt.datetime:
        return dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=self.clock.now())


class LeaseStore:
    """One Lease with resourceVersion checks, as the apiserver would keep it."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.fail: dict[str, Exception] = {}
        self.writes: list[dict[str, Any]] = []

    def _check(self, op: str) -> None:
        if op in self.fail:
            raise self.fail[op]

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        self._check("get")
        if self.lease is None:
            raise NotFound(404, "NotFound")
        return copy.deepcopy(self.lease)

    async def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        self._check("create")
        if self.lease is not None:
            raise AlreadyExists(409, "AlreadyExists")
        return self._store(lease)

    async def update_lease(
        self, namespace: str, name: str, lease: dict[str, Any]
    ) -> dict[str, Any]:
        self._check("update")
        assert self.lease is not None
        if lease["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        return self._store(lease)

    def _store(self, lease: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.lease = stored
        self.writes.append(copy.deepcopy(stored["spec"]))
        return copy.deepcopy(stored)

    @property
    def spec(self) -> dict[str, Any]:
        assert self.lease is not None
        return dict(self.lease["spec"])


class Candidate:
    def __init__(self, vt: VirtualTime, store: LeaseStore, identity: str) -> None:
        self.events: list[str] = []
        self.elector = LeaderElector(
            store,
            LeaderElectionSettings("kube-system", "async-scheduler", identity),
            on_started_leading=lambda: self.events.append("started"),
            on_stopped_leading=lambda: self.events.append("stopped"),
            clock=vt.clock,
            wall=vt.wall,
            sleep=vt.sleep,
            rand=lambda: 0.0,
        )
        self.task = asyncio.create_task(self.elector.run())


@pytest.mark.parametrize(
    ("holder", "observed", "now", "expected"),
    [
        ("", 0.0, 0.0, True),  # free
        ("me", 0.0, 0.0, True),  # ours
        ("other", 100.0, 110.0, False),  # seen changing 10s ago, 15s lease
        ("other", 100.0, 115.0, True),  # unchanged for the whole lease
    ],
)
def test_can_acquire(holder: str, observed: float, now: float, expected: bool) -> None:
    record = LeaderRecord(holder, 15, None, None, 0)
    assert can_acquire(record, observed, now, "me") is expected


def test_settings_are_validated_as_client_go() -> None:
    with pytest.raises(ValueError):
        LeaderElectionSettings("ns", "n", "me", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError):
        LeaderElectionSettings("ns", "n", "me", renew_deadline=2.0, retry_period=2.0)
    with pytest.raises(ValueError):
        LeaderElectionSettings("ns", "n", "")


async def test_a_lone_candidate_creates_the_lease_and_leads() -> None:
    vt, store = VirtualTime(), LeaseStore()
    a = Candidate(vt, store, "a")
    await vt.run_for(0)
    assert a.elector.is_leader
    assert a.events == ["started"]
    assert store.spec["holderIdentity"] == "a"
    assert store.spec["leaseDurationSeconds"] == 15
    assert store.spec["leaseTransitions"] == 0
    await vt.run_for(10)
    assert store.rv == 6  # created, then renewed every 2s
    a.elector.stop()
    await vt.run_for(0)
    await a.task


async def test_exactly_one_of_two_leads_and_the_follower_waits_out_a_dead_leader() -> None:
    vt, store = VirtualTime(), LeaseStore()
    a = Candidate(vt, store, "a")
    await vt.run_for(0)
    b = Candidate(vt, store, "b")
    await vt.run_for(30)
    assert (a.elector.is_leader, b.elector.is_leader) == (True, False)
    assert b.elector.leader == "a"
    # a's apiserver path breaks: it must step down before b may take over
    store.fail["get"] = ServerError(503, "ServiceUnavailable")
    a_stopped_at = b_started_at = None
    for _ in range(200):
        await vt.run_for(0.1)
        if a_stopped_at is None and not a.elector.is_leader:
            a_stopped_at = vt.clock.now()
            store.fail.clear()  # b can reach the apiserver again
        if b.elector.is_leader:
            b_started_at = vt.clock.now()
            break
    assert a_stopped_at is not None and b_started_at is not None
    assert a.events == ["started", "stopped"]
    assert b_started_at > a_stopped_at
    assert store.spec["holderIdentity"] == "b"
    assert store.spec["leaseTransitions"] == 1
    await a.task  # a lost: run() returns
    b.elector.stop()
    await vt.run_for(0)
    await b.task


async def test_a_leader_steps_down_within_renew_deadline_of_its_last_renewal() -> None:
    vt, store = VirtualTime(), LeaseStore()
    a = Candidate(vt, store, "a")
    await vt.run_for(0)
    last_write = vt.clock.now()
    store.fail["update"] = ServerError(500, "InternalError")
    while a.elector.is_leader:
        await vt.run_for(0.5)
    assert vt.clock.now() - last_write <= 10.5
    assert vt.clock.now() - last_write < 15  # before the lease can expire for others
    await a.task
    assert a.elector.state is ElectorState.STOPPED


async def test_stop_releases_the_lease_and_the_follower_takes_over_on_its_next_poll() -> None:
    vt, store = VirtualTime(), LeaseStore()
    a = Candidate(vt, store, "a")
    await vt.run_for(0)
    b = Candidate(vt, store, "b")
    await vt.run_for(5)
    a.elector.stop()
    await vt.run_for(0)
    await a.task
    assert store.spec["holderIdentity"] == ""
    assert store.spec["leaseDurationSeconds"] == 1
    assert a.events == ["started", "stopped"]
    released_at = vt.clock.now()
    while not b.elector.is_leader:
        await vt.run_for(0.1)
    assert vt.clock.now() - released_at <= 2.0 + 0.01  # one retry period
    assert store.spec["leaseTransitions"] == 1
    b.elector.stop()
    await vt.run_for(0)
    await b.task


async def test_a_conflicting_write_is_not_leadership_and_the_next_round_rereads() -> None:
    vt, store = VirtualTime(), LeaseStore()
    store.lease = {
        "metadata": {"name": "async-scheduler", "namespace": "kube-system", "resourceVersion": "0"},
        "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 3},
    }
    store.fail["update"] = Conflict(409, "Conflict")
    a = Candidate(vt, store, "a")
    await vt.run_for(1)
    assert not a.elector.is_leader
    del store.fail["update"]
    await vt.run_for(3)
    assert a.elector.is_leader
    assert store.spec["leaseTransitions"] == 4
    a.elector.stop()
    await vt.run_for(0)
    await a.task


async def test_a_renewal_keeps_the_acquire_time_and_transitions() -> None:
    vt, store = VirtualTime(), LeaseStore()
    a = Candidate(vt, store, "a")
    await vt.run_for(0)
    first = store.spec
    await vt.run_for(4)
    assert store.spec["acquireTime"] == first["acquireTime"]
    assert store.spec["renewTime"] != first["renewTime"]
    assert store.spec["leaseTransitions"] == 0
    a.elector.stop()
    await vt.run_for(0)
    await a.task


async def test_healthz_reports_a_stalled_loop() -> None:
    vt, store = VirtualTime(), LeaseStore()
    a = Candidate(vt, store, "a")
    await vt.run_for(0)
    assert a.elector.healthz() is None
    vt.clock.advance(36)  # no tick for longer than leaseDuration + 20s
    problem = a.elector.healthz()
    assert problem is not None and "kube-system/async-scheduler" in problem
    a.elector.stop()
    await vt.run_for(0)
    await a.task
    assert a.elector.healthz() is None  # a stopped elector is not a failing one


async def test_healthz_reports_a_standby_that_cannot_reach_the_lease() -> None:
    vt, store = VirtualTime(), LeaseStore()
    a = Candidate(vt, store, "a")
    await vt.run_for(0)
    b = Candidate(vt, store, "b")
    await vt.run_for(60)  # a standby that sees a live leader is healthy
    assert not b.elector.is_leader and b.elector.healthz() is None
    store.fail["get"] = ServerError(403, "Forbidden", "leases is forbidden")
    await vt.run_for(34)  # a stepped down after 10s; b polls but gets no answer
    assert not a.elector.is_leader
    assert b.elector.healthz() is None  # not yet leaseDuration + 20s
    await vt.run_for(2)
    problem = b.elector.healthz()
    assert problem is not None
    assert "no answer about lease kube-system/async-scheduler" in problem
    assert "leases is forbidden" in problem
    del store.fail["get"]
    await vt.run_for(3)  # the next answer makes it healthy again, and it leads
    assert b.elector.healthz() is None and b.elector.is_leader
    b.elector.stop()
    await vt.run_for(0)
    await asyncio.gather(a.task, b.task)


async def test_running_twice_is_refused() -> None:
    vt, store = VirtualTime(), LeaseStore()
    a = Candidate(vt, store, "a")
    await vt.run_for(0)
    with pytest.raises(RuntimeError):
        await a.elector.run()
    a.elector.stop()
    await vt.run_for(0)
    await a.task
