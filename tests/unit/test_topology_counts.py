"""DomainCounts directly: counts land in the domain of each slot's node, nodes without
the key count nowhere, and a (key, value) the node table has no code for is kept, read
back and seen by the emptiness check (upstream's maps would hold it too)."""

from __future__ import annotations

import numpy as np
from builders import make_node, make_snapshot

from scheduler.cache.snapshot import PodGroup
from scheduler.plugins.topology_counts import (
    DomainCounts,
    group_counts,
    recalled_match,
    remember_match,
)

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


def test_group_counts_gathers_the_wanted_groups_slots() -> None:
    a, b = PodGroup("ns", {"app": "a"}, False), PodGroup("ns", {"app": "b"}, False)
    a.slots.update({3: 2, 5: 1})
    b.slots.update({4: 7})
    slots, n = group_counts([a, b], lambda g: g.labels["app"] == "a")
    assert (slots.tolist(), n.tolist()) == ([3, 5], [2, 1])
    slots, n = group_counts([a, b], lambda g: True)
    assert (slots.tolist(), n.tolist()) == ([3, 5, 4], [2, 1, 7])
    slots, n = group_counts([a, b], lambda g: False)
    assert slots.dtype == np.int64 and len(slots) == len(n) == 0


def test_a_group_remembers_a_match_for_the_same_matcher_object_only() -> None:
    group = PodGroup("ns", {"app": "a"}, False)
    term, equal_term = ("app", "a"), ("app", "a")
    assert recalled_match(group, term) is None
    assert remember_match(group, term, True) is True
    assert recalled_match(group, term) is True
    # an equal but distinct matcher is asked afresh (identity, not value)
    equal_term = tuple(list(equal_term))
    assert recalled_match(group, equal_term) is None
    # bounded: a burst of matchers forgets the old ones
    keep = [object() for _ in range(40)]
    for m in keep:
        remember_match(group, m, False)
    assert len(group.matches) <= 16
    assert recalled_match(group, keep[-1]) is False
