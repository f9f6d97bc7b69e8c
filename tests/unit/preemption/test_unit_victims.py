"""Single-pod preemption with victim units (GenericWorkload), as upstream v1.37.2's
GetVictimsOnNode / SelectVictimsOnNode with the gate on: an all-members PodGroup is one
victim of all its scheduled members across the cluster, a single-mode member is a victim
alone, both with their PodGroup's priority; reprieve and the PDB split by unit; the
victim scope and PreemptionPolicy over every member; pickOneNode's "first victim"; and
nothing of it with the gate off."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import pytest

from scheduler.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.config.args import DefaultPreemptionArgs
from scheduler.framework.status import Code, Status
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.model.selectors import IN, LabelSelector, Requirement
from scheduler.preemption.evaluator import (
    MSG_TERMINATING,
    Candidate,
    Evaluation,
    Evaluator,
    eligible_to_preempt,
    pick_one_node,
)
from scheduler.preemption.unit_victims import GroupAwareVictims
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.preemption_fakes import MemoryNominator, ResourceFit
from tests.unit.preemption.test_default_preemption import high, world

UNSCHED = Status.unschedulable("Insufficient cpu")
UNRESOLVABLE = Status.unresolvable("node(s) didn't match Pod's node affinity")


def member(
    name: str,
    group: str,
    node: str,
    *,
    prio: int = 1,
    cpu: str = "2",
    start: int = 0,
    sched: str = "",
    **labels: str,
) -> PodInfo:
    b = make_pod(name).priority(prio).requests(cpu=cpu).node(node)
    b = b.started(f"2024-01-01T00:00:{start:02d}Z")
    if labels:
        b = b.labels(**labels)
    if sched:
        b = b.scheduler(sched)
    pod = b.obj()
    return dataclasses.replace(pod, pod_group=group) if group else pod


def cluster(
    pods: Sequence[PodInfo], groups: Sequence[PodGroupInfo] = (), nodes: int = 2
) -> tuple[Cache, Snapshot]:
    cache = Cache()
    for i in range(nodes):
        cache.add_node(make_node(f"n{i}").capacity(cpu="4", pods="110").obj())
    for g in groups:
        cache.set_pod_group(g)
    for p in pods:
        cache.add_pod(p)
    return cache, cache.new_snapshot()


def group(name: str, mode: str = "all", prio: int = 10) -> PodGroupInfo:
    return PodGroupInfo(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        disruption_mode="all" if mode == "all" else "single",
        priority=prio,
    )


def evaluate(
    cache: Cache,
    snap: Snapshot,
    preemptor: PodInfo,
    *,
    units: bool = True,
    pdbs: Sequence[PDBInfo] = (),
    fit: ResourceFit | None = None,
    own: frozenset[str] = frozenset({"default-scheduler"}),
    diagnosis: dict[str, Status] | None = None,
) -> Evaluation:
    """Only n0 is a candidate node unless `diagnosis` says otherwise."""
    ev = Evaluator(DefaultPreemptionArgs(), own, rand=lambda n: 0)
    return ev.evaluate(
        preemptor,
        diagnosis if diagnosis is not None else {"n0": UNSCHED, "n1": UNRESOLVABLE},
        snap,
        MemoryNominator(),
        pdbs,
        fit if fit is not None else ResourceFit(),
        units=GroupAwareVictims(cache.gang, snap) if units else None,
    )


def names(ev: Evaluation) -> list[str]:
    assert ev.decision is not None, ev.status.message()
    return [v.name for v in ev.decision.victims]


def preemptor(cpu: str = "3", prio: int = 100) -> PodInfo:
    return make_pod("hi").priority(prio).requests(cpu=cpu).obj()


# ---------------------------------------------------------------- units


def test_an_all_members_group_spanning_two_nodes_is_taken_whole() -> None:
    pods = [member("a0", "g", "n0"), member("a1", "g", "n1")]
    cache, snap = cluster(pods, [group("g")])
    fit = ResourceFit()
    ev = evaluate(cache, snap, preemptor(), fit=fit)
    assert ev.decision is not None and ev.decision.node == "n0"
    assert sorted(names(ev)) == ["a0", "a1"]
    # the member on n1 went through the PreFilter extensions only, with n1's view:
    # removed, tried back in the reprieve, removed again
    assert fit.remote == [("remove", "a1", "n1"), ("add", "a1", "n1"), ("remove", "a1", "n1")]
    n1 = snap.get("n1")  # the snapshot itself is untouched
    assert n1 is not None and "a1" in {p.name for p in n1.pods.values()}


def test_gate_off_the_same_cluster_loses_only_the_local_member() -> None:
    pods = [member("a0", "g", "n0"), member("a1", "g", "n1")]
    cache, snap = cluster(pods, [group("g")])
    fit = ResourceFit()
    ev = evaluate(cache, snap, preemptor(), units=False, fit=fit)
    assert names(ev) == ["a0"]
    assert fit.remote == []
    assert ev.candidates and not ev.candidates[0].by_units


def test_a_single_mode_member_is_taken_alone() -> None:
    pods = [member("s0", "g", "n0"), member("s1", "g", "n1")]
    cache, snap = cluster(pods, [group("g", mode="single")])
    fit = ResourceFit()
    assert names(evaluate(cache, snap, preemptor(), fit=fit)) == ["s0"]
    assert fit.remote == []


def test_a_victims_priority_is_its_pod_groups() -> None:
    # members' own priorities are above the preemptor's, their groups' below: victims
    pods = [member("s0", "single", "n0", prio=500), member("a0", "all", "n0", prio=500, cpu="1")]
    cache, snap = cluster(pods, [group("single", "single", 10), group("all", "all", 10)])
    assert sorted(names(evaluate(cache, snap, preemptor(cpu="4")))) == ["a0", "s0"]
    # and the other way round: a group above the preemptor protects low-priority members
    pods = [member("m0", "g", "n0", prio=1), make_pod("x").priority(1).node("n0").obj()]
    cache, snap = cluster(pods, [group("g", "all", 500)])
    ev = evaluate(cache, snap, preemptor())
    assert ev.decision is None
    assert evaluate(cache, snap, preemptor(), units=False).decision is not None


def group_and_lone(lone_prio: int, lone_cpu: str) -> tuple[Cache, Snapshot]:
    """n0: a0 (1 cpu) of group g (priority 10, all members; a1 of 1 cpu on n1) and a
    lone pod."""
    pods = [
        member("a0", "g", "n0", cpu="1"),
        member("a1", "g", "n1", cpu="1"),
        member("lone", "", "n0", prio=lone_prio, cpu=lone_cpu),
    ]
    return cluster(pods, [group("g", prio=10)])


def test_a_unit_is_reprieved_whole() -> None:
    # the lone pod: 2 cpu at priority 5. Everything out, a 2-cpu preemptor fits; the
    # group, more important, is put back first and still leaves room: only the lone
    # pod goes.
    cache, snap = group_and_lone(5, "2")
    fit = ResourceFit()
    assert names(evaluate(cache, snap, preemptor(cpu="2"), fit=fit)) == ["lone"]
    assert fit.remote == [("remove", "a1", "n1"), ("add", "a1", "n1")]


def test_victims_are_ordered_by_unit_most_important_first() -> None:
    # a 4-cpu preemptor needs n0 empty; the lone pod (priority 50) is more important
    # than the group (10, two pods): it comes first, then every pod of the group
    cache, snap = group_and_lone(50, "1")
    got = names(evaluate(cache, snap, preemptor(cpu="4")))
    assert got[0] == "lone" and sorted(got[1:]) == ["a0", "a1"]


def _pdb(allowed: int) -> PDBInfo:
    return PDBInfo(
        namespace="default",
        name="budget",
        selector=LabelSelector((Requirement("app", IN, frozenset(("x",))),)),
        disruptions_allowed=allowed,
        disrupted_pods=frozenset(),
    )


def test_pdb_counts_every_pod_of_the_unit() -> None:
    pods = [member("a0", "g", "n0", app="x"), member("a1", "g", "n1", app="x")]
    cache, snap = cluster(pods, [group("g")])
    # one disruption allowed, the unit takes two: it violates, by one pod
    ev = evaluate(cache, snap, preemptor(), pdbs=[_pdb(1)])
    assert sorted(names(ev)) == ["a0", "a1"]
    assert ev.decision is not None and ev.decision.num_pdb_violations == 1
    ev = evaluate(cache, snap, preemptor(), pdbs=[_pdb(0)])
    assert ev.decision is not None and ev.decision.num_pdb_violations == 2
    ev = evaluate(cache, snap, preemptor(), pdbs=[_pdb(2)])
    assert ev.decision is not None and ev.decision.num_pdb_violations == 0
    # gate off: only the local member, within the budget of one
    ev = evaluate(cache, snap, preemptor(), pdbs=[_pdb(1)], units=False)
    assert ev.decision is not None and ev.decision.num_pdb_violations == 0


def test_pdb_violating_unit_is_reprieved_first() -> None:
    # n0: a0 (group g, 2 cpu, app=x, violating) and a lone pod (2 cpu, higher priority,
    # not violating). A 2-cpu preemptor needs one of them gone: the violating unit is
    # tried back first and stays; the lone pod goes although more important.
    pods = [
        member("a0", "g", "n0", app="x"),
        member("a1", "g", "n1", cpu="1", app="x"),
        member("lone", "", "n0", prio=50),
    ]
    cache, snap = cluster(pods, [group("g", prio=10)])
    ev = evaluate(cache, snap, preemptor(cpu="2"), pdbs=[_pdb(0)])
    assert names(ev) == ["lone"]
    assert ev.decision is not None and ev.decision.num_pdb_violations == 0


@pytest.mark.parametrize("outsider", ["a0", "a1"])
def test_a_unit_with_a_member_out_of_scope_is_no_victim(outsider: str) -> None:
    # one member belongs to another scheduler: the victim scope refuses it, so the whole
    # unit stays, and the lone pod of n0 is not enough
    def sched(name: str) -> str:
        return "other-scheduler" if name == outsider else ""

    pods = [
        member("a0", "g", "n0", sched=sched("a0")),
        member("a1", "g", "n1", sched=sched("a1")),
        member("lone", "", "n0", prio=5, cpu="1"),
    ]
    cache, snap = cluster(pods, [group("g")])
    ev = evaluate(cache, snap, preemptor())
    assert ev.decision is None
    assert ev.node_statuses["n0"].code == Code.UNSCHEDULABLE
    # the same unit within scope is taken (the group, more important, cannot come back;
    # the lone pod then can)
    ev = evaluate(cache, snap, preemptor(), own=frozenset({"default-scheduler", "other-scheduler"}))
    assert sorted(names(ev)) == ["a0", "a1"]


def test_a_unit_on_a_node_missing_from_the_snapshot_makes_the_node_an_error() -> None:
    pods = [member("a0", "g", "n0"), member("a1", "g", "gone")]
    cache, snap = cluster(pods, [group("g")])
    ev = evaluate(cache, snap, preemptor())
    assert ev.decision is None and ev.status.code == Code.ERROR
    assert "gone" in ev.status.message()


# ---------------------------------------------------------------- candidates


def test_pick_one_node_reads_the_first_victims_own_priority_with_units() -> None:
    lo, hi40, hi50 = (make_pod(n).priority(p).obj() for n, p in (("l", 1), ("m", 40), ("h", 50)))
    # a: its first victim (a group member of own priority 1) is the unit's most
    # important, the member of own priority 50 comes after; b: one victim of 40
    a = (lo, hi50)
    b = (hi40,)
    got = pick_one_node([Candidate("a", a, 0, by_units=True), Candidate("b", b, 0, by_units=True)])
    assert got is not None and got.node == "a"  # upstream Pods[0]: 1 < 40
    got = pick_one_node([Candidate("a", a, 0), Candidate("b", b, 0)])
    assert got is not None and got.node == "b"  # the highest, 50 > 40


def test_a_unit_counts_all_its_members_in_the_candidates_victims() -> None:
    # n0: a group member whose group also runs on n1 (two pods); n1: two lone pods.
    # Each node needs all its pods gone; n0's candidate has 3 victims (a0, a1 and n1's
    # member counted), n1's has the group too (a1 and a0) plus its lone pod.
    pods = [
        member("a0", "g", "n0", cpu="4"),
        member("a1", "g", "n1", cpu="2"),
        member("l1", "", "n1", prio=1, cpu="2"),
    ]
    cache, snap = cluster(pods, [group("g", prio=1)])
    both = {"n0": UNSCHED, "n1": UNSCHED}
    ev = evaluate(cache, snap, preemptor(cpu="4"), diagnosis=both)
    by_node = {c.node: sorted(v.name for v in c.victims) for c in ev.candidates}
    assert by_node == {"n0": ["a0", "a1"], "n1": ["a0", "a1", "l1"]}
    assert ev.decision is not None and ev.decision.node == "n0"  # fewer victims


# ---------------------------------------------------------------- eligibility


def test_a_terminating_member_counts_at_its_groups_priority() -> None:
    victim = (
        make_pod("t")
        .priority(500)
        .node("n0")
        .terminating()
        .condition("DisruptionTarget", "True", "PreemptionByScheduler")
        .obj()
    )
    victim = dataclasses.replace(victim, pod_group="g")
    cache, snap = cluster([victim], [group("g", prio=10)])
    pod = preemptor()
    diag = {"n0": UNSCHED}
    assert eligible_to_preempt(pod, "n0", snap, diag) == (True, "")
    units = GroupAwareVictims(cache.gang, snap)
    assert eligible_to_preempt(pod, "n0", snap, diag, victim_priority=units.priority) == (
        False,
        MSG_TERMINATING,
    )


# ---------------------------------------------------------------- the plugin


async def test_the_plugin_deletes_every_member_only_with_the_gate_on() -> None:
    for gate in (False, True):
        w = world(nodes=2)
        w.plugin.services.generic_workload = gate
        w.framework.handle.gang_lookup = w.cache.gang
        w.cache.set_pod_group(group("g", prio=0))
        # a member of 200m on each node, below every filler pod (priorities 1..4)
        for i in (0, 1):
            m = dataclasses.replace(
                make_pod(f"g{i}").priority(0).requests(cpu="200m").node(f"n{i}")
                .started("2024-01-01T00:00:00Z").obj(),
                pod_group="g",
            )  # fmt: skip
            w.cache.add_pod(m)
        # each node now holds 4 x 900m + 200m: a 300m preemptor fits nowhere, and fits
        # where its member (the least important pod) leaves
        result, status = w.cycle(high(cpu="300m"))
        assert status.ok and result is not None, status.message()
        await asyncio.gather(*w.executor._tasks)
        deleted = sorted(k for v, k in w.api.calls if v == "delete")
        if gate:
            assert deleted == ["g0", "g1"]
        else:
            assert deleted in (["g0"], ["g1"])


async def test_remote_members_leave_the_prefilter_state_on_the_real_framework() -> None:
    # Two nodes in one zone, a member of an all-members group on each (app=x). The
    # preemptor's anti-affinity to app=x over the zone fails on both nodes. Gate off,
    # evicting n0's member leaves n1's in the zone: no candidate. Gate on, the unit
    # leaves, n1's member through InterPodAffinity's RemovePod (upstream
    # RunPreFilterExtensionRemovePod with the remote NodeInfo): n0 is a candidate.
    for gate in (False, True):
        w = world(nodes=0)
        w.plugin.services.generic_workload = gate
        w.framework.handle.gang_lookup = w.cache.gang
        for i in (0, 1):
            w.cache.add_node(make_node(f"n{i}").zone("z").capacity(cpu="4", pods="110").obj())
        w.cache.set_pod_group(group("g", prio=0))
        for i in (0, 1):
            m = make_pod(f"g{i}").priority(0).labels(app="x").node(f"n{i}")
            m = m.started("2024-01-01T00:00:00Z")
            w.cache.add_pod(dataclasses.replace(m.obj(), pod_group="g"))
        pod = (
            make_pod("hi")
            .priority(1000)
            .pod_affinity("topology.kubernetes.io/zone", {"app": "x"}, anti=True)
            .obj()
        )
        result, status = w.cycle(pod, direct=True)
        if not gate:
            assert not status.ok and result is not None and not result.nominated_node_name
            continue
        assert status.ok and result is not None, status.message()
        assert result.nominated_node_name in ("n0", "n1")
        await asyncio.gather(*w.executor._tasks)
        assert sorted(k for v, k in w.api.calls if v == "delete") == ["g0", "g1"]
