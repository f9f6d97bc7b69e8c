"""NodeResourcesFit.filter_batch (one gather for every wanted resource, early exit when
nothing is short) gives, node by node, the same verdict, code and reasons as the per-node
Filter, over seeded random clusters: extended resources present on some nodes only,
zero allocatable, pods past the pod limit, requests above the whole allocatable."""

from __future__ import annotations

import random

from scheduler.config import names
from scheduler.framework.status import Code
from tests.unit.helpers.builders import (
    NodeBuilder,
    filter_statuses,
    make_framework,
    make_node,
    make_pod,
    make_snapshot,
)

GPU = "example.com/gpu"


def _node(rng: random.Random, i: int) -> NodeBuilder:
    node = make_node(f"n{i}").capacity(
        cpu=f"{rng.choice([0, 500, 2000, 4000])}m",
        memory=f"{rng.choice([0, 1, 4, 8])}Gi",
        pods=str(rng.choice([1, 2, 110])),
    )
    if rng.random() < 0.5:
        node.capacity(**{GPU: str(rng.choice([0, 1, 2]))})
    return node


def test_filter_batch_matches_per_node_filter() -> None:
    rng = random.Random(20261201)
    fw = make_framework([names.NODE_RESOURCES_FIT])
    codes: set[Code] = set()
    for case in range(60):
        nodes = [_node(rng, i) for i in range(rng.randint(1, 12))]
        existing = [
            make_pod(f"e{case}-{j}")
            .node(f"n{rng.randrange(len(nodes))}")
            .requests(cpu=f"{rng.choice([0, 100, 1000])}m", memory=f"{rng.choice([0, 1, 3])}Gi")
            for j in range(rng.randint(0, 10))
        ]
        snap = make_snapshot(nodes, existing)
        req: dict[str, str | int] = {}
        if rng.random() < 0.8:
            req["cpu"] = f"{rng.choice([100, 1500, 5000])}m"
        if rng.random() < 0.8:
            req["memory"] = f"{rng.choice([1, 6, 20])}Gi"
        if rng.random() < 0.3:
            req[GPU] = str(rng.choice([1, 3]))
        pod = make_pod(f"p{case}").requests(**req).obj()
        # filter_statuses asserts batch == per-node for every node
        statuses = filter_statuses(fw, pod, snap)
        codes.update(s.code for s in statuses.values())
    # the random clusters reached both rejection kinds, not only success
    assert Code.UNSCHEDULABLE in codes
    assert Code.UNSCHEDULABLE_AND_UNRESOLVABLE in codes
