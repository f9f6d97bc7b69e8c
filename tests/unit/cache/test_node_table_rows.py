"""NodeTable rows skip the node columns only when the very same NodeInfo wrote them."""

from __future__ import annotations

from scheduler.cache import Cache
from tests.unit.helpers.builders import make_node, make_pod


def test_a_bind_moves_the_sums_and_a_node_update_moves_the_node_columns() -> None:
    cache = Cache()
    n1 = make_node("n1").capacity(cpu="4", pods=10).label("zone", "a").obj()
    cache.add_node(n1)
    snap = cache.new_snapshot()
    table = snap.table
    slot = table.index["n1"]
    cpu = table.column("cpu")
    assert cpu is not None
    cache.assume_pod(make_pod("p").requests(cpu="500m").obj(), "n1")
    cache.update_snapshot(snap)
    assert table.req[slot, cpu] == 500 and table.pod_count[slot] == 1
    assert table.alloc[slot, cpu] == 4000 and table.max_pods[slot] == 10
    # a new NodeInfo (new labels, allocatable) with no pod change is written in full
    n1b = make_node("n1").capacity(cpu="2", pods=5).label("zone", "b").obj()
    cache.update_node(n1, n1b)
    cache.update_snapshot(snap)
    assert table.alloc[slot, cpu] == 2000 and table.max_pods[slot] == 5
    assert table.labels["zone"].values[table.labels["zone"].codes[slot]] == "b"
    assert table.req[slot, cpu] == 500


def test_a_removed_node_added_back_as_the_same_object_gets_its_row_again() -> None:
    cache = Cache()
    n1 = make_node("n1").capacity(cpu="4", pods=10).label("zone", "a").obj()
    cache.add_node(n1)
    snap = cache.new_snapshot()
    cache.remove_node(n1)
    cache.update_snapshot(snap)
    cache.add_node(n1)
    cache.update_snapshot(snap)
    table = snap.table
    slot = table.index["n1"]
    cpu = table.column("cpu")
    assert cpu is not None
    assert table.alloc[slot, cpu] == 4000 and table.max_pods[slot] == 10
    assert table.labels["zone"].codes[slot] >= 0
