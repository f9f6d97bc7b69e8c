"""The victims of an all-members PodGroup are deleted together or not at all
(unit_evictions.py), in both executors, with an in-memory API:

- a dry-run DELETE of every member goes first; one refused, no member gets its
  DisruptionTarget, its DELETE or its Permit rejection;
- after the preflight, a member whose real DELETE fails once a sibling went is retried in
  the background (growing delays) until it is gone, each retry counted;
- the retries stop when the lease fence closes, or when the cache shows the member gone.

Interleavings come from the fake API's answers and a fake sleep, never from waiting."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scheduler.cache.cache import Cache
from scheduler.client.errors import ApiError, Forbidden, NotFound
from scheduler.framework.waiting_pods import WaitingPod, WaitingPods
from scheduler.metrics import SchedulerMetrics, UnitEvictionMetrics
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.preemption.evaluator import Decision
from scheduler.preemption.executor import ExecutorSettings, PreemptionExecutor
from scheduler.preemption.pod_group_executor import PodGroupPreemptions
from scheduler.preemption.unit_evictions import UnitEvictions
from scheduler.preemption.victim_evictions import VictimEvictions
from scheduler.supervisor import TaskSet
from tests.unit.helpers.builders import make_pod
from tests.unit.helpers.fake_clock import FakeClock

DRY_RUN = "dry-run"


@dataclass
class Api:
    """Every call as (verb, pod name): verb "patch" (a status patch), "delete", or
    "dry-run" (a DELETE with dryRun=All). `refuse[(verb, name)]` answers that call with
    the error every time, `refuse_next[(verb, name)]` only the next n times."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    refuse: dict[tuple[str, str], ApiError] = field(default_factory=dict)
    refuse_next: dict[tuple[str, str], int] = field(default_factory=dict)
    on_call: Any = None

    async def _call(self, verb: str, name: str) -> dict[str, Any]:
        self.calls.append((verb, name))
        if self.on_call is not None:
            self.on_call(verb, name)
        await asyncio.sleep(0)
        if self.refuse_next.get((verb, name), 0) > 0:
            self.refuse_next[(verb, name)] -= 1
            raise Forbidden(403, "Forbidden", "refused by a webhook")
        err = self.refuse.get((verb, name))
        if err is not None:
            raise err
        return {}

    async def patch_pod_status(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._call("patch", name)

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        assert uid is not None  # always the uid precondition
        return await self._call(DRY_RUN if dry_run else "delete", name)

    def on(self, name: str) -> list[str]:
        """The verbs of the calls about pod `name`, in order."""
        return [v for v, n in self.calls if n == name]


@dataclass
class Events:
    preempted: list[str] = field(default_factory=list)

    def event(self, regarding: Any, type: str, reason: str, *args: Any, **kw: Any) -> None:
        self.preempted.append(regarding.name)


class Handle:
    def __init__(self) -> None:
        self.waiting_pods = WaitingPods()
        self.activated: list[str] = []

    def activate(self, pods: Iterable[PodInfo]) -> None:
        self.activated += [p.name for p in pods]


GROUP = PodGroupInfo(namespace="default", name="g", uid="uid-g", disruption_mode="all")
PREEMPTOR = make_pod("hi").priority(100).scheduler("kas").obj()


def member(name: str, node: str, group: str = "g") -> PodInfo:
    pod = make_pod(name).priority(1).node(node).obj()
    return dataclasses.replace(pod, pod_group=group) if group else pod


@dataclass
class World:
    api: Api
    events: Events
    cache: Cache
    clock: FakeClock
    units: UnitEvictions
    retries: TaskSet
    metrics: SchedulerMetrics  # its registry holds the unit metrics too
    handle: Handle
    lease: list[bool]  # [held]: the fence both the evictions and the retries ask
    slept: list[float] = field(default_factory=list)
    # run by the retries' sleep before it returns: what happened meanwhile
    on_sleep: Any = None

    def fence(self, operation: str) -> bool:
        return self.lease[0]

    def metric(self, name: str, result: str) -> float:
        value = self.metrics.registry.get_sample_value(name, {"result": result})
        return value or 0.0

    def retried(self, result: str) -> float:
        return self.metric("scheduler_preemption_unit_member_retries_total", result)

    def preflights(self, result: str) -> float:
        return self.metric("scheduler_preemption_unit_preflights_total", result)

    async def retries_done(self) -> None:
        await asyncio.gather(*self.retries.tasks)

    def wait_at_permit(self, pod: PodInfo) -> WaitingPod:
        """`pod` assumed on its node and held at Permit."""
        self.cache.assume_pod(pod, pod.node_name)
        waiting = WaitingPod(pod, pod.node_name)
        self.handle.waiting_pods.add(waiting)
        return waiting

    def executor(self, max_parallel: int = 16) -> PreemptionExecutor:
        return PreemptionExecutor(
            self.api, self.events, pod_lookup=self.cache.get_pod, clock=self.clock,
            fence=self.fence, units=self.units,
            settings=ExecutorSettings(max_parallel_victims=max_parallel),
        )  # fmt: skip

    def group_executor(self, tasks: TaskSet) -> PodGroupPreemptions:
        evictions = VictimEvictions(
            self.api, self.fence, self.clock, lambda: dt.datetime.now(dt.UTC), 120.0
        )
        return PodGroupPreemptions(
            evictions, self.events, pod_lookup=self.cache.get_pod, tasks=tasks,
            clock=self.clock, units=self.units,
        )  # fmt: skip


def world(*pods: PodInfo) -> World:
    api = Api()
    cache = Cache()
    cache.set_pod_group(GROUP)
    cache.set_pod_group(dataclasses.replace(GROUP, name="s", uid="uid-s", disruption_mode="single"))
    for p in pods:
        cache.add_pod(p)
    clock = FakeClock()
    metrics = SchedulerMetrics()
    retries = TaskSet("unit-retries")
    lease = [True]
    w: World

    async def sleep(seconds: float) -> None:
        assert len(w.slept) < 30, "the retries never end"
        w.slept.append(seconds)
        clock.advance(seconds)
        if w.on_sleep is not None:
            await w.on_sleep()
        await asyncio.sleep(0)

    units = UnitEvictions(
        api, lambda op: lease[0], cache.gang, cache.get_pod,
        metrics=UnitEvictionMetrics(metrics.registry), tasks=retries, clock=clock, sleep=sleep,
    )  # fmt: skip
    w = World(api, Events(), cache, clock, units, retries, metrics, Handle(), lease)
    return w


def decision(*victims: PodInfo) -> Decision:
    return Decision(PREEMPTOR, "n1", tuple(victims), 0, ())


# ---------------------------------------------------------------- the preflight


async def test_a_refused_dry_run_leaves_every_member_and_the_other_victims_untouched() -> None:
    m0, m1, m2, solo = member("m0", "n1"), member("m1", "n2"), member("m2", "n1"), member(
        "solo", "n1", group=""
    )
    w = world(m0, m1, solo)
    waiting = w.wait_at_permit(m2)
    w.api.refuse[(DRY_RUN, "m1")] = Forbidden(403, "Forbidden", "refused by a webhook")
    ok = await w.executor().start(decision(solo, m0, m1, m2), "", w.handle)
    assert not ok
    # dry runs for the members that would take a call, nothing else for any victim
    assert w.api.on("m0") == [DRY_RUN] and w.api.on("m1") == [DRY_RUN]
    assert w.api.on("m2") == [] and w.api.on("solo") == []
    assert not waiting.verdict.done()  # the member at Permit is not rejected either
    assert w.events.preempted == []
    assert w.preflights("refused") == 1 and w.preflights("passed") == 0
    assert w.retries.tasks == []
    assert w.handle.activated == ["hi"]  # the task failed: the preemptor comes back


async def test_a_dry_run_passed_then_every_member_goes_and_the_waiting_one_is_rejected() -> None:
    m0, m1, m2 = member("m0", "n1"), member("m1", "n2"), member("m2", "n1")
    w = world(m0, m1)
    waiting = w.wait_at_permit(m2)
    ok = await w.executor().start(decision(m0, m1, m2), "", w.handle)
    assert ok
    for name in ("m0", "m1"):
        assert w.api.on(name) == [DRY_RUN, "patch", "delete"]
    assert w.api.on("m2") == []  # rejected in memory, after the preflight
    assert waiting.verdict.done() and not waiting.verdict.result().ok
    assert sorted(w.events.preempted) == ["m0", "m1", "m2"]
    assert w.preflights("passed") == 1
    # both dry runs before the first write to a victim
    to_victims = [v for v, name in w.api.calls if name != "hi"]
    assert to_victims[:2] == [DRY_RUN, DRY_RUN] and DRY_RUN not in to_victims[2:]


async def test_a_member_gone_before_its_dry_run_does_not_stop_the_others() -> None:
    m0, m1 = member("m0", "n1"), member("m1", "n2")
    w = world(m0, m1)
    w.api.refuse[(DRY_RUN, "m1")] = NotFound(404, "NotFound")
    w.api.refuse[("patch", "m1")] = NotFound(404, "NotFound")
    assert await w.executor().start(decision(m0, m1), "", w.handle)
    assert w.api.on("m0") == [DRY_RUN, "patch", "delete"]
    assert w.preflights("passed") == 1


async def test_victims_outside_an_all_members_group_take_no_dry_run() -> None:
    # a single-mode group's member, a pod without group: today's path exactly
    single, solo = member("s0", "n1", group="s"), member("solo", "n1", group="")
    w = world(single, solo)
    assert await w.executor().start(decision(single, solo), "", w.handle)
    assert w.api.on("s0") == ["patch", "delete"] and w.api.on("solo") == ["patch", "delete"]
    assert w.preflights("passed") == 0 and w.preflights("refused") == 0


# ---------------------------------------------------------------- the repair


async def test_a_member_refused_after_its_sibling_went_is_retried_until_it_goes() -> None:
    m0, m1, solo = member("m0", "n1"), member("m1", "n2"), member("solo", "n1", group="")
    w = world(m0, m1, solo)
    w.api.refuse_next[("delete", "m1")] = 3  # the task's DELETE and two retries
    ok = await w.executor().start(decision(m0, m1, solo), "", w.handle)
    assert not ok  # a DELETE failed: the task fails as today
    assert w.api.on("solo") == []  # the last victim, not a member, is left alone as today
    await w.retries_done()
    assert w.api.on("m0") == [DRY_RUN, "patch", "delete"]
    assert w.api.on("m1") == [DRY_RUN] + ["patch", "delete"] * 4
    assert w.slept == [0.5, 1.0, 2.0]
    assert (w.retried("failed"), w.retried("deleted"), w.retried("abandoned")) == (2, 1, 0)
    assert sorted(w.events.preempted) == ["m0", "m1"]


async def test_a_member_left_alone_as_the_last_victim_is_repaired_too() -> None:
    # the last victim is a member: a single victim's failure leaves it alone, but its
    # sibling went already, so it is retried
    solo, m0, m1 = member("solo", "n1", group=""), member("m0", "n2"), member("m1", "n1")
    w = world(solo, m0, m1)
    w.api.refuse[("delete", "solo")] = Forbidden(403, "Forbidden", "no")
    assert not await w.executor().start(decision(solo, m0, m1), "", w.handle)
    await w.retries_done()
    assert w.api.on("m0") == [DRY_RUN, "patch", "delete"]
    assert w.api.on("m1") == [DRY_RUN, "patch", "delete"]
    assert w.retried("deleted") == 1 and w.slept == [0.5]


async def test_every_member_is_tried_even_after_another_victim_failed() -> None:
    # bounded to one call at a time: the single victim fails first; the members, which
    # passed their preflight, are still preempted (a pod would be left alone)
    solo, other = member("solo", "n1", group=""), member("other", "n1", group="")
    m0, m1 = member("m0", "n2"), member("m1", "n1")
    w = world(solo, other, m0, m1)
    w.api.refuse[("delete", "solo")] = Forbidden(403, "Forbidden", "no")
    victims = decision(solo, other, m0, m1, member("last", "n1", group=""))
    assert not await w.executor(max_parallel=1).start(victims, "", w.handle)
    assert w.api.on("other") == []  # a pod: no new call after a failure, as today
    assert w.api.on("m0") == [DRY_RUN, "patch", "delete"]
    assert w.api.on("m1") == [DRY_RUN, "patch", "delete"]
    assert w.retries.tasks == []  # the unit went whole: nothing to repair


async def test_the_retries_stop_when_the_lease_is_lost() -> None:
    m0, m1 = member("m0", "n1"), member("m1", "n2")
    w = world(m0, m1)
    w.api.refuse[("delete", "m1")] = Forbidden(403, "Forbidden", "no")

    def lose_lease_at_the_first_retry(verb: str, name: str) -> None:
        if (verb, name) == ("delete", "m1") and w.api.on("m1").count("delete") == 2:
            w.lease[0] = False

    w.api.on_call = lose_lease_at_the_first_retry
    assert not await w.executor().start(decision(m0, m1), "", w.handle)
    await w.retries_done()
    assert w.api.on("m1") == [DRY_RUN, "patch", "delete", "patch", "delete"]
    assert w.slept == [0.5, 1.0]  # woke once more, saw the fence closed, stopped
    assert (w.retried("failed"), w.retried("abandoned"), w.retried("deleted")) == (1, 1, 0)


async def test_the_retries_stop_when_the_cache_shows_the_member_gone() -> None:
    m0, m1 = member("m0", "n1"), member("m1", "n2")
    w = world(m0, m1)
    w.api.refuse[("delete", "m1")] = Forbidden(403, "Forbidden", "no")

    async def deleted_by_someone_else() -> None:  # and the informer says so
        w.cache.remove_pod(m1)

    w.on_sleep = deleted_by_someone_else
    assert not await w.executor().start(decision(m0, m1), "", w.handle)
    await w.retries_done()
    assert w.api.on("m1") == [DRY_RUN, "patch", "delete"]
    assert w.retried("gone") == 1 and w.retried("failed") == 0


async def test_close_abandons_the_retries_and_counts_them() -> None:
    m0, m1 = member("m0", "n1"), member("m1", "n2")
    w = world(m0, m1)
    w.api.refuse[("delete", "m1")] = Forbidden(403, "Forbidden", "no")
    blocked = asyncio.Event()

    async def shutdown_comes_first() -> None:
        blocked.set()
        await asyncio.Event().wait()

    w.on_sleep = shutdown_comes_first
    assert not await w.executor().start(decision(m0, m1), "", w.handle)
    await blocked.wait()
    assert await w.units.close() == 1
    assert w.retried("abandoned") == 1


# ---------------------------------------------------------------- pod-group preemption


async def test_pod_group_preemption_touches_no_member_when_a_dry_run_is_refused() -> None:
    m0, m1, m2 = member("m0", "n1"), member("m1", "n2"), member("m2", "n1")
    pod = member("pod", "n2", group="")
    w = world(m0, m1, pod)
    waiting = w.wait_at_permit(m2)
    w.api.refuse[(DRY_RUN, "m0")] = Forbidden(403, "Forbidden", "no")
    tasks = TaskSet("podgroup-preemptions")
    gangs = w.group_executor(tasks)
    preemptors = PodGroupInfo(namespace="default", name="big", uid="uid-big")
    gangs.start(preemptors, [PREEMPTOR], [m0, pod, m1, m2], w.handle)
    await asyncio.gather(*tasks.tasks)
    assert [v for v, _ in w.api.calls] == [DRY_RUN, DRY_RUN]
    assert not waiting.verdict.done()
    assert w.events.preempted == []
    assert not gangs.is_gated("uid-big")  # failed: the members come back
    gangs.close()


async def test_pod_group_preemption_deletes_the_group_whole_and_repairs_a_tear() -> None:
    m0, m1, m2 = member("m0", "n1"), member("m1", "n2"), member("m2", "n1")
    w = world(m0, m1)
    waiting = w.wait_at_permit(m2)
    w.api.refuse_next[("delete", "m1")] = 1
    tasks = TaskSet("podgroup-preemptions")
    gangs = w.group_executor(tasks)
    preemptors = PodGroupInfo(namespace="default", name="big", uid="uid-big")
    gangs.start(preemptors, [PREEMPTOR], [m0, m1, m2], w.handle)
    await asyncio.gather(*tasks.tasks)
    await w.retries_done()
    # m1's refusal left m2, the last victim, alone: the repair takes both
    assert waiting.verdict.done()
    assert w.api.on("m0") == [DRY_RUN, "patch", "delete"]
    assert w.api.on("m1") == [DRY_RUN, "patch", "delete", "patch", "delete"]
    assert w.api.on("m2") == []
    assert w.retried("deleted") == 2
    assert sorted(w.events.preempted) == ["m0", "m1", "m2"]
    gangs.close()
