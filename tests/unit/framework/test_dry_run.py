"""The framework's preemption dry run (framework/dry_run.py) against a reference that
runs the whole Filter at every step, as the dry run did before the plan:

- on seeded random clusters (requests, pod counts, host ports, taints, inter-pod
  affinity and anti-affinity, topology spread, nominated pods, PDBs) every node's
  select_victims and the whole evaluation come out the same;
- a Filter plugin that does not declare NodePodsIndependentFilter is re-run at every
  reprieve step, one that declares it only in the full Filter;
- NodeView.clone_without equals a clone with the pods removed one by one;
- pick_one_node equals upstream's criterion-by-criterion narrowing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from scheduler.algorithm import schedule_pod
from scheduler.cache import Nominator
from scheduler.cache.node_view import NodeView
from scheduler.config import names
from scheduler.config.args import DefaultPreemptionArgs
from scheduler.framework import CycleState, Framework, build_profile
from scheduler.framework.diagnosis import FitError
from scheduler.framework.dry_run import DryRunPlan, NodeDryRun
from scheduler.framework.interfaces import FilterPlugin, NodePodsIndependentFilter
from scheduler.framework.status import Code, Status
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import parse_label_selector
from scheduler.plugins.registry import in_tree_registry
from scheduler.preemption.evaluator import (
    Candidate,
    DryRun,
    DryRunError,
    Evaluator,
    NodeLike,
    pick_one_node,
    select_victims,
)
from tests.unit.helpers.builders import make_framework, make_node, make_pod, make_snapshot

SEEDS = range(40)
ZONES = ("z1", "z2")


# ---------------------------------------------------------------- the reference


class ReferenceDryRun:
    """The dry run before the plan: copies of state and view, PreFilter extensions
    through the framework, the whole Filter (nominated-pods rule) at every step."""

    def __init__(
        self, fw: Framework, state: CycleState, pod: PodInfo, view: NodeView, nominator: Any
    ) -> None:
        self.fw = fw
        self.pod = pod
        self.state = state.clone()
        self.view = view.clone()
        self.nominator = nominator

    def remove_pod(self, victim: PodInfo, /) -> Status:
        if not self.view.remove_pod(victim):
            return Status.success()
        return self.fw.filter_runner.remove_pod(self.state, self.pod, victim, self.view)

    def remove_pods(self, victims: Sequence[PodInfo], /) -> Status:
        for v in victims:
            st = self.remove_pod(v)
            if not st.ok:
                return st
        return Status.success()

    def add_pod(self, pod: PodInfo, /) -> Status:
        self.view.add_pod(pod)
        return self.fw.filter_runner.add_pod(self.state, self.pod, pod, self.view)

    def filter(self) -> Status:
        return self.fw.run_filter_with_nominated_pods(
            self.state, self.pod, self.view, self.nominator
        )

    def still_fits(self) -> bool:
        return self.filter().ok


def _outcome(
    pod: PodInfo, view: NodeLike, pdbs: Sequence[PDBInfo], fit: Any
) -> tuple[Any, ...]:
    try:
        victims, violations, st = select_victims(pod, view, pdbs, fit, lambda p: True)
    except DryRunError as exc:
        return ("error", exc.status.code, exc.status.reasons, exc.status.plugin)
    return ([v.uid for v in victims], violations, st.code, st.reasons, st.plugin)


# ---------------------------------------------------------------- random clusters


def _cluster(seed: int) -> tuple[Any, list[PodInfo], PodInfo, Nominator, list[PDBInfo]]:
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(4, 8)):
        n = make_node(f"n{i}").capacity(cpu=rng.choice([2, 4]), memory="8Gi", pods=rng.randint(3, 6))
        n.zone(ZONES[i % 2]).label("kubernetes.io/hostname", f"n{i}")
        if rng.random() < 0.15:
            n.taint("dedicated", "x")
        nodes.append(n)
    pods = []
    for i in range(len(nodes)):
        for j in range(rng.randint(1, 5)):
            b = make_pod(f"p{i}-{j}").node(f"n{i}").priority(rng.choice([0, 10, 100, 1000]))
            b.labels(app=rng.choice("abc")).requests(cpu=f"{rng.choice([200, 500, 900])}m")
            b.started(f"2024-01-01T00:0{rng.randint(0, 9)}:00Z")
            if rng.random() < 0.25:
                b.host_port(rng.choice([8080, 9090]))
            if rng.random() < 0.15:
                b.pod_affinity("kubernetes.io/hostname", {"app": "a"}, anti=True)
            pods.append(b)
    pre = make_pod("preemptor").priority(500).labels(app=rng.choice("abc"))
    pre.requests(cpu=f"{rng.choice([500, 1000, 1500, 2500])}m")
    if rng.random() < 0.3:
        pre.host_port(rng.choice([8080, 9090]))
    if rng.random() < 0.3:
        pre.pod_affinity("kubernetes.io/hostname", {"app": rng.choice("abc")}, anti=True)
    if rng.random() < 0.2:
        pre.pod_affinity("topology.kubernetes.io/zone", {"app": rng.choice("abc")})
    if rng.random() < 0.3:
        key = rng.choice(["topology.kubernetes.io/zone", "kubernetes.io/hostname"])
        pre.spread(1, key, {"app": rng.choice("abc")})
    if rng.random() < 0.15:
        pre.toleration("dedicated", "x")
    snap = make_snapshot(nodes, pods)
    nominator = Nominator()
    for k in range(rng.randint(0, 3)):
        nom = make_pod(f"nom{k}").priority(rng.choice([100, 500, 800]))
        nom.labels(app=rng.choice("abc")).requests(cpu=f"{rng.choice([300, 900])}m")
        if rng.random() < 0.3:
            nom.host_port(rng.choice([8080, 9090]))
        nominator.add(nom.obj(), f"n{rng.randrange(len(nodes))}")
    pdbs = [
        PDBInfo(
            namespace="default",
            name=f"pdb-{app}",
            selector=parse_label_selector({"matchLabels": {"app": app}}, "spec.selector"),
            disruptions_allowed=rng.randint(0, 1),
        )
        for app in "ab"
        if rng.random() < 0.5
    ]
    return snap, [p.obj() for p in pods], pre.obj(), nominator, pdbs


@pytest.mark.parametrize("seed", SEEDS)
def test_every_node_selects_the_same_victims_as_the_full_filter(seed: int) -> None:
    snap, _, pod, nominator, pdbs = _cluster(seed)
    fw = make_framework()
    state = CycleState()
    _, st = fw.run_pre_filter(state, pod, snap)
    if not st.ok:
        return
    plan = DryRunPlan(fw.filter_runner, state, pod, nominator)
    before = {v.name: (dict(v.pods), dict(v.requested), list(v.used_ports)) for v in snap.node_views()}
    for view in snap.node_views():
        got = _outcome(pod, view, pdbs, lambda p, n: plan.open(n))
        want = _outcome(pod, view, pdbs, lambda p, n: ReferenceDryRun(fw, state, p, n, nominator))
        assert got == want, view.name
    after = {v.name: (dict(v.pods), dict(v.requested), list(v.used_ports)) for v in snap.node_views()}
    assert after == before  # the snapshot's views are never modified


@pytest.mark.parametrize("seed", SEEDS)
def test_the_evaluation_is_the_same_as_with_the_full_filter(seed: int) -> None:
    snap, _, pod, nominator, pdbs = _cluster(seed)
    fw = make_framework()
    state = CycleState()
    failed = schedule_pod(fw, state, pod, snap, nominator)
    if not isinstance(failed, FitError):
        return
    diagnosis = failed.diagnosis.node_to_status()
    args = DefaultPreemptionArgs(min_candidate_nodes_absolute=2)
    plan = DryRunPlan(fw.filter_runner, state, pod, nominator)

    def evaluate(fit: Any) -> Any:
        ev = Evaluator(args, {pod.scheduler_name}, rand=lambda n: seed % n).evaluate(
            pod, diagnosis, snap, nominator, pdbs, fit, num_all_nodes=snap.num_nodes
        )
        d = ev.decision
        return (
            ev.status,
            d and (d.node, [v.uid for v in d.victims], d.num_pdb_violations),
            [(c.node, [v.uid for v in c.victims], c.num_pdb_violations) for c in ev.candidates],
            dict(ev.node_statuses),
            ev.nodes_checked,
        )

    def reference(p: PodInfo, n: NodeLike, /) -> DryRun:
        assert isinstance(n, NodeView)
        return ReferenceDryRun(fw, state, p, n, nominator)

    def planned(p: PodInfo, n: NodeLike, /) -> DryRun:
        assert isinstance(n, NodeView)
        return plan.open(n)

    assert evaluate(planned) == evaluate(reference)


# ---------------------------------------------------------------- which plugins re-run


class _CountingFilter(FilterPlugin):
    """Rejects a node holding more than `room` pods; counts its calls."""

    def __init__(self, name: str, room: int) -> None:
        self.name = name
        self.room = room
        self.calls = 0

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        self.calls += 1
        if len(view.pods) > self.room:
            return Status.unschedulable("node is full", plugin=self.name)
        return Status.success()


class _MarkedFilter(_CountingFilter, NodePodsIndependentFilter):
    """Declares its verdict independent of the node's pods."""


def _framework(*plugins: _CountingFilter) -> Framework:
    registry = in_tree_registry()
    for p in plugins:
        registry.register(p.name, type(p), lambda args, handle, p=p: p)
    refs = tuple(names.PluginRef(p.name) for p in plugins)
    # the registry answers each plugin's points from its class (ours: Filter)
    return Framework(build_profile(refs, implements=registry.implements), registry)


def _node_with_low_priority_pods(count: int) -> tuple[Any, PodInfo]:
    pods = [
        make_pod(f"low{i}").node("n1").priority(0).started(f"2024-01-01T00:0{i}:00Z")
        for i in range(count)
    ]
    snap = make_snapshot([make_node("n1").capacity(cpu=8, memory="8Gi", pods=110)], pods)
    return snap, make_pod("high").priority(100).obj()


def test_a_plugin_without_the_marker_is_rerun_at_every_reprieve_step() -> None:
    out_of_tree = _CountingFilter("OutOfTreeRoom", room=1)
    marked = _MarkedFilter("MarkedRoom", room=99)
    fw = _framework(marked, out_of_tree)
    snap, pod = _node_with_low_priority_pods(4)
    state = CycleState()
    view = snap.get("n1")
    victims, violations, st = select_victims(
        pod, view, (), lambda p, n: NodeDryRun(fw.filter_runner, state, p, view), lambda p: True
    )
    assert st.ok and violations == 0
    # one pod may stay: the most important (earliest started) is reprieved
    assert [v.name for v in victims] == ["low1", "low2", "low3"]
    assert out_of_tree.calls == 1 + 4  # the full Filter, then each reprieve step
    assert marked.calls == 1  # the full Filter only


def test_without_a_passing_filter_still_fits_runs_the_whole_filter() -> None:
    marked = _MarkedFilter("MarkedRoom", room=0)
    fw = _framework(marked)
    snap, pod = _node_with_low_priority_pods(2)
    run = NodeDryRun(fw.filter_runner, CycleState(), pod, snap.get("n1"))
    assert not run.still_fits()  # two pods on the node: the marked plugin rejects
    assert marked.calls == 1
    run.remove_pods(list(snap.get("n1").pods.values()))
    assert run.still_fits()
    assert len(snap.get("n1").pods) == 2  # the node itself is untouched


def test_nominated_pods_count_in_the_reprieve_steps() -> None:
    """A pod nominated to the node at the preemptor's priority takes the room a
    reprieved victim would take (the nominated-pods rule in still_fits too)."""
    out_of_tree = _CountingFilter("OutOfTreeRoom", room=2)
    fw = _framework(out_of_tree)
    snap, pod = _node_with_low_priority_pods(4)
    view = snap.get("n1")
    nominator = Nominator()

    def victims() -> list[str]:
        plan = DryRunPlan(fw.filter_runner, CycleState(), pod, nominator)
        got, _, st = select_victims(pod, view, (), lambda p, n: plan.open(n), lambda p: True)
        assert st.ok
        return [v.name for v in got]

    assert victims() == ["low2", "low3"]  # two may stay
    nominator.add(make_pod("waiting").priority(100).obj(), "n1")
    assert victims() == ["low1", "low2", "low3"]  # one may stay beside the nominated pod
    nominator = Nominator()
    nominator.add(make_pod("waiting").priority(99).obj(), "n1")
    assert victims() == ["low2", "low3"]  # a lower priority nomination does not count


def test_the_plan_refuses_another_pod() -> None:
    fw = _framework(_CountingFilter("OutOfTreeRoom", room=1))
    snap, pod = _node_with_low_priority_pods(1)
    state = CycleState()
    plan = DryRunPlan(fw.filter_runner, state, pod)
    with pytest.raises(ValueError):
        NodeDryRun(fw.filter_runner, state, make_pod("other").obj(), snap.get("n1"), plan=plan)


def test_in_tree_markers() -> None:
    fw = make_framework()
    rerun = {p.name for p in fw.filter_runner.node_pods_dependent}
    assert rerun == {
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "PodTopologySpread",
        "InterPodAffinity",
    }


# ---------------------------------------------------------------- NodeView.clone_without


def _aggregates(v: NodeView) -> tuple[Any, ...]:
    return (
        sorted(v.pods),  # a dry run's copy keeps no upstream order (NodeView.clone_without)
        {k: a for k, a in v.requested.items() if a},
        v.non_zero_cpu,
        v.non_zero_memory,
        sorted(v.used_ports, key=repr),
        v.with_affinity,
        v.with_required_anti_affinity,
        v.generation,
        v.node,
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_clone_without_equals_removing_one_by_one(seed: int) -> None:
    snap, _, _, _, _ = _cluster(seed)
    rng = random.Random(seed)
    for view in snap.node_views():
        pods = list(view.pods.values())
        gone = rng.sample(pods, rng.randint(0, len(pods)))
        want = view.clone()
        for p in gone:
            want.remove_pod(p)
        got = view.clone_without({p.uid for p in gone} | {"not-here"})
        assert _aggregates(got) == _aggregates(want)


# ---------------------------------------------------------------- pick_one_node


def _narrowing_reference(candidates: list[Candidate]) -> Candidate:
    """upstream pickOneNodeForPreemption, criterion by criterion."""

    def earliest(c: Candidate) -> float:
        top = max(v.priority for v in c.victims)
        return min(
            v.start_time if v.start_time is not None else math.inf
            for v in c.victims
            if v.priority == top
        )

    remaining = list(candidates)
    for score in (
        lambda c: -c.num_pdb_violations,
        lambda c: -max(v.priority for v in c.victims),
        lambda c: -sum(v.priority + 2**31 for v in c.victims),
        lambda c: -len(c.victims),
        earliest,
    ):
        best = max(score(c) for c in remaining)
        remaining = [c for c in remaining if score(c) == best]
    return remaining[0]


@pytest.mark.parametrize("seed", range(200))
def test_pick_one_node_narrows_as_upstream(seed: int) -> None:
    rng = random.Random(seed)
    candidates = []
    for i in range(rng.randint(1, 6)):
        victims = []
        for j in range(rng.randint(1, 3)):
            b = make_pod(f"v{i}-{j}").priority(rng.choice([-5, 0, 10]))
            if rng.random() < 0.7:
                b.started(f"2024-01-01T00:0{rng.randint(0, 3)}:00Z")
            victims.append(b.obj())
        rng.shuffle(victims)  # the criteria must not depend on the victims' order
        candidates.append(Candidate(f"n{i}", tuple(victims), rng.randint(0, 1)))
    assert pick_one_node(candidates) is _narrowing_reference(candidates)


def test_pick_one_node_refuses_a_candidate_without_victims() -> None:
    with pytest.raises(ValueError):
        pick_one_node([Candidate("a", (), 0), Candidate("b", (), 0)])


def test_code_is_success_only_on_success() -> None:
    # still_fits reads only SUCCESS, as upstream's reprieve (status.IsSuccess())
    assert [c for c in Code if Status(c).ok] == [Code.SUCCESS]
