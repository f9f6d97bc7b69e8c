"""DomainCounts directly: counts land in the domain of each slot's node, nodes without
the key count nowhere, and a (key, value) the node table has no code for is kept, read
back and seen by the emptiness check (upstream's maps would hold it too)."""

from __future__ import annotations

import numpy as np

from scheduler.plugins.topology_counts import DomainCounts
from tests.unit.helpers.builders import make_node, make_snapshot

ZONE = "topology.kubernetes.io/zone"


def test_counts_per_domain_and_gather() -> None:
    snap = make_snapshot([make_node("a").zone("z1"), make_node("b").zone("z1"),
                          make_node("c").zone("z2"), make_node("d")])  # fmt: skip
    slot = {n: snap.slot_of(n) for n in "abcd"}
    counts = DomainCounts(snap.table)
    assert not counts.any_nonzero()
    # two pods on a, one on c, one on d (no zone: counted nowhere)
    slots = np.array([slot["a"], slot["a"], slot["c"], slot["d"]], dtype=np.int64)
    assert counts.add_slots(ZONE, slots, 1)
    assert counts.get(ZONE, "z1") == 2 and counts.get(ZONE, "z2") == 1
    order = np.array([slot[n] for n in "abcd"], dtype=np.int64)
    assert counts.at(ZONE, order).tolist() == [2, 2, 1, 0]
    assert counts.positive_at(ZONE, order).tolist() == [True, True, True, False]
    # only d: no node had the key, so nothing was added (upstream: no map entry)
    assert not DomainCounts(snap.table).add_slots(ZONE, order[3:], 5)
    assert not DomainCounts(snap.table).add_slots("rack", order, 5)
    clone = counts.clone()
    clone.bump(ZONE, "z1", -2)
    assert clone.get(ZONE, "z1") == 0 and counts.get(ZONE, "z1") == 2


def test_a_value_the_table_has_no_code_for_is_kept() -> None:
    snap = make_snapshot([make_node("a").zone("z1")])
    counts = DomainCounts(snap.table)
    counts.bump(ZONE, "elsewhere", 1)
    counts.bump("rack", "r1", 1)
    counts.bump("rack", "r2", 1)
    assert counts.any_nonzero()
    assert counts.get(ZONE, "elsewhere") == 1 and counts.get("rack", "r1") == 1
    assert counts.positive_pairs({"rack": "r1"})
    assert not counts.positive_pairs({ZONE: "z1"})
    assert sorted(counts.topology_keys()) == ["rack", ZONE]
    counts.bump("rack", "r1", -1)
    counts.bump("rack", "r2", -1)
    counts.bump(ZONE, "elsewhere", -1)
    assert not counts.any_nonzero()
