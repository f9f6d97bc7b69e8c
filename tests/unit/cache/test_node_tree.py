"""The node tree's order and the snapshot's node order, as upstream's.

The NodeTree cases are those of upstream v1.37.2
pkg/scheduler/backend/cache/node_tree_test.go (its `allNodes` fixture, TestNodeTree_List
and TestNodeTreeMultiOperations), with the expected orders derived by hand from
node_tree.go's list(); the Cache cases follow cache.go's AddNode/UpdateNode/RemoveNode
and UpdateSnapshot (the list is rebuilt only when a node came or went).
"""

from __future__ import annotations

import pytest

from scheduler.cache import Cache
from scheduler.cache.node_tree import NodeTree, zone_key
from scheduler.model.node import NodeInfo
from tests.unit.helpers.builders import make_node

REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"

# upstream node_tree_test.go allNodes: name -> labels
ALL_NODES: list[tuple[str, dict[str, str]]] = [
    ("node-0", {}),
    ("node-1", {REGION: "region-1"}),
    ("node-2", {ZONE: "zone-2"}),
    ("node-3", {REGION: "region-1", ZONE: "zone-2"}),
    ("node-4", {REGION: "region-1", ZONE: "zone-2"}),
    ("node-5", {REGION: "region-1", ZONE: "zone-3"}),
    ("node-6", {REGION: "region-2", ZONE: "zone-2"}),
    ("node-7", {REGION: "region-2", ZONE: "zone-2"}),
    ("node-8", {REGION: "region-2", ZONE: "zone-2"}),
    (
        "node-9",
        {REGION: "region-2", ZONE: "zone-2", BETA_REGION: "region-2", BETA_ZONE: "zone-2"},
    ),
    ("node-10", {BETA_REGION: "region-2", BETA_ZONE: "zone-3"}),
]


def _tree(ops: list[tuple[str, int]]) -> NodeTree:
    tree = NodeTree()
    for op, i in ops:
        name, labels = ALL_NODES[i]
        if op == "add":
            tree.add_node(name, zone_key(labels))
        else:
            tree.remove_node(name, zone_key(labels))
    return tree


def test_zone_key_is_upstreams() -> None:
    assert zone_key({}) == ""
    assert zone_key({REGION: "r"}) == "r:\x00:"
    assert zone_key({ZONE: "z"}) == ":\x00:z"
    assert zone_key({REGION: "r", ZONE: "z"}) == "r:\x00:z"
    # the deprecated beta labels win over the topology ones
    assert zone_key({BETA_ZONE: "b", ZONE: "z", REGION: "r"}) == "r:\x00:b"
    # a present beta label wins even when empty (Go's `if !ok`)
    assert zone_key({BETA_ZONE: "", ZONE: "z"}) == ""


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (0, []),
        (1, ["node-0"]),
        (4, ["node-0", "node-1", "node-2", "node-3"]),
        # zones in first-seen order: "", r1, z2, r1/z2 (3, 4), r1/z3, r2/z2 (6, 7, 8)
        (
            9,
            [
                "node-0",
                "node-1",
                "node-2",
                "node-3",
                "node-5",
                "node-6",
                "node-4",
                "node-7",
                "node-8",
            ],
        ),
    ],
)
def test_list_interleaves_zones(count: int, expected: list[str]) -> None:
    """upstream TestNodeTree_List."""
    assert _tree([("add", i) for i in range(count)]).list() == expected


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        # upstream TestNodeTreeMultiOperations, case by case
        ([("add", 2), ("add", 3), ("add", 4), ("remove", 2), ("remove", 3), ("remove", 4)], []),
        ([("add", 2), ("add", 3), ("add", 4), ("remove", 2)], ["node-3", "node-4"]),
        (
            [("add", 2), ("add", 3), ("add", 4), *[("remove", i) for i in (2, 3, 4)], ("add", 5)],
            ["node-5"],
        ),
        # "add more nodes to an exhausted zone": node-3 joins r1/z2 after node-4
        (
            [("add", i) for i in (4, 5, 6, 7, 8, 3)],
            ["node-4", "node-5", "node-6", "node-3", "node-7", "node-8"],
        ),
        # "remove zone and add new"
        (
            [("add", 3), ("add", 4), ("remove", 3), ("add", 6), ("add", 7), ("remove", 4)],
            ["node-6", "node-7"],
        ),
        # a zone emptied and refilled goes last; within a zone removal closes the gap
        (
            [("add", i) for i in (3, 5, 6, 4, 7)] + [("remove", 5), ("remove", 3), ("add", 5)],
            ["node-4", "node-6", "node-5", "node-7"],
        ),
    ],
)
def test_add_and_remove(ops: list[tuple[str, int]], expected: list[str]) -> None:
    assert _tree(ops).list() == expected


def test_duplicate_add_and_missing_remove_change_nothing() -> None:
    tree = _tree([("add", 3), ("add", 4), ("add", 3)])
    assert tree.num_nodes == 2
    assert not tree.remove_node("node-5", zone_key(ALL_NODES[5][1]))
    # the wrong zone is "not found" too, as upstream
    assert not tree.remove_node("node-3", "")
    assert tree.list() == ["node-3", "node-4"]


def test_update_moves_a_node_only_when_its_zone_changes() -> None:
    tree = _tree([("add", i) for i in (3, 4, 5)])  # r1/z2: 3, 4; r1/z3: 5
    tree.update_node(zone_key(ALL_NODES[3][1]), "node-3", zone_key(ALL_NODES[3][1]))
    assert tree.list() == ["node-3", "node-5", "node-4"]
    tree.update_node(zone_key(ALL_NODES[3][1]), "node-3", zone_key(ALL_NODES[5][1]))
    # out of r1/z2 and appended to r1/z3
    assert tree.list() == ["node-4", "node-5", "node-3"]


# ------------------------------------------------------------------ the Cache's snapshot


def _node(i: int, zone: str | None = None) -> NodeInfo:
    b = make_node(f"n{i}")
    if zone is not None:
        b = b.labels(**{ZONE: zone})
    obj: NodeInfo = b.obj()
    return obj


def _order(cache: Cache, snap: object) -> list[str]:
    from scheduler.cache.snapshot import Snapshot

    assert isinstance(snap, Snapshot)
    cache.update_snapshot(snap)
    return [snap.view(s).name for s in snap.node_order().tolist()]


def test_snapshot_walks_nodes_zone_by_zone() -> None:
    cache = Cache()
    for i, z in enumerate("aabbbc"):
        cache.add_node(_node(i, z))
    snap = cache.new_snapshot()
    assert _order(cache, snap) == ["n0", "n2", "n5", "n1", "n3", "n4"]


def test_zone_change_moves_the_node_at_the_next_add_or_delete_only() -> None:
    """cache.go UpdateSnapshot rebuilds nodeInfoList from the tree only when a node
    came into or left the snapshot (updateAllLists): a zone change waits for one."""
    cache = Cache()
    nodes = [_node(i, z) for i, z in enumerate("aab")]
    for n in nodes:
        cache.add_node(n)
    snap = cache.new_snapshot()
    assert _order(cache, snap) == ["n0", "n2", "n1"]
    cache.update_node(nodes[0], _node(0, "b"))  # tree: a: n1; b: n2, n0
    assert _order(cache, snap) == ["n0", "n2", "n1"]
    cache.add_node(_node(3, "c"))
    assert _order(cache, snap) == ["n1", "n2", "n3", "n0"]
    cache.remove_node(_node(3, "c"))
    assert _order(cache, snap) == ["n1", "n2", "n0"]


def test_a_node_removed_and_added_between_cycles_keeps_its_place_in_the_list() -> None:
    """Upstream: the re-added node is in the snapshot's map already, and the map is not
    larger than the tree, so the list is not rebuilt (its place in the tree moved)."""
    cache = Cache()
    for i in range(3):
        cache.add_node(_node(i, "a"))
    snap = cache.new_snapshot()
    cache.remove_node(_node(0, "a"))
    cache.add_node(_node(0, "a"))
    assert _order(cache, snap) == ["n0", "n1", "n2"]
    cache.add_node(_node(3, "a"))
    assert _order(cache, snap) == ["n1", "n2", "n0", "n3"]


def test_update_of_a_node_the_cache_never_saw_adds_it() -> None:
    cache = Cache()
    cache.add_node(_node(0, "a"))
    cache.update_node(_node(1, "a"), _node(1, "b"))
    snap = cache.new_snapshot()
    assert _order(cache, snap) == ["n0", "n1"]
