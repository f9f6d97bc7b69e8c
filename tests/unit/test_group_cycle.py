"""The pod-group cycle in memory: the real framework (upstream's default plugins plus
GangScheduling), cache, queue and loop; only the API is absent (binds are recorded, the
FailedScheduling notes collected from the event recorder)."""

from __future__ import annotations

import dataclasses
from typing import Any

from scheduler.algorithm import ProfileAlgorithm
from scheduler.cache import Cache, Nominator
from scheduler.catalog import profile_for
from scheduler.config import names
from scheduler.eventhandlers import PodEventHandler
from scheduler.framework.handle import Handle
from scheduler.framework.runtime import Framework
from scheduler.loop import SchedulingLoop
from scheduler.metrics import PodGroupMetrics, SchedulerMetrics
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.plugins.registry import in_tree_registry
from scheduler.queue import SchedulingQueue
from scheduler.status_writer import StatusWriter
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.fake_clock import FakeClock


class Events:
    def __init__(self) -> None:
        self.notes: dict[str, str] = {}

    def event(self, ref: Any, type_: str, reason: str, action: str, note: str, **kw: Any) -> None:
        if reason == "FailedScheduling":
            self.notes[ref.name] = note


class World:
    def __init__(self, nodes: int = 2, cpu: str = "4") -> None:
        self.cache = Cache()
        for i in range(nodes):
            self.cache.add_node(make_node(f"n{i}").capacity(cpu=cpu, memory="16Gi").obj())
        self.bound: list[tuple[str, str]] = []

        async def binder(pod: PodInfo, node: str) -> None:
            self.bound.append((pod.name, node))

        handle = Handle(binder=binder)
        handle.gang_lookup = self.cache.gang
        refs = tuple(
            r
            for r in names.DEFAULT_MULTI_POINT_GENERIC_WORKLOAD
            if r.name != names.DEFAULT_PREEMPTION
        )
        self.fw = Framework(profile_for(refs), in_tree_registry(), handle)
        m = SchedulerMetrics()
        self.queue: SchedulingQueue[PodInfo] = SchedulingQueue(
            clock=FakeClock(),
            metrics=m,
            pre_enqueue=self.fw.run_pre_enqueue,
            events_to_register=self.fw.events_to_register(),
            group_of=lambda p: f"{p.namespace}/{p.pod_group}" if p.pod_group else "",
        )
        self.fw.set_pod_activator(self.queue)
        self.events = Events()

        async def no_patch(namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
            return {}

        self.group_metrics = PodGroupMetrics(m.registry)
        nominator = Nominator()
        # pods arrive as the informer hands them over: cache, queue, then UnscheduledPodAdd
        self.pods = PodEventHandler(
            self.cache, self.queue, nominator, [self.fw.profile_name], gangs=True
        )
        self.loop = SchedulingLoop(
            cache=self.cache,
            queue=self.queue,
            nominator=nominator,
            frameworks={self.fw.profile_name: self.fw},
            algorithms={self.fw.profile_name: ProfileAlgorithm(self.fw, m)},
            events=self.events,  # type: ignore[arg-type]
            status_writer=StatusWriter(no_patch, metrics=m),
            metrics=m,
            clock=FakeClock(),
            pod_group_metrics=self.group_metrics,
        )

    def group(self, name: str, min_count: int | None) -> None:
        policy = "basic" if min_count is None else "gang"
        self.cache.set_pod_group(
            PodGroupInfo(namespace="default", name=name, policy=policy, min_count=min_count or 1)
        )

    def member(self, name: str, group: str, cpu: str) -> PodInfo:
        pod = dataclasses.replace(make_pod(name).container(cpu=cpu).obj(), pod_group=group)
        self.pods.on_add(pod)
        return pod

    async def cycle(self) -> None:
        info = await self.queue.pop()
        assert info is not None
        self.loop.schedule_one(info)

    def attempts(self, result: str) -> float:
        return self.group_metrics.schedule_attempts.labels(
            result=result, profile=self.fw.profile_name
        )._value.get()


async def test_a_gang_that_fits_is_assumed_whole_in_one_cycle() -> None:
    w = World()
    w.group("g", 3)
    pods = [w.member(f"g-{i}", "g", "1") for i in range(3)]
    await w.cycle()
    assert all(w.cache.is_assumed(p) for p in pods)
    assert w.queue.statistics().active == 0
    assert w.attempts("scheduled") == 1
    await w.loop.drain_binds(5)
    assert sorted(name for name, _ in w.bound) == ["g-0", "g-1", "g-2"]


async def test_a_gang_short_of_min_count_binds_nothing_and_says_why() -> None:
    w = World()
    w.group("big", 3)
    pods = [w.member(f"big-{i}", "big", "3") for i in range(3)]
    await w.cycle()
    # one 3-cpu member fits on each 4-cpu node: two fit, the third does not
    assert not any(w.cache.is_assumed(p) for p in pods)
    assert w.cache.gang("default", "big").scheduled_count == 0  # type: ignore[union-attr]
    # DynamicResources (upstream's default profile) had nothing to free; no DefaultPreemption
    reason = (
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
        "deallocation and deletion of ResourceClaims completed"
    )
    assert w.events.notes == {
        "big-0": f"pod group is unschedulable, {reason}",
        "big-1": f"pod group is unschedulable, {reason}",
        "big-2": "0/2 nodes are available: 2 Insufficient cpu.",
    }
    assert w.attempts("unschedulable") == 1
    # a rejected group is retried through backoff, never parked as unschedulable
    stats = w.queue.statistics()
    assert (stats.backoff, stats.unschedulable) == (3, 0)
    await w.loop.drain_binds(5)
    assert w.bound == []


async def test_members_wait_for_min_count_and_for_their_pod_group() -> None:
    w = World()
    w.group("pair", 2)
    first = w.member("pair-0", "pair", "100m")
    assert w.queue.where(first.uid) == "gated"
    orphan = w.member("orphan-0", "nowhere", "100m")
    assert w.queue.where(orphan.uid) == "gated"
    assert w.fw.run_pre_enqueue(orphan).message() == (
        'waiting for pods\'s pod group "nowhere" to appear in scheduling queue'
    )
    assert w.fw.run_pre_enqueue(first).message() == (
        "waiting for minCount pods from a gang to appear in scheduling queue"
    )
    # the second member passes PreEnqueue, and its arrival (UnscheduledPodAdd) lets the
    # first through GangScheduling's queueing hint
    second = w.member("pair-1", "pair", "100m")
    assert w.queue.where(first.uid) == "active"
    assert w.queue.where(orphan.uid) == "gated"
    await w.cycle()
    assert w.cache.is_assumed(first) and w.cache.is_assumed(second)
    await w.loop.drain_binds(5)


async def test_a_basic_group_places_what_fits() -> None:
    w = World(nodes=1)
    w.group("b", None)
    pods = [w.member(f"b-{i}", "b", "3") for i in range(2)]
    await w.cycle()
    assert [w.cache.is_assumed(p) for p in pods] == [True, False]
    assert w.events.notes == {"b-1": "0/1 nodes are available: 1 Insufficient cpu."}
    assert w.attempts("scheduled") == 1
    await w.loop.drain_binds(5)


async def test_validation_fails_the_whole_group() -> None:
    w = World()
    w.group("v", 2)
    w.member("v-0", "v", "100m")
    odd = make_pod("v-1").container(cpu="100m").priority(7).obj()
    w.pods.on_add(dataclasses.replace(odd, pod_group="v"))
    await w.cycle()
    message = (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 7 and 0"
    )
    assert w.events.notes == {"v-0": message, "v-1": message}
    assert w.attempts("error") == 1
