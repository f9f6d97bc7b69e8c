"""InterPodAffinity's array path (counts per topology domain, existing pods' terms grouped
in the snapshot) against a straightforward per-node, per-pod reference written from
upstream's rules (interpodaffinity/filtering.go and scoring.go), on seeded random
clusters: node labels present or missing, pods in several namespaces, pods with a label of
their own (projected groups), terminating pods,
required and preferred affinity / anti-affinity with namespaces, namespaceSelector and
topology keys some nodes lack. Filter verdicts and reasons (per-node and batch), raw and
normalised scores, the PreScore skip, and dry runs (AddPod/RemovePod) must all agree."""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from scheduler.cache import Cache
from scheduler.framework import CycleState, Handle, InMemoryListers
from scheduler.framework.dry_run import NodeDryRun
from scheduler.framework.status import Code
from scheduler.model.namespace import NamespaceInfo
from scheduler.model.pod import PodInfo, pod_from_dict
from scheduler.model.pod_affinity import AffinityTerm
from tests.unit.helpers.builders import (
    NodeBuilder,
    PodBuilder,
    filter_statuses,
    make_framework,
    make_node,
    make_pod,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
REGION = "topology.kubernetes.io/region"
KEYS = [HOST, ZONE, REGION, "rack"]
NAMESPACES = {"ns-a": {"team": "a"}, "ns-b": {"team": "b"}, "ns-c": {}}
AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_WEIGHT = 1  # upstream's default hardPodAffinityWeight

Pair = tuple[str, str]


# ---------------------------------------------------------------- random inputs
def _node(rng: random.Random, i: int) -> NodeBuilder:
    n = make_node(f"n{i}")
    labels: dict[str, str] = {}
    if rng.random() < 0.9:
        labels[HOST] = f"n{i}"
    if rng.random() < 0.85:
        labels[ZONE] = f"z{rng.randrange(4)}"
    if rng.random() < 0.6:
        labels[REGION] = f"r{rng.randrange(2)}"
    for k, v in labels.items():
        n.label(k, v)
    if not labels or rng.random() < 0.3:
        # a node without the label every term below may use, or with none at all
        n.label("pool", "p")
    return n


def _selector(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.7:
        return {"match_labels": {"app": f"a{rng.randrange(4)}"}}
    op = rng.choice(["In", "NotIn", "Exists"])
    expr: dict[str, Any] = {"key": rng.choice(["app", "tier"]), "operator": op}
    if op != "Exists":
        expr["values"] = [f"a{rng.randrange(4)}", "x"]
    return {"exprs": [expr]}


def _namespaces(rng: random.Random) -> dict[str, Any]:
    r = rng.random()
    if r < 0.6:
        return {}
    if r < 0.8:
        return {"namespaces": rng.sample(sorted(NAMESPACES), rng.randrange(1, 3))}
    if r < 0.9:
        return {"namespace_selector": {}}
    return {"namespace_selector": {"matchLabels": {"team": rng.choice(["a", "b"])}}}


def _terms(rng: random.Random, pod: PodBuilder, rate: float) -> PodBuilder:
    for _ in range(rng.randrange(4)):
        if rng.random() > rate:
            continue
        anti = rng.random() < 0.5
        weight = rng.choice([0, 0, rng.randrange(1, 101)])
        key = rng.choice(KEYS)
        pod.pod_affinity(key, **_selector(rng), **_namespaces(rng), anti=anti, weight=weight)
    return pod


def _pod(rng: random.Random, name: str, node: str, rate: float) -> PodBuilder:
    p = make_pod(name, rng.choice(sorted(NAMESPACES)))
    p.labels(app=f"a{rng.randrange(4)}")
    if rng.random() < 0.5:
        p.label("tier", rng.choice(["x", "y"]))
    if rng.random() < 0.6:
        # a label of its own (a StatefulSet's pod-name): many such pods make the snapshot
        # answer through projections onto the selectors' keys
        p.label("id", name)
    if node:
        p.node(node)
        if rng.random() < 0.1:
            p.terminating()
    return _terms(rng, p, rate)


def _cluster(seed: int) -> tuple[list[NodeBuilder], list[dict[str, Any]], PodBuilder]:
    rng = random.Random(seed)
    nodes = [_node(rng, i) for i in range(rng.randrange(5, 25))]
    pods = [
        _pod(rng, f"e{j}", f"n{rng.randrange(len(nodes))}", 0.3).raw()
        for j in range(rng.randrange(0, 60))
    ]
    # replicas: the same pod (terms and all) on another node, as a Deployment's pods
    for j, raw in enumerate(list(pods[:10])):
        twin = copy.deepcopy(raw)
        twin["metadata"]["name"] = twin["metadata"]["uid"] = f"twin{j}"
        twin["spec"]["nodeName"] = f"n{rng.randrange(len(nodes))}"
        pods.append(twin)
    incoming = _pod(rng, "incoming", "", 0.8)
    return nodes, pods, incoming


def _handle() -> Handle:
    listers = InMemoryListers()
    for name, labels in NAMESPACES.items():
        listers.set_namespace(NamespaceInfo(name=name, labels=labels))
    return Handle.from_listers(listers)


# ---------------------------------------------------------------- the reference
def _own_term_matches(t: AffinityTerm, other: PodInfo) -> bool:
    """The incoming pod's term (namespaceSelector merged into namespaces by upstream,
    over the namespaces that exist) against an existing pod."""
    return t.matches(other, NAMESPACES.get(other.namespace))


def _existing_term_matches(t: AffinityTerm, incoming: PodInfo) -> bool:
    return t.matches(incoming, NAMESPACES[incoming.namespace])


class Reference:
    def __init__(
        self, nodes: Mapping[str, Mapping[str, str]], placed: list[tuple[PodInfo, str]]
    ) -> None:
        self.nodes = nodes  # name -> labels
        self.placed = placed  # (pod, node)

    def _count(self, counts: dict[Pair, int], node: str, key: str, n: int) -> None:
        v = self.nodes[node].get(key)
        if v is not None:
            counts[(key, v)] += n

    def filter(self, pod: PodInfo) -> dict[str, str]:
        aff_counts: dict[Pair, int] = defaultdict(int)
        anti_counts: dict[Pair, int] = defaultdict(int)
        existing: dict[Pair, int] = defaultdict(int)
        for p, node in self.placed:
            for t in p.required_anti_affinity:
                if _existing_term_matches(t, pod):
                    self._count(existing, node, t.topology_key, 1)
            aff = pod.required_affinity
            if aff and all(_own_term_matches(t, p) for t in aff):
                for t in aff:
                    self._count(aff_counts, node, t.topology_key, 1)
            for t in pod.required_anti_affinity:
                if _own_term_matches(t, p):
                    self._count(anti_counts, node, t.topology_key, 1)
        self_match = bool(pod.required_affinity) and all(
            t.matches(pod, None) for t in pod.required_affinity
        )
        out: dict[str, str] = {}
        for name, labels in self.nodes.items():
            if pod.required_affinity:
                missing = any(t.topology_key not in labels for t in pod.required_affinity)
                exist = all(
                    aff_counts[(t.topology_key, labels[t.topology_key])] > 0
                    for t in pod.required_affinity
                    if t.topology_key in labels
                )
                nonzero = any(c != 0 for c in aff_counts.values())
                if missing or (not exist and not (not nonzero and self_match)):
                    out[name] = AFF
                    continue
            if any(
                t.topology_key in labels and anti_counts[(t.topology_key, labels[t.topology_key])]
                for t in pod.required_anti_affinity
            ):
                out[name] = ANTI
                continue
            if any(existing[(k, v)] > 0 for k, v in labels.items()):
                out[name] = EXISTING
        return out

    def raw_scores(self, pod: PodInfo) -> dict[str, int] | None:
        """upstream PreScore + Score; None when PreScore skips."""
        scores: dict[Pair, int] = defaultdict(int)
        hit = False

        def add(t: AffinityTerm, node: str, weight: int) -> None:
            nonlocal hit
            v = self.nodes[node].get(t.topology_key)
            if v is not None:
                scores[(t.topology_key, v)] += weight
                hit = True

        for p, node in self.placed:
            for w in pod.preferred_affinity:
                if _own_term_matches(w.term, p):
                    add(w.term, node, w.weight)
            for w in pod.preferred_anti_affinity:
                if _own_term_matches(w.term, p):
                    add(w.term, node, -w.weight)
            for t in p.required_affinity:
                if _existing_term_matches(t, pod):
                    add(t, node, HARD_WEIGHT)
            for w in p.preferred_affinity:
                if _existing_term_matches(w.term, pod):
                    add(w.term, node, w.weight)
            for w in p.preferred_anti_affinity:
                if _existing_term_matches(w.term, pod):
                    add(w.term, node, -w.weight)
        if not hit:
            return None
        return {
            name: sum(c for (k, v), c in scores.items() if labels.get(k) == v)
            for name, labels in self.nodes.items()
        }


def _normalise(raw: Mapping[str, int]) -> dict[str, int]:
    lo, hi = min(raw.values()), max(raw.values())
    return {n: int(100 * ((s - lo) / (hi - lo))) if hi > lo else 0 for n, s in raw.items()}


def _build(
    nodes: list[NodeBuilder], pods: list[dict[str, Any]]
) -> tuple[Any, Reference, list[PodInfo]]:
    cache = Cache()
    node_labels: dict[str, Mapping[str, str]] = {}
    for n in nodes:
        info = n.obj()
        cache.add_node(info)
        node_labels[info.name] = info.labels
    infos = [pod_from_dict(p) for p in pods]
    for info in infos:
        cache.add_pod(info)
    return (
        cache.new_snapshot(),
        Reference(node_labels, [(p, p.node_name) for p in infos]),
        infos,
    )


SEEDS = range(60)


@pytest.mark.parametrize("seed", SEEDS)
def test_filter_matches_the_reference(seed: int) -> None:
    nodes, pods, incoming = _cluster(seed)
    snap, ref, _ = _build(nodes, pods)
    fw = make_framework(["InterPodAffinity"], handle=_handle())
    pod = incoming.obj()
    got = {n: s.message() for n, s in filter_statuses(fw, pod, snap).items()}
    assert got == ref.filter(pod)


@pytest.mark.parametrize("seed", SEEDS)
def test_scores_match_the_reference(seed: int) -> None:
    nodes, pods, incoming = _cluster(seed)
    snap, ref, _ = _build(nodes, pods)
    fw = make_framework(["InterPodAffinity"], handle=_handle())
    plugin = fw.score_plugins[0]
    pod = incoming.obj()
    state = CycleState()
    slots = snap.live_slots()
    st = plugin.pre_score(state, pod, snap, slots)
    want = ref.raw_scores(pod)
    if want is None:
        assert st.code == Code.SKIP
        return
    assert st.ok
    batch = plugin.score_batch(state, pod, snap, slots)
    names = [snap.view(s).name for s in slots.tolist()]
    assert dict(zip(names, batch.tolist(), strict=True)) == want
    one = {snap.view(s).name: plugin.score(state, pod, snap.view(s))[0] for s in slots.tolist()}
    assert one == want
    plugin.normalize_scores(state, pod, batch, slots)
    assert dict(zip(names, batch.tolist(), strict=True)) == _normalise(want)


@pytest.mark.parametrize("seed", SEEDS)
def test_dry_runs_match_the_reference(seed: int) -> None:
    """Remove a pod from a node and add another (PreFilter extensions), then Filter
    that node, against the reference over the changed cluster."""
    nodes, pods, incoming = _cluster(seed)
    snap, ref, infos = _build(nodes, pods)
    fw = make_framework(["InterPodAffinity"], handle=_handle())
    pod = incoming.obj()
    state = CycleState()
    _, st = fw.run_pre_filter(state, pod, snap)
    assert st.ok
    if "InterPodAffinity" in state.skip_filter or not infos:
        return
    rng = random.Random(seed)
    for _ in range(3):
        victim = rng.choice(infos)
        node = victim.node_name
        view = snap.get(node)
        assert view is not None
        run = NodeDryRun(fw.filter_runner, state, pod, view)
        run.remove_pod(victim)
        newcomer = _pod(rng, f"new{seed}", node, 0.5).obj()
        run.add_pod(newcomer)
        placed = [(p, n) for p, n in ref.placed if p.uid != victim.uid] + [(newcomer, node)]
        want = Reference(ref.nodes, placed).filter(pod).get(node, "")
        got = run.filter()
        assert (got.message() if not got.ok else "") == want
    # the batch form still reads the untouched cycle state
    res = fw.filter_plugins[0].filter_batch(state, pod, snap, snap.live_slots())
    assert int(np.count_nonzero(~res.passed)) == len(ref.filter(pod))
