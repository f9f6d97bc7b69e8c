"""DefaultPreemption on the real framework, cache, nominator and queue: PostFilter's
decision and in-memory nomination, the PreEnqueue gate opening and closing, the events
that re-check gated preemptors, Sync mode, and the metrics."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler import catalog
from scheduler.algorithm import schedule_pod
from scheduler.cache import Cache, Nominator
from scheduler.catalog import profile_for
from scheduler.client.events import ObjectRef
from scheduler.config import names
from scheduler.config.args import DefaultPreemptionArgs
from scheduler.framework import CycleState, FitError, Framework, Handle
from scheduler.framework.cluster_event import EventResource, QueueingHint
from scheduler.framework.status import Code
from scheduler.loop import record_nominations
from scheduler.metrics import SchedulerMetrics
from scheduler.model.pod import PodInfo
from scheduler.preemption.default_preemption import (
    MSG_WAITING,
    DefaultPreemption,
    PreemptionServices,
    factory,
)
from scheduler.preemption.executor import PreemptionExecutor
from scheduler.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, SchedulingQueue
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.fake_clock import FakeClock


@dataclass
class Api:
    calls: list[tuple[str, str]] = field(default_factory=list)
    hold: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    entered: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)

    async def reached(self, verb: str, key: str) -> None:
        await self.entered.setdefault((verb, key), asyncio.Event()).wait()

    async def _call(self, verb: str, key: str) -> dict[str, Any]:
        self.calls.append((verb, key))
        self.entered.setdefault((verb, key), asyncio.Event()).set()
        gate = self.hold.get((verb, key))
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(0)
        return {}

    async def patch_pod_status(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._call("patch", name)

    async def delete_pod(
        self, ns: str, name: str, *, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> dict[str, Any]:
        return await self._call("delete", name)


class Events:
    def event(
        self, regarding: ObjectRef, type: str, reason: str, action: str, note: str, **kw: Any
    ) -> None:
        pass


@dataclass
class World:
    cache: Cache
    nominator: Nominator
    framework: Framework
    plugin: DefaultPreemption
    executor: PreemptionExecutor
    api: Api
    metrics: SchedulerMetrics
    activated: list[str]
    clock: FakeClock
    queue: SchedulingQueue[PodInfo] | None = None
    last_result: Any = None

    def cycle(self, pod: PodInfo, direct: bool = False) -> tuple[Any, Any]:
        """schedule_pod, then PostFilter through the framework (or the plugin itself,
        to see a result the runtime drops on failure), then what the loop does with
        the result: the nominations go into the nominator (loop.record_nominations)."""
        snapshot = self.cache.new_snapshot()
        state = CycleState()
        fit = schedule_pod(self.framework, state, pod, snapshot, self.nominator)
        assert isinstance(fit, FitError), "the test pod must not fit anywhere"
        if direct:
            result, status = self.plugin.post_filter(state, pod, snapshot, fit.diagnosis)
        else:
            result, status = self.framework.run_post_filter(state, pod, snapshot, fit.diagnosis)
        if result is not None and result.nominated_node_name and not status.ok:
            result = replace(result, nominated_node_name=None)  # as the loop
        record_nominations(self.nominator, pod, result)
        self.last_result = result
        return result, status

    def preempting(self, pod: PodInfo) -> bool:
        return self.executor.is_running(pod.uid)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)


def low(name: str, node: str, prio: int = 1, cpu: str = "900m", sched: str = "") -> PodInfo:
    b = make_pod(name).priority(prio).requests(cpu=cpu).node(node).started("2024-01-01T00:00:00Z")
    if sched:
        b = b.scheduler(sched)
    return b.obj()


def world(
    nodes: int = 2,
    mode: str = "Async",
    own: frozenset[str] = frozenset({"default-scheduler"}),
    with_queue: bool = False,
    victims_scheduler: str = "",
) -> World:
    """`nodes` nodes of 4 cpu, each full with 4 low pods of 900m (upstream's
    PreemptionAsync shape): a 3-cpu preemptor must evict 3 of them."""
    cache = Cache()
    for i in range(nodes):
        cache.add_node(make_node(f"n{i}").capacity(cpu="4", pods="110").obj())
        for j in range(4):
            cache.add_pod(low(f"v{i}-{j}", f"n{i}", prio=j + 1, sched=victims_scheduler))
    api, metrics, activated, clock = Api(), SchedulerMetrics(), [], FakeClock()
    holder: dict[str, SchedulingQueue[PodInfo]] = {}

    class Activator:
        def activate(self, pods: Any) -> None:
            pods = list(pods)
            activated.extend(p.name for p in pods)
            if "q" in holder:
                holder["q"].activate(pods)

    executor = PreemptionExecutor(api, Events(), pod_lookup=cache.get_pod, metrics=metrics)
    services = PreemptionServices(
        executor=executor,
        own_schedulers=own,
        pod_lookup=cache.get_pod,
        metrics=metrics,
        rand=lambda n: 0,
    )
    registry = catalog.registry(services)
    profile = profile_for(
        plugin_args={names.DEFAULT_PREEMPTION: DefaultPreemptionArgs(mode=mode)}
    )
    nominator = Nominator()
    fw = Framework(profile, registry, Handle(nominator=nominator))
    fw.set_pod_activator(Activator())
    plugin = fw.plugin(names.DEFAULT_PREEMPTION)
    assert isinstance(plugin, DefaultPreemption)
    w = World(cache, nominator, fw, plugin, executor, api, metrics, activated, clock)
    if with_queue:
        q: SchedulingQueue[PodInfo] = SchedulingQueue(
            pre_enqueue=fw.run_pre_enqueue,
            events_to_register=fw.events_to_register(),
            clock=clock,
        )
        holder["q"] = q
        w.queue = q
    return w


def high(name: str = "hi", cpu: str = "3", **kw: Any) -> PodInfo:
    b = make_pod(name).priority(1000).requests(cpu=cpu)
    if kw.get("never"):
        b = b.preemption_policy("Never")
    return b.obj()


# ---------------------------------------------------------------- PostFilter


async def test_post_filter_decides_nominates_and_starts_the_task() -> None:
    w = world()
    pod = high()
    result, status = w.cycle(pod)
    assert status.ok and result is not None and result.nominated_node_name == "n0"
    assert w.nominator.nominated_node(pod) == "n0"  # in memory, before any API call
    assert w.api.calls == []  # nothing on the wire inside the cycle
    assert w.preempting(pod)
    assert w.sample("scheduler_preemption_attempts_total") == 1
    assert w.sample("scheduler_preemption_victims_count") == 1
    assert w.sample("scheduler_preemption_victims_sum") == 3  # 3 of the 4 pods of 900m
    await asyncio.gather(*w.executor._tasks)
    deleted = [k for v, k in w.api.calls if v == "delete"]
    assert sorted(deleted[:2]) == ["v0-1", "v0-2"]
    assert deleted[-1] == "v0-0"  # the least important goes last
    assert not w.preempting(pod)
    assert w.activated[-1] == "hi"


async def test_the_preemptor_status_carries_the_fit_error_message() -> None:
    w = world(nodes=1)
    seen: list[dict[str, Any]] = []

    async def patch(ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {}

    w.api.patch_pod_status = patch  # type: ignore[method-assign]
    w.cycle(high())
    await asyncio.gather(*w.executor._tasks)
    cond = seen[0]["status"]["conditions"][0]
    # upstream: the FitError message with Preempt's success text as PostFilter message
    assert cond["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu."
        " preemption: found a potential placement for pod on node n0, preempting 3 victims"
    )
    assert seen[0]["status"]["nominatedNodeName"] == "n0"


@pytest.mark.parametrize(
    ("case", "pod", "kw", "code", "clears"),
    [
        ("preemptionPolicy Never", high(never=True), {}, Code.UNSCHEDULABLE, False),
        ("another scheduler's pods are no victims", high(), {"victims_scheduler": "other"},
         Code.UNSCHEDULABLE, True),
        ("no node can fit even empty", high(cpu="5"), {}, Code.UNSCHEDULABLE, True),
    ],
)  # fmt: skip
async def test_post_filter_without_preemption(
    case: str, pod: PodInfo, kw: dict[str, Any], code: Code, clears: bool
) -> None:
    w = world(**kw)
    w.nominator.add(pod, "n1")
    result, status = w.cycle(pod, direct=True)
    assert status.code == code, case
    assert status.plugin == names.DEFAULT_PREEMPTION, case
    if clears:
        assert result is not None and result.nominated_node_name == "", case
        assert w.nominator.nominated_node(pod) is None, case
    else:
        assert result is None, case
        assert w.nominator.nominated_node(pod) == "n1", case
    assert not w.preempting(pod)
    assert w.sample("scheduler_preemption_attempts_total") == 1
    assert w.sample("scheduler_preemption_victims_count") == 0


async def test_victim_scope_all_may_evict_other_schedulers_pods() -> None:
    w = world(victims_scheduler="other")
    w.plugin.evaluator._all_victims = True  # as victimScope: All
    result, status = w.cycle(high())
    assert status.ok and result is not None and result.nominated_node_name == "n0"
    await asyncio.gather(*w.executor._tasks)


async def test_lower_priority_nominations_on_the_node_are_cleared() -> None:
    w = world(nodes=1)
    lesser = make_pod("lesser").priority(500).requests(cpu="1").nominated("n0").obj()
    w.nominator.add(lesser)
    w.cycle(high())
    assert w.nominator.nominated_node(lesser) is None
    await asyncio.gather(*w.executor._tasks)
    assert w.api.calls[0] == ("patch", "lesser")
    assert "lesser" in w.activated


async def test_a_second_post_filter_while_preempting_does_not_preempt_again() -> None:
    w = world()
    w.api.hold[("patch", "hi")] = gate = asyncio.Event()
    pod = high()
    w.cycle(pod)
    result, status = w.cycle(pod)
    assert status.message() == MSG_WAITING
    # no nomination change, and the running task writes the pod's status
    assert result.nominated_node_name is None and result.status_by_task
    gate.set()
    await asyncio.gather(*w.executor._tasks)


# ---------------------------------------------------------------- the gate


async def test_gate_closed_while_preempting_open_once_the_last_victim_goes() -> None:
    w = world(nodes=1)
    w.api.hold[("delete", "v0-0")] = gate = asyncio.Event()  # the last victim
    pod = high()
    w.cycle(pod)
    st = w.plugin.pre_enqueue(pod)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.message() == MSG_WAITING
    assert st.plugin == names.DEFAULT_PREEMPTION
    await w.api.reached("delete", "v0-0")
    last = w.executor.last_victim(pod.uid)
    assert last is not None and last.name == "v0-0"
    assert not w.plugin.pre_enqueue(pod).ok  # the last victim is still there
    # the informer shows its deletionTimestamp: open
    terminating = replace(last, deletion_timestamp=1.0)
    w.cache.update_pod(last, terminating)
    assert w.plugin.pre_enqueue(pod).ok
    # ... or it is gone from the cache: open too
    w.cache.update_pod(terminating, last)
    assert not w.plugin.pre_enqueue(pod).ok
    w.cache.remove_pod(last)
    assert w.plugin.pre_enqueue(pod).ok
    gate.set()
    await asyncio.gather(*w.executor._tasks)
    # the task succeeded: now every victim it preempted must be seen leaving (the
    # DELETEs' answers came before the informer's updates)
    victims = _victims_showing(w, pod)
    assert victims and not w.plugin.pre_enqueue(pod).ok
    for victim in victims:
        w.cache.remove_pod(victim)
    assert w.plugin.pre_enqueue(pod).ok


def _victims_showing(w: World, pod: PodInfo) -> list[PodInfo]:
    """The preemptor's victims the cache still shows (the fake API deletes nothing)."""
    out = []
    while (victim := w.executor.last_victim(pod.uid)) is not None:
        out.append(victim)
        w.cache.update_pod(victim, replace(victim, deletion_timestamp=1.0))
    for victim in out:
        w.cache.update_pod(replace(victim, deletion_timestamp=1.0), victim)
    return out


async def test_every_victim_already_terminating_gates_only_until_the_status_is_written() -> None:
    w = world(nodes=1)
    for p in list(w.cache.new_snapshot().get("n0").pods.values()):  # type: ignore[union-attr]
        w.cache.update_pod(p, replace(p, deletion_timestamp=1.0))
    pod = high()
    result, status = w.cycle(pod)
    assert status.ok and result is not None
    assert w.preempting(pod)  # the task still writes its status
    assert not w.plugin.pre_enqueue(pod).ok  # not before that patch is written
    await asyncio.gather(*w.executor._tasks)
    assert w.plugin.pre_enqueue(pod).ok
    assert [v for v, _ in w.api.calls] == ["patch"]


async def test_hints_requeue_a_gated_preemptor_only_once_the_gate_is_open() -> None:
    # the informer updates the cache before the queue runs the hints: each step below
    # changes the cache first, as the informer would, then asks the hint
    w = world(nodes=1)
    w.api.hold[("delete", "v0-0")] = gate = asyncio.Event()
    pod = high()
    w.cycle(pod)
    (on_delete, on_update) = w.plugin.events_to_register()
    assert on_delete.event.resource == EventResource.ASSIGNED_POD
    assert on_delete.hint is not None and on_update.hint is not None
    stranger = low("stranger", "n0")
    assert on_delete.hint(pod, stranger, None) is QueueingHint.SKIP  # nothing recorded yet
    await w.api.reached("delete", "v0-0")
    last = w.executor.last_victim(pod.uid)
    assert last is not None
    assert on_delete.hint(pod, stranger, None) is QueueingHint.SKIP
    assert on_update.hint(pod, last, last) is QueueingHint.SKIP
    terminating = replace(last, deletion_timestamp=1.0)
    w.cache.update_pod(last, terminating)
    assert on_update.hint(pod, last, terminating) is QueueingHint.QUEUE
    w.cache.update_pod(terminating, last)
    gate.set()
    await asyncio.gather(*w.executor._tasks)
    # the task ended but the cache still shows its victims: still gated, whichever
    # assigned pod changes, until the last of them is seen leaving
    victims = _victims_showing(w, pod)
    assert len(victims) == 3
    for i, victim in enumerate(victims):
        assert on_delete.hint(pod, stranger, None) is QueueingHint.SKIP
        w.cache.remove_pod(victim)
        expected = QueueingHint.QUEUE if i == len(victims) - 1 else QueueingHint.SKIP
        assert on_delete.hint(pod, victim, None) is expected
    assert w.plugin.pre_enqueue(pod).ok
    assert on_delete.hint(pod, stranger, None) is QueueingHint.QUEUE  # not gated any more


# ---------------------------------------------------------------- with the real queue


async def test_queue_gates_the_preemptor_and_the_task_end_activates_it() -> None:
    w = world(nodes=1, with_queue=True)
    q = w.queue
    assert q is not None
    w.api.hold[("delete", "v0-0")] = gate = asyncio.Event()
    pod = high()
    q.add(pod)
    info = await q.pop()
    assert info is not None
    cycle = q.scheduling_cycle
    w.cycle(pod)
    q.add_unschedulable_if_not_present(info, {names.NODE_RESOURCES_FIT}, cycle)
    q.done(pod.uid)
    assert q.where(pod.uid) == UNSCHEDULABLE
    # a victim's delete event would requeue it for NodeResourcesFit: the gate holds it
    await w.api.reached("delete", "v0-0")
    victim = w.cache.get_pod(
        next(uid for uid, p in w.cache.new_snapshot().get("n0").pods.items() if p.name == "v0-2")
    )  # type: ignore[union-attr]
    assert victim is not None
    w.cache.remove_pod(victim)
    q.assigned_pod_deleted(victim)
    assert q.where(pod.uid) == BACKOFF
    w.clock.advance(60)
    q.flush_backoff_completed()  # on its way to activeQ, PreEnqueue gates it
    assert q.where(pod.uid) == GATED
    assert q.get(pod.uid).unschedulable_plugins == {names.DEFAULT_PREEMPTION}  # type: ignore[union-attr]
    # the last victim's delete event opens the gate
    last = w.executor.last_victim(pod.uid)
    assert last is not None
    w.cache.remove_pod(last)
    q.assigned_pod_deleted(last)
    assert q.where(pod.uid) == ACTIVE
    gate.set()
    await asyncio.gather(*w.executor._tasks)


async def test_queue_activation_at_task_end_even_without_delete_events() -> None:
    # k/k #141694: no victim event reaches the queue (the last victim was gone already)
    w = world(nodes=1, with_queue=True)
    q = w.queue
    assert q is not None
    pod = high()
    q.add(pod)
    info = await q.pop()
    assert info is not None
    w.cycle(pod)
    q.add_unschedulable_if_not_present(info, {names.NODE_RESOURCES_FIT}, q.scheduling_cycle)
    q.done(pod.uid)
    assert q.where(pod.uid) == UNSCHEDULABLE
    # the victims leave the cache, but no event reaches the queue
    for v in list(w.cache.new_snapshot().get("n0").pods.values()):  # type: ignore[union-attr]
        if v.name != "v0-3":
            w.cache.remove_pod(v)
    await asyncio.gather(*w.executor._tasks)
    assert q.where(pod.uid) == ACTIVE


async def test_queue_after_success_the_gate_waits_for_the_informer_to_show_the_victim() -> None:
    # the DELETE's answer comes before the informer's update: activated at the task's end,
    # the preemptor must not be retried against a cache that shows its victim running
    # (it would preempt again); the victim's update opens the gate
    w = world(nodes=1, with_queue=True)
    q = w.queue
    assert q is not None
    pod = high()
    q.add(pod)
    info = await q.pop()
    assert info is not None
    w.cycle(pod)
    q.add_unschedulable_if_not_present(info, {names.NODE_RESOURCES_FIT}, q.scheduling_cycle)
    q.done(pod.uid)
    await asyncio.gather(*w.executor._tasks)
    assert w.activated[-1] == "hi"
    assert q.where(pod.uid) == GATED
    # each victim's update reaches the queue; the last one seen leaving opens the gate
    victims = _victims_showing(w, pod)
    assert len(victims) == 3
    for victim in victims:
        assert q.where(pod.uid) == GATED
        terminating = replace(victim, deletion_timestamp=1.0)
        w.cache.update_pod(victim, terminating)
        q.assigned_pod_updated(victim, terminating)
    assert q.where(pod.uid) in (ACTIVE, BACKOFF)
    assert not w.executor.is_gated(pod.uid)


# ---------------------------------------------------------------- Sync mode


async def test_sync_mode_settle_waits_for_the_api_calls() -> None:
    w = world(nodes=1, mode="Sync")
    w.api.hold[("delete", "v0-0")] = gate = asyncio.Event()
    pod = high()
    result, status = w.cycle(pod)
    assert status.ok and result is not None and result.nominated_node_name == "n0"
    assert result.settle is not None  # Sync: the loop awaits the task before the next pod
    settle = asyncio.ensure_future(result.settle)
    for _ in range(10):
        await asyncio.sleep(0)
    assert not settle.done()
    gate.set()
    await settle
    assert not w.preempting(pod)
    assert sorted(k for v, k in w.api.calls if v == "delete") == ["v0-0", "v0-1", "v0-2"]


async def test_async_mode_settle_returns_at_once() -> None:
    w = world(nodes=1)
    w.api.hold[("delete", "v0-0")] = gate = asyncio.Event()
    result, _ = w.cycle(high())
    assert result.settle is None  # Async: the loop does not wait
    gate.set()
    await asyncio.gather(*w.executor._tasks)


def test_factory_rejects_foreign_args() -> None:
    services = PreemptionServices(
        executor=PreemptionExecutor(Api(), Events(), pod_lookup=lambda uid: None),
        own_schedulers=frozenset(),
        pod_lookup=lambda uid: None,
    )
    with pytest.raises(TypeError):
        factory(services)(object(), None)  # type: ignore[arg-type]


# ---------------------------------------------------------------- upstream's messages


@pytest.mark.parametrize(
    ("setup", "preemptor", "expected"),
    [
        # defaultpreemption PodEligibleToPreemptOthers
        ("full", make_pod("p").priority(100).requests(cpu="3").preemption_policy("Never"),
         "preemption: not eligible due to preemptionPolicy=Never."),
        # no node is Unschedulable: every node gets the absent status
        ("tainted", make_pod("p").priority(100).requests(cpu="3"),
         "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."),
        # dry-run statuses count for the nodes tried
        ("full", make_pod("p").priority(0).requests(cpu="3"),
         "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."),
        # above every node's allocatable: UnschedulableAndUnresolvable (noderesources
        # fit.go), so no node is dry-run and each gets the absent status
        ("full", make_pod("p").priority(100).requests(cpu="5"),
         "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."),
        # found: upstream Preempt's success text
        ("full", make_pod("p").priority(100).requests(cpu="3"),
         "preemption: found a potential placement for pod on node n0, preempting 3 victims"),
    ],
)  # fmt: skip
async def test_post_filter_messages_are_upstreams(
    setup: str, preemptor: Any, expected: str
) -> None:
    w = world()
    if setup == "tainted":
        for i in range(2):
            w.cache.update_node(
                None, make_node(f"n{i}").capacity(cpu="4", pods="110").taint("k").obj()
            )
    _, status = w.cycle(preemptor.obj())
    assert status.message() == expected
    await asyncio.gather(*w.executor._tasks)
