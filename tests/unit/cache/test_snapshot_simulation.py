"""The snapshot's simulation writes (a pod-group cycle's assumptions, pod-group
preemption's removals) are undone by restore_mutations: any sequence leaves the table,
the views (pods in their order) and the affinity indexes as the cache gave them."""

from __future__ import annotations

import random

import pytest

from scheduler.cache import Cache, Snapshot
from tests.unit.helpers.builders import make_node, make_pod


def _state(snap: Snapshot) -> tuple[object, ...]:
    t = snap.table
    views = [None if v is None else list(v.pods) for v in snap.views]
    return (
        t.req.copy().tolist(), t.nz_req.copy().tolist(), t.pod_count.copy().tolist(),
        views, sorted(snap.with_affinity), sorted(snap.with_required_anti_affinity),
        {k: dict(v) for k, v in snap.pod_terms[1].items()},
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(20))
def test_any_simulation_is_undone(seed: int) -> None:
    rng = random.Random(seed)
    cache = Cache()
    nodes = [f"n{i}" for i in range(4)]
    for n in nodes:
        cache.add_node(make_node(n).capacity(cpu="8", memory="16Gi").obj())
    existing = []
    for i in range(8):
        b = make_pod(f"e{i}").labels(app=rng.choice("ab")).container(cpu="100m")
        if rng.random() < 0.4:
            b = b.pod_affinity("kubernetes.io/hostname", {"app": "a"}, anti=True)
        pod = b.node(rng.choice(nodes)).obj()
        cache.add_pod(pod)
        existing.append(pod)
    snap = cache.new_snapshot()
    before = _state(snap)
    for step in range(rng.randint(1, 12)):
        if rng.random() < 0.5 and existing:
            victim = existing.pop(rng.randrange(len(existing)))
            snap.remove_pod(victim, victim.node_name)
        else:
            pod = make_pod(f"m{step}").labels(app="a").container(cpu="200m").obj()
            snap.add_pod(pod, rng.choice(nodes))
    assert snap.mutated
    snap.restore_mutations()
    assert not snap.mutated
    assert _state(snap) == before
    # and the cache's next update finds nothing to fix
    assert cache.update_snapshot(snap) == 0
