"""DomainCounts: numbers per topology domain (a node label key and one of its values),
held per key as an int64 array indexed by the NodeTable's label code of the value.

Upstream keeps these as maps keyed by (key, value) (interpodaffinity's
topologyToMatchedTermCount and scoreMap in filtering.go / scoring.go); as arrays a whole
column of candidate nodes is read with one gather: the count of each node's domain is
`counts[codes[slots]]`. Filling is one unbuffered add (np.add.at, exact int64) over the
slots where the counted pods are. A (key, value) the table has no code for (only a node
copy outside the snapshot could carry one) is kept aside in a small map so nothing is
lost. PodTopologySpread keeps its per-constraint arrays the same way, in its own state.

The slots and counts of the pods a selector admits come from the snapshot's pod matcher
(cache/pod_matcher.py), which InterPodAffinity and PodTopologySpread share.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from scheduler.cache.node_table import BoolArray, IntArray, NodeTable

Pair = tuple[str, str]


def slots_and_counts(by_slot: Mapping[int, int]) -> tuple[IntArray, IntArray]:
    """A {slot: count} map as two aligned arrays."""
    n = len(by_slot)
    slots = np.fromiter(by_slot.keys(), dtype=np.int64, count=n)
    counts = np.fromiter(by_slot.values(), dtype=np.int64, count=n)
    return slots, counts


class DomainCounts:
    __slots__ = ("_extra", "arrays", "table")

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.arrays: dict[str, IntArray] = {}
        self._extra: dict[Pair, int] = {}

    def clone(self) -> DomainCounts:
        c = DomainCounts(self.table)
        c.arrays = {k: a.copy() for k, a in self.arrays.items()}
        c._extra = dict(self._extra)
        return c

    def _array(self, key: str, size: int) -> IntArray:
        arr = self.arrays.get(key)
        if arr is None:
            arr = np.zeros(size, dtype=np.int64)
            self.arrays[key] = arr
        elif len(arr) < size:
            arr = np.concatenate((arr, np.zeros(size - len(arr), dtype=np.int64)))
            self.arrays[key] = arr
        return arr

    # ------------------------------------------------------------ filling
    def add_slots(self, key: str, slots: IntArray, weights: IntArray | int) -> bool:
        """Add weights[i] to the domain of slots[i]'s node; nodes without the key count
        nowhere (upstream: `if tv, ok := node.Labels[key]; ok`). True when at least one
        node had the key (upstream's map got an entry, even if its sum is 0)."""
        col = self.table.labels.get(key)
        if col is None or len(slots) == 0:
            return False
        codes = col.codes[slots]
        keep = codes >= 0
        if not keep.any():
            return False
        w = np.broadcast_to(np.asarray(weights, dtype=np.int64), codes.shape)[keep]
        size = len(col.values)
        arr = self._array(key, size)
        # exact: int64 sums, no float weights
        np.add.at(arr, codes[keep], w)
        return True

    def bump(self, key: str, value: str, delta: int) -> None:
        """One pod at one domain (PreFilter extensions' AddPod/RemovePod)."""
        col = self.table.labels.get(key)
        code = col.value_codes.get(value) if col is not None else None
        if col is None or code is None:
            pair = (key, value)
            n = self._extra.get(pair, 0) + delta
            if n:
                self._extra[pair] = n
            else:
                self._extra.pop(pair, None)
            return
        self._array(key, len(col.values))[code] += delta

    # ------------------------------------------------------------ reading
    def get(self, key: str, value: str) -> int:
        col = self.table.labels.get(key)
        code = col.value_codes.get(value) if col is not None else None
        if code is None:
            return self._extra.get((key, value), 0)
        arr = self.arrays.get(key)
        return int(arr[code]) if arr is not None and code < len(arr) else 0

    def any_nonzero(self) -> bool:
        """Upstream's `len(counts) > 0` (its maps delete an entry that drops to 0)."""
        return bool(self._extra) or any(bool(a.any()) for a in self.arrays.values())

    def at(self, key: str, slots: IntArray) -> IntArray:
        """Per slot, the count of its node's domain under `key` (0 without the key)."""
        col = self.table.labels.get(key)
        arr = self.arrays.get(key)
        if col is None or arr is None:
            return np.zeros(len(slots), dtype=np.int64)
        # code -1 (node lacks the key) reads the appended 0
        ext = np.zeros(max(len(arr), len(col.values)) + 1, dtype=np.int64)
        ext[: len(arr)] = arr
        out: IntArray = ext[col.codes[slots]]
        return out

    def positive_at(self, key: str, slots: IntArray) -> BoolArray:
        out: BoolArray = self.at(key, slots) > 0
        return out

    def topology_keys(self) -> list[str]:
        """Every key with a count, once each."""
        return list(dict.fromkeys([*self.arrays, *(k for k, _ in self._extra)]))

    def positive_pairs(self, labels: Mapping[str, str]) -> bool:
        """Some (key, value) of `labels` has a count > 0 (upstream
        satisfyExistingPodsAntiAffinity walks the node's labels)."""
        for key in self.arrays:
            v = labels.get(key)
            if v is not None and self.get(key, v) > 0:
                return True
        return any(c > 0 and labels.get(k) == v for (k, v), c in self._extra.items())
