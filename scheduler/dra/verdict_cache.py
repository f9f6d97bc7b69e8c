"""Filter's answer for a node, kept for the next pod with the same claims.

Pods made from one template ask for the same devices, and between two of them the
devices of most nodes do not change: the structured allocator would search every such
node again and come to the same answer. Its search is a function of the claims' specs,
the device classes they name, the node's pools and which of the pools' devices other
claims hold, and nothing else, once a few inputs are left out (below). So the answer of
the last search on a node is kept with what it depended on, and reused while all of it
is unchanged:

- the claims to allocate, by the JSON of their specs, and the class records they name,
  by identity (a changed class is a new record);
- the node's pools, by identity: SliceIndex keeps one tuple of pools per node while no
  slice reaches nodes by selector, and makes a new index on every slice or taint-rule
  change (nodes that slices reach by selector are never cached: their pools are
  gathered anew each time);
- per pool, the version DeviceState gives it: it moves whenever a claim that holds one
  of the pool's devices comes or goes, pending allocations included. The versions are
  read from the same snapshot as the held devices (PreFilter's AllocatedState).

Left out, so never cached: pools that are incomplete or invalid (their answers are
errors), pools with shareable devices (a share gets a fresh id), counters, binding
conditions or per-device node selection; errors and timeouts. Upstream searches every
time; the cached answer is the one its search would give, and a test holds this cache
to that (tests/unit/dra/test_verdict_cache.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.dra.allocator import AllocatedState, FoundAllocation
from scheduler.dra.pools import Node, Pool, SliceIndex
from scheduler.dra.resources import ClaimRecord, DeviceClassRecord

# nodes remembered at most (one answer each); past it the table starts again
NODE_LIMIT = 100_000

Signature = tuple[str, tuple[int, ...]]


def signature(
    claims: Sequence[ClaimRecord], classes: Mapping[str, DeviceClassRecord]
) -> tuple[Signature, tuple[DeviceClassRecord, ...]] | None:
    """What the search reads of the claims and their classes (None: a class is missing,
    which the search answers with an error), and the class records to keep alive while
    their identities stand in the signature."""
    names = sorted(
        {
            sub.device_class_name
            for claim in claims
            for request in claim.requests
            for sub in ([request.exactly] if request.exactly else request.first_available)
            if sub is not None
        }
    )
    records = tuple(classes.get(n) for n in names)
    if any(r is None for r in records):
        return None
    kept = tuple(r for r in records if r is not None)
    specs = json.dumps([c.raw.get("spec") for c in claims], sort_keys=True)
    return (specs, tuple(id(r) for r in kept)), kept


@dataclass(frozen=True, slots=True)
class _Entry:
    pools: Sequence[Pool]
    signature: Signature
    versions: tuple[int, ...]
    found: FoundAllocation | None
    classes: tuple[DeviceClassRecord, ...]


class VerdictCache:
    def __init__(self) -> None:
        self._by_node: dict[str, _Entry] = {}
        self.hits = 0
        self.misses = 0

    def _pools(self, index: SliceIndex, node: Node) -> Sequence[Pool] | None:
        if not index.pools_stable:
            return None
        pools = index.pools_for(node)
        return pools if all(p.cacheable for p in pools) else None

    @staticmethod
    def _versions(pools: Sequence[Pool], held: AllocatedState) -> tuple[int, ...]:
        return tuple(held.pool_versions.get(p.id, 0) for p in pools)

    def get(
        self, index: SliceIndex, node: Node, sig: Signature, held: AllocatedState
    ) -> tuple[bool, FoundAllocation | None]:
        """(True, the answer kept for `node`) while it still holds, else (False, None)."""
        entry = self._by_node.get(node.name)
        if entry is None or entry.signature != sig:
            self.misses += 1
            return False, None
        pools = self._pools(index, node)
        if (
            pools is None
            or entry.pools is not pools
            or entry.versions != self._versions(pools, held)
        ):
            self.misses += 1
            return False, None
        self.hits += 1
        return True, entry.found

    def put(
        self,
        index: SliceIndex,
        node: Node,
        sig: Signature,
        classes: tuple[DeviceClassRecord, ...],
        held: AllocatedState,
        found: FoundAllocation | None,
    ) -> None:
        pools = self._pools(index, node)
        if pools is None:
            return
        if len(self._by_node) >= NODE_LIMIT:
            self._by_node.clear()
        self._by_node[node.name] = _Entry(pools, sig, self._versions(pools, held), found, classes)
