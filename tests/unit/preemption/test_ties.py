"""Preemption on ties as upstream: the node's pod order under a history of adds and
removes (upstream's NodeInfo.Pods), Go's unstable sort of the possible victims, and the
PDB split's early return.

The reference model below is upstream's cache written out: NodeInfo.AddPodInfo appends,
removeFromSlice moves the last pod into the hole (pkg/scheduler/framework/types.go),
cache.updatePod is removePod then addPod, AddPod of an assumed pod is updatePod, and
ForgetPod is removePod (pkg/scheduler/backend/cache/cache.go, v1.37.2)."""

from __future__ import annotations

import random

from scheduler.cache import Cache
from scheduler.cache.node_view import NodeView
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import IN, LabelSelector, Requirement
from scheduler.preemption.evaluator import select_victims, split_by_pdb
from scheduler.preemption.go_sort import sort_slice
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.fake_clock import FakeClock
from tests.unit.helpers.preemption_fakes import ResourceFit

START = "2024-01-01T00:00:00Z"
START_LATER = "2024-01-01T00:00:01Z"


class _UpstreamNodeInfo:
    """NodeInfo.Pods as a Go slice."""

    def __init__(self) -> None:
        self.pods: list[str] = []

    def add(self, uid: str) -> None:
        self.pods.append(uid)

    def remove(self, uid: str) -> None:
        i = self.pods.index(uid)
        self.pods[i] = self.pods[-1]
        self.pods.pop()


def _pod(uid: str, node: str = "n1") -> PodInfo:
    return make_pod(uid).uid(uid).requests(cpu="100m").node(node).obj()


def test_the_snapshot_lists_a_node_s_pods_in_upstream_s_order_after_any_history() -> None:
    for seed in range(200):
        rng = random.Random(seed)
        cache = Cache(FakeClock(), ttl=30.0)
        cache.add_node(make_node("n1").capacity(cpu="1000", pods="1000").obj())
        ref = _UpstreamNodeInfo()
        bound: list[str] = []
        assumed: list[PodInfo] = []
        snap = cache.new_snapshot()
        for step in range(rng.randint(1, 80)):
            op = rng.random()
            if op < 0.35 or not (bound or assumed):
                uid = f"p{seed}-{step}"
                cache.add_pod(_pod(uid))
                ref.add(uid)
                bound.append(uid)
            elif op < 0.55 and bound:  # a status update: remove, then add
                uid = rng.choice(bound)
                cache.update_pod(_pod(uid), _pod(uid))
                ref.remove(uid)
                ref.add(uid)
            elif op < 0.7 and bound:
                uid = bound.pop(rng.randrange(len(bound)))
                cache.remove_pod(_pod(uid))
                ref.remove(uid)
            elif op < 0.8:
                uid = f"a{seed}-{step}"
                assumed.append(cache.assume_pod(make_pod(uid).uid(uid).obj(), "n1"))
                ref.add(uid)
            elif assumed:
                pod = assumed.pop(rng.randrange(len(assumed)))
                if rng.random() < 0.5:
                    cache.forget_pod(pod)  # the bind failed
                    ref.remove(pod.uid)
                else:  # the informer confirms it: upstream's AddPod -> updatePod
                    cache.add_pod(_pod(pod.uid))
                    ref.remove(pod.uid)
                    ref.add(pod.uid)
                    bound.append(pod.uid)
            if rng.random() < 0.3:
                cache.update_snapshot(snap)
                view = snap.get("n1")
                assert view is not None and list(view.pods) == ref.pods, seed
        cache.update_snapshot(snap)
        view = snap.get("n1")
        assert view is not None and list(view.pods) == ref.pods, seed


def test_a_removed_pod_s_place_goes_to_the_last_pod() -> None:
    view = NodeView(make_node("n1").obj())
    for uid in "abcde":
        view.add_pod(_pod(uid))
    view.remove_pod(_pod("b"))
    assert list(view.pods) == ["a", "e", "c", "d"]
    view.remove_pod(_pod("d"))
    assert list(view.pods) == ["a", "e", "c"]
    assert view.requested["cpu"] == 300


def _victims(rng: random.Random, n: int) -> list[PodInfo]:
    """n pods of two priorities and two start seconds: many ties, not all."""
    return [
        make_pod(f"v{i}")
        .uid(f"v{i}")
        .priority(rng.choice([5, 10]))
        .requests(cpu=f"{rng.choice([100, 200, 300, 500])}m")
        .node("n1")
        .started(rng.choice([START, START_LATER]))
        .obj()
        for i in range(n)
    ]


def _key(p: PodInfo) -> tuple[int, float]:
    assert p.start_time is not None
    return (-p.priority, p.start_time)


def test_tied_victims_are_reprieved_in_go_s_sort_order() -> None:
    """20 possible victims with ties on priority and start: Go's pdqsort leaves tied
    pods out of the node's order, and which of them are reprieved follows Go's order,
    not a stable sort's."""
    rng = random.Random(5)
    differs = 0
    for _ in range(100):
        pods = _victims(rng, 20)
        view = NodeView(make_node("n1").capacity(cpu="5", pods="110").obj())
        for p in pods:
            view.add_pod(p)
        want_cpu = rng.choice([600, 900, 1200])
        hi = make_pod("hi").priority(100).requests(cpu=f"{want_cpu}m").obj()
        victims, _, status = select_victims(hi, view, (), ResourceFit(), lambda _p: True)
        assert status.ok
        # the reference: Go's order of the node's list, then the greedy reprieve: put
        # each back, keep it out when the preemptor would no longer fit
        order = list(view.pods.values())
        sort_slice(order, lambda a, b: _key(a) < _key(b))
        kept = 0  # cpu of the pods reprieved so far (back on the node)
        out: list[PodInfo] = []
        for p in order:
            if kept + p.requests["cpu"] + want_cpu <= 5000:
                kept += p.requests["cpu"]  # reprieved: it stays on the node
            else:
                out.append(p)
        assert [v.uid for v in victims] == [v.uid for v in out]
        stable = sorted(view.pods.values(), key=_key)
        if [p.uid for p in stable] != [p.uid for p in order]:
            differs += 1
    assert differs > 0  # Go's order really differed from a stable sort somewhere


def _pdb(name: str, allowed: int, key: str, value: str) -> PDBInfo:
    selector = LabelSelector((Requirement(key, IN, frozenset((value,))),))
    return PDBInfo(
        namespace="default",
        name=name,
        selector=selector,
        disruptions_allowed=allowed,
        disrupted_pods=frozenset(),
    )


def test_a_pod_that_violates_one_pdb_does_not_spend_the_next() -> None:
    """FilterVictimsWithPDBViolation's podIsViolating returns at the first PDB taken
    below zero: the PDBs after it keep their budget for the next pods."""
    both = make_pod("both").labels(app="web", tier="x").node("n1").obj()
    tier = make_pod("tier").labels(tier="x").node("n1").obj()
    pdbs = [_pdb("web", 0, "app", "web"), _pdb("tier", 1, "tier", "x")]
    violating, fine = split_by_pdb([both, tier], pdbs)
    # "both" violates "web" and stops there: "tier" keeps its one disruption for "tier"
    assert [p.name for p in violating] == ["both"]
    assert [p.name for p in fine] == ["tier"]
