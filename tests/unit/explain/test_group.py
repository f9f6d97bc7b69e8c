"""explain for a member of a PodGroup (GenericWorkload): the `podGroup` section and the
group's dry run, as the pod-group cycle would try it now, on explain's own snapshot and
with nothing of the scheduler changed (no nomination, no assumption, no task)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from scheduler import catalog
from scheduler.cache import Cache, Nominator, Snapshot
from scheduler.catalog import profile_for
from scheduler.config import names
from scheduler.explain import Explainer
from scheduler.explain.attempts import AttemptLog
from scheduler.explain.nominations import NominationOverlay
from scheduler.explain_cli import format_table
from scheduler.framework import Framework, Handle
from scheduler.metrics import SchedulerMetrics
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.preemption.default_preemption import PreemptionServices
from scheduler.preemption.executor import PreemptionExecutor
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.preemption.test_default_preemption import Api, Events

HIGH = 1000


class SpyNominator(Nominator):
    """The scheduler's nominator, noting every write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def add(self, pod: PodInfo, node_name: str | None = None) -> None:
        self.writes.append(f"add {pod.name} {node_name}")
        super().add(pod, node_name)

    def remove(self, pod: PodInfo) -> None:
        self.writes.append(f"remove {pod.name}")
        super().remove(pod)


class World:
    """Nodes of 4 cpu; the default GenericWorkload profile (GangScheduling and
    DefaultPreemption's PodGroupPostFilter); an Explainer with gangs on."""

    def __init__(self, nodes: int = 2) -> None:
        self.cache = Cache()
        for i in range(nodes):
            self.cache.add_node(make_node(f"n{i}").capacity(cpu="4", pods="110").obj())
        self.api = Api()
        self.executor = PreemptionExecutor(
            self.api, Events(), pod_lookup=self.cache.get_pod, metrics=SchedulerMetrics()
        )
        services = PreemptionServices(
            executor=self.executor,
            own_schedulers=frozenset({"default-scheduler"}),
            pod_lookup=self.cache.get_pod,
            rand=lambda n: 0,
        )
        self.nominator = SpyNominator()
        handle = Handle(nominator=self.nominator)
        handle.gang_lookup = self.cache.gang
        self.fw = Framework(
            profile_for(names.DEFAULT_MULTI_POINT_GENERIC_WORKLOAD),
            catalog.registry(services),
            handle,
        )
        self.pods: dict[str, PodInfo] = {}
        self.queues: dict[str, str] = {}
        self.explainer = Explainer(
            pod_lookup=self.pods.get,
            frameworks={self.fw.profile_name: self.fw},
            cache=self.cache,
            nominator=self.nominator,
            attempts=AttemptLog(),
            queue_of=self.queues.get,
            gangs=True,
        )

    def group(self, name: str, min_count: int, priority: int = HIGH, **kw: Any) -> None:
        self.cache.set_pod_group(
            PodGroupInfo(
                namespace="default", name=name, policy="gang", min_count=min_count,
                priority=priority, **kw,
            )
        )  # fmt: skip

    def member(self, name: str, group: str, cpu: str, priority: int = HIGH) -> PodInfo:
        pod = make_pod(name).priority(priority).requests(cpu=cpu).obj()
        pod = dataclasses.replace(pod, pod_group=group)
        self.cache.add_gang_member(pod)
        self.pods[pod.key] = pod
        # where the queue holds each member now (its hints move gated siblings along)
        for p in self.pods.values():
            self.queues[p.uid] = "active" if self.fw.run_pre_enqueue(p).ok else "gated"
        return pod

    def fill(self, namespace: str = "default", nodes: tuple[str, ...] = ()) -> None:
        """Each node (or those of `nodes`) full with four low-priority pods of 900m."""
        for node in nodes or self.cache.new_snapshot().node_names():
            for j in range(4):
                self.cache.add_pod(
                    make_pod(f"low-{node}-{j}").namespace(namespace).priority(1)
                    .requests(cpu="900m").node(node).started("2024-01-01T00:00:00Z").obj()
                )  # fmt: skip

    async def explain(
        self, pod: PodInfo, readable: frozenset[str] | None = None
    ) -> dict[str, Any]:
        self.nominator.writes.clear()
        now = await self.explainer.now(pod)
        return self.explainer.answer(pod, now, None, readable)


def _same_pods(a: Snapshot, b: Snapshot) -> None:
    assert sorted(a.node_names()) == sorted(b.node_names())
    for view in b.node_views():
        mine = a.get(view.name)
        assert mine is not None and set(mine.pods) == set(view.pods), view.name
        assert mine.requested == view.requested


def _untouched(w: World) -> None:
    """explain changed nothing: its snapshot as the cache is (no simulated assumption or
    removal left), no nomination written, nothing assumed, no task, no API call."""
    assert w.nominator.writes == []
    snapshot = w.explainer.runner.snapshot
    assert not snapshot.mutated
    _same_pods(snapshot, w.cache.new_snapshot())
    assert not any(w.cache.is_assumed(p) for p in w.pods.values())
    assert not w.executor._tasks and w.api.calls == []


async def test_a_gang_short_of_members_is_held_at_pre_enqueue() -> None:
    w = World()
    w.group("g", 3)
    pods = [w.member(f"g-{i}", "g", "1") for i in range(2)]
    body = await w.explain(pods[0])
    group = body["podGroup"]
    assert (group["name"], group["found"], group["policy"], group["minCount"]) == (
        "g", True, "gang", 3,
    )  # fmt: skip
    assert group["disruptionMode"] == "single" and group["priority"] == HIGH
    assert (group["membersKnown"], group["membersScheduled"]) == (2, 0)
    # GangScheduling's own words (gangscheduling.go PreEnqueue)
    assert group["preEnqueue"] == {
        "held": True,
        "message": "waiting for minCount pods from a gang to appear in scheduling queue",
    }
    assert group["members"] == [
        {"pod": "default/g-0", "queue": "gated"}, {"pod": "default/g-1", "queue": "gated"},
    ]  # fmt: skip
    assert group["now"]["result"] == "Gated" and group["now"]["placements"] == []
    assert not group["now"]["reachesMinCount"] and group["now"]["preemption"] is None
    assert body["now"]["result"] == "Gated"
    _untouched(w)


async def test_a_member_whose_pod_group_is_missing_waits_for_it() -> None:
    w = World()
    pod = w.member("lone-0", "lone", "1")
    body = await w.explain(pod)
    assert body["podGroup"]["found"] is False and body["podGroup"]["policy"] is None
    assert body["podGroup"]["preEnqueue"]["message"] == (
        'waiting for pods\'s pod group "lone" to appear in scheduling queue'
    )
    assert body["podGroup"]["now"]["result"] == "Gated"


async def test_a_gang_that_fits_is_placed_whole_and_nothing_is_kept() -> None:
    w = World()
    w.group("g", 2)
    pods = [w.member(f"g-{i}", "g", "3") for i in range(2)]
    # a nomination of a member: hidden from the dry run while it is assumed, never dropped
    w.nominator.add(pods[1], "n1")
    body = await w.explain(pods[0])
    now = body["podGroup"]["now"]
    assert now["result"] == "Schedulable" and now["reachesMinCount"]
    nodes = {p["pod"]: p["node"] for p in now["placements"]}
    assert sorted(nodes) == ["default/g-0", "default/g-1"]
    assert sorted(nodes.values()) == ["n0", "n1"]  # one 3-cpu member per 4-cpu node
    assert body["now"] == {
        "result": "Schedulable", "evaluatedAt": body["now"]["evaluatedAt"],
        "node": nodes["default/g-0"], "preemption": None,
    }  # fmt: skip
    assert w.nominator.nominated_node(pods[1]) == "n1"
    assert w.cache.gang("default", "g").scheduled_count == 0  # type: ignore[union-attr]
    _untouched(w)


async def test_a_gang_that_does_not_fit_names_the_victims_per_node() -> None:
    w = World()
    w.fill()
    w.group("g", 2)
    pods = [w.member(f"g-{i}", "g", "3") for i in range(2)]
    body = await w.explain(pods[0])
    now = body["podGroup"]["now"]
    assert now["result"] == "Unschedulable" and not now["reachesMinCount"]
    assert all(p["node"] is None for p in now["placements"])
    plan = now["preemption"]
    assert plan["code"] == "Success" and plan["victimCount"] == 6
    assert plan["message"] == "found a placement for podgroup, preempting 6 victims"
    # the group's verdict as the PodGroup's condition would say it
    assert now["message"] == (
        "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, "
        "pod group preemption: found a placement for podgroup, preempting 6 victims"
    )
    assert now["placements"][0]["reason"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert [n["node"] for n in plan["nodes"]] == ["n0", "n1"]
    for n in plan["nodes"]:
        assert n["victimCount"] == 3 and n["hiddenVictims"] == 0
        assert all(v["pod"].startswith(f"default/low-{n['node']}-") for v in n["victims"])
    assert sorted(x["node"] for x in plan["nominations"]) == ["n0", "n1"]
    # a member of a group has no PostFilter of its own
    assert body["now"]["result"] == "Unschedulable" and body["now"]["preemption"] is None
    assert w.nominator.nominated_node(pods[0]) is None
    _untouched(w)


async def test_other_tenants_victims_are_counted_not_named() -> None:
    w = World()
    w.fill(namespace="other")
    w.group("g", 2)
    pods = [w.member(f"g-{i}", "g", "3") for i in range(2)]
    body = await w.explain(pods[0], readable=frozenset({"default"}))
    plan = body["podGroup"]["now"]["preemption"]
    assert plan["victimCount"] == 6 and plan["hiddenVictims"] == 6
    assert all(n["victims"] == [] and n["hiddenVictims"] == 3 for n in plan["nodes"])


async def test_a_gang_no_preemption_can_help() -> None:
    w = World()
    w.fill()
    # the group's priority is not above the pods it would need gone
    w.group("g", 2, priority=0)
    pods = [w.member(f"g-{i}", "g", "3", priority=0) for i in range(2)]
    body = await w.explain(pods[1])
    now = body["podGroup"]["now"]
    assert now["result"] == "Unschedulable" and not now["reachesMinCount"]
    plan = now["preemption"]
    assert plan["code"] == "UnschedulableAndUnresolvable" and plan["victimCount"] == 0
    assert plan["message"] == "No preemption victims found for incoming preemptor"
    assert now["message"].endswith(
        "pod group preemption: No preemption victims found for incoming preemptor"
    )
    _untouched(w)


async def test_a_gang_whose_members_say_never_preempts_nothing() -> None:
    w = World()
    w.fill()
    w.group("g", 2)
    pods = []
    for i in range(2):
        pod = make_pod(f"g-{i}").priority(HIGH).requests(cpu="3").preemption_policy("Never").obj()
        pod = dataclasses.replace(pod, pod_group="g")
        w.cache.add_gang_member(pod)
        w.pods[pod.key], w.queues[pod.uid] = pod, "active"
        pods.append(pod)
    body = await w.explain(pods[0])
    plan = body["podGroup"]["now"]["preemption"]
    assert plan["code"] == "Unschedulable"
    assert plan["message"] == "not eligible due to preemptionPolicy=Never."
    _untouched(w)


async def test_gated_siblings_are_not_tried_with_the_pod() -> None:
    w = World()
    w.group("g", 1)
    first = w.member("g-0", "g", "1")
    second = w.member("g-1", "g", "1")
    w.queues[second.uid] = "gated"  # e.g. a scheduling gate of its own
    body = await w.explain(first)
    assert [p["pod"] for p in body["podGroup"]["now"]["placements"]] == ["default/g-0"]


def test_the_overlay_keeps_its_changes_to_itself() -> None:
    base = Nominator()
    a, b = make_pod("a").obj(), make_pod("b").obj()
    base.add(a, "n0")
    view = NominationOverlay(base)
    view.remove(a)
    view.add(b, "n1")
    assert view.nominated_node(a) is None and view.nominated_node(b) == "n1"
    assert view.nominated_pods_for_node("n0") == [] and view.nominated_pods_for_node("n1") == [b]
    assert base.nominated_node(a) == "n0" and base.nominated_node(b) is None
    view.add(a, "n0")
    assert {n: set(p) for n, p in view.nodes_with_nominations().items()} == {
        "n0": {a.uid}, "n1": {b.uid},
    }  # fmt: skip


async def test_the_cli_prints_the_group_and_its_plan() -> None:
    w = World()
    w.fill(namespace="other", nodes=("n1",))
    w.cache.add_pod(
        make_pod("mine").priority(1).requests(cpu="3500m").node("n0")
        .started("2024-01-01T00:00:00Z").obj()
    )  # fmt: skip
    w.group("g", 2)
    pods = [w.member(f"g-{i}", "g", "3") for i in range(2)]
    body = await w.explain(pods[0], readable=frozenset({"default"}))
    assert json.loads(json.dumps(body))["podGroup"] == body["podGroup"]  # -o json carries it
    text = format_table(body)
    assert "Pod group:     g (gang, minCount 2, disruption single, priority 1000)" in text
    assert "Members:       2 known, 0 scheduled" in text
    assert "PreEnqueue:    not held" in text and "default/g-1  active" in text
    assert "Group now:     Unschedulable: minCount (2) cannot be satisfied" in text
    assert "minCount:      not reached" in text
    assert "Preemption:    4 victim(s) on 2 node(s)" in text
    assert "  n0    default/mine  1" in text
    assert "  and 3 in namespace(s) you may not read" in text
    assert "Nominations:   default/g-0 -> n" in text
    assert "not configured for this profile" not in text


async def test_the_cli_prints_a_held_group() -> None:
    w = World()
    w.group("g", 3)
    pod = w.member("g-0", "g", "1")
    text = format_table(await w.explain(pod))
    assert "Now:           Gated: waiting for minCount pods from a gang to appear" in text
    assert "PreEnqueue:    held by GangScheduling: waiting for minCount pods" in text
    assert "minCount:" not in text
