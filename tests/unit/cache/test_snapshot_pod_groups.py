"""The snapshot's pod groups and grouped affinity terms stay right through incremental
updates: after seeded random adds, label changes, terminations, removals of pods and
nodes (the snapshot updated between some of them, as the loop does), they equal what a
fresh snapshot builds, and PodTopologySpread's per-slot counts equal a plain count over
every pod."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.cache import Cache
from scheduler.cache.pod_matcher import PodQuery
from scheduler.cache.snapshot import Snapshot
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import IN, LabelSelector, Requirement
from scheduler.plugins.pod_topology_spread import _per_slot_counts
from tests.unit.helpers.builders import make_node, make_pod

HOST = "kubernetes.io/hostname"


def _groups(snap: Snapshot) -> dict[tuple[str, frozenset[tuple[str, str]], bool], dict[str, int]]:
    """Groups keyed by content, their per-slot counts keyed by node name."""
    out = {}
    for g in snap.pod_matcher.groups():
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


def _selectors() -> list[LabelSelector]:
    from scheduler.model.selectors import DOES_NOT_EXIST, EXISTS, NOT_IN

    app = [Requirement("app", IN, frozenset((f"x{i}",))) for i in range(3)]
    return [
        *(LabelSelector((r,)) for r in app),
        LabelSelector((app[0], Requirement("tier", IN, frozenset(("web",))))),
        LabelSelector((Requirement("app", NOT_IN, frozenset(("x1",))),)),
        LabelSelector((Requirement("tier", EXISTS),)),
        LabelSelector((app[2], Requirement("tier", DOES_NOT_EXIST))),
        LabelSelector((Requirement("app", IN, frozenset(("x0", "x2"))),)),
    ]


@pytest.mark.parametrize("seed", range(20))
def test_counts_through_projections_equal_a_plain_count_when_every_pod_has_its_own_label(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pod carries a label of its own (as a StatefulSet's pod-name), so each is its
    own group and the snapshot answers through projections onto the selector's keys:
    built early and moved by later changes, evicted and rebuilt (at most 3 kept here)."""
    import scheduler.cache.pod_matcher as pod_matcher_module

    monkeypatch.setattr(pod_matcher_module, "MAX_PROJECTIONS", 3)
    monkeypatch.setattr(pod_matcher_module, "SMALL_CANDIDATE_SET", 4)
    rng = random.Random(1000 + seed)
    cache = Cache()
    nodes = [f"n{i}" for i in range(6)]
    for n in nodes:
        cache.add_node(make_node(n).obj())
    snap = cache.new_snapshot()
    live: dict[str, PodInfo] = {}
    selectors = _selectors()

    def check() -> None:
        cache.update_snapshot(snap)
        for sel in rng.sample(selectors, 4):
            for ns in ("a", "b"):
                counts = _per_slot_counts(snap, sel, ns)
                want: dict[str, int] = {}
                for p in live.values():
                    if p.namespace == ns and sel.matches(p.labels) and not p.is_terminating:
                        want[p.node_name] = want.get(p.node_name, 0) + 1
                got = {snap.view(int(s)).name: int(counts[s]) for s in snap.live_slots()}
                assert {k: v for k, v in got.items() if v} == want, (sel, ns)

    for step in range(150):
        r = rng.random()
        if r < 0.55 or not live:
            p = make_pod(f"p{step}", rng.choice(["a", "b"])).labels(
                app=f"x{rng.randrange(3)}", id=f"p{step}"
            )
            if rng.random() < 0.4:
                p.label("tier", rng.choice(["web", "db"]))
            if rng.random() < 0.1:
                p.terminating()
            pod = p.node(rng.choice(nodes)).obj()
            cache.add_pod(pod)
            live[pod.uid] = pod
        else:
            cache.remove_pod(live.pop(rng.choice(sorted(live))))
        if step % 10 == 9:
            check()
    check()
    assert snap.pod_matcher.projections_kept <= 3


def test_projected_groups_carry_the_keys_of_every_selector_the_caller_names() -> None:
    """An incoming pod with two affinity terms matches each group against both: the
    groups must be projected onto the keys of both selectors, not only the first's."""
    cache = Cache()
    for n in ("n0", "n1"):
        cache.add_node(make_node(n).obj())
    for i in range(60):
        p = make_pod(f"p{i}").labels(app=f"x{i % 2}", id=f"p{i}").node(f"n{i % 2}")
        if i % 3 == 0:
            p.label("tier", "web")
        cache.add_pod(p.obj())
    snap = cache.new_snapshot()
    app = LabelSelector((Requirement("app", IN, frozenset(("x0",))),))
    tier = LabelSelector((Requirement("tier", IN, frozenset(("web",))),))
    groups = snap.pod_matcher.candidate_groups(PodQuery((app, tier), frozenset(("default",)), True))
    assert len(groups) < 60, "answered through a projection"
    both = sum(
        n for g in groups if app.matches(g.labels) and tier.matches(g.labels)
        for n in g.slots.values()
    )  # fmt: skip
    assert both == len([i for i in range(60) if i % 2 == 0 and i % 3 == 0])
