"""The snapshot's pod groups and grouped affinity terms stay right through incremental
updates: after seeded random adds, label changes, terminations, removals of pods and
nodes (the snapshot updated between some of them, as the loop does), they equal what a
fresh snapshot builds, and PodTopologySpread's per-slot counts equal a plain count over
every pod."""

from __future__ import annotations

import random
from typing import Any

import pytest
from builders import make_node, make_pod

from scheduler.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import IN, LabelSelector, Requirement
from scheduler.plugins.pod_topology_spread import _per_slot_counts

HOST = "kubernetes.io/hostname"


def _groups(snap: Snapshot) -> dict[tuple[str, frozenset[tuple[str, str]], bool], dict[str, int]]:
    """Groups keyed by content, their per-slot counts keyed by node name."""
    out = {}
    for g in snap.candidate_groups(LabelSelector.everything()):
        key = (g.namespace, frozenset(g.labels.items()), g.terminating)
        assert key not in out
        assert g.slots, "an empty group is dropped"
        out[key] = {snap.view(s).name: n for s, n in g.slots.items()}
    return out


def _terms(snap: Snapshot) -> list[dict[Any, dict[str, int]]]:
    return [
        {k: {snap.view(s).name: n for s, n in by_slot.items()} for k, by_slot in kind.items()}
        for kind in snap.pod_terms
    ]


def _pod(rng: random.Random, name: str, node: str) -> PodInfo:
    p = make_pod(name, rng.choice(["a", "b"])).labels(app=f"x{rng.randrange(3)}").node(node)
    if rng.random() < 0.4:
        p.label("tier", rng.choice(["web", "db"]))
    if rng.random() < 0.15:
        p.terminating()
    if rng.random() < 0.4:
        p.pod_affinity(HOST, {"app": f"x{rng.randrange(3)}"}, anti=rng.random() < 0.5,
                       weight=rng.choice([0, 10, 50]))  # fmt: skip
    return p.obj()


@pytest.mark.parametrize("seed", range(25))
def test_incremental_groups_equal_a_fresh_build(seed: int) -> None:
    rng = random.Random(seed)
    cache = Cache()
    nodes = [f"n{i}" for i in range(8)]
    for n in nodes:
        cache.add_node(make_node(n).obj())
    snap = cache.new_snapshot()
    live: dict[str, PodInfo] = {}
    for step in range(120):
        r = rng.random()
        if r < 0.5 or not live:
            p = _pod(rng, f"p{step}", rng.choice(nodes))
            cache.add_pod(p)
            live[p.uid] = p
        elif r < 0.7:
            old = live[rng.choice(sorted(live))]
            new = _pod(rng, old.name, old.node_name)
            cache.update_pod(old, new)
            live[new.uid] = new
        elif r < 0.95:
            old = live.pop(rng.choice(sorted(live)))
            cache.remove_pod(old)
        else:
            # a node leaves and comes back (its slot is reused)
            n = rng.choice(nodes)
            for uid in [u for u, p in live.items() if p.node_name == n]:
                cache.remove_pod(live.pop(uid))
            node = cache.node(n)
            assert node is not None
            cache.remove_node(node)
            cache.update_snapshot(snap)
            cache.add_node(make_node(n).obj())
        if rng.random() < 0.3:
            cache.update_snapshot(snap)
    cache.update_snapshot(snap)
    fresh = cache.new_snapshot()
    assert _groups(snap) == _groups(fresh)
    assert _terms(snap) == _terms(fresh)
    # and the counts read from them are the plain count over every pod
    for ns in ("a", "b"):
        for app in ("x0", "x1", "x2"):
            sel = LabelSelector((Requirement("app", IN, frozenset((app,))),))
            counts = _per_slot_counts(snap, sel, ns)
            want: dict[str, int] = {}
            for p in live.values():
                if p.namespace == ns and p.labels.get("app") == app and not p.is_terminating:
                    want[p.node_name] = want.get(p.node_name, 0) + 1
            got = {snap.view(int(s)).name: int(counts[s]) for s in snap.live_slots()}
            assert {k: v for k, v in got.items() if v} == want
