"""The resource pools a node can allocate from
(k8s.io/dynamic-resource-allocation@v0.37.2/structured/internal/incubating/
pools_incubating.go GatherPools, with v1.37.2's default features: partitionable devices
on, compatibility groups off).

A pool is the newest generation of one driver's pool among the slices that reach the
node (by node name, node selector, all nodes, or per device). It is incomplete while
fewer slices than `resourceSliceCount` of that generation exist, and invalid when its
devices repeat a name or consume counters no counter set declares. Pools are ordered by
driver then pool name, those with binding conditions last.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import overload

from scheduler.dra.resources import CounterSet, DeviceRecord, SliceRecord
from scheduler.model.selectors import NodeSelector

PoolID = tuple[str, str]  # (driver, pool)


@dataclass(frozen=True, slots=True)
class Node:
    """What allocation reads of a node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Pool:
    id: PoolID
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices_on_node: list[SliceRecord] = field(default_factory=list)
    slices_not_on_node: list[SliceRecord] = field(default_factory=list)
    counter_sets: dict[str, CounterSet] = field(default_factory=dict)
    # per slice on the node, its devices' (driver, pool, device): the allocator looks
    # every device up by it, for every node and pod
    device_ids: list[tuple[tuple[str, str, str], ...]] = field(default_factory=list)
    # whether a search's answer over this pool may be kept for the next pod with the
    # same claims (dra/verdict_cache.py): complete, valid, and none of what makes the
    # answer depend on more than which devices are held
    cacheable: bool = False

    @property
    def name(self) -> str:
        return f"{self.id[0]}/{self.id[1]}"


def node_matches(
    node: Node, node_name: str, all_nodes: bool, selector: NodeSelector | None
) -> bool:
    """NodeMatches."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return selector.matches(node.labels, node.name)
    return False


def _relevant(slice_: SliceRecord, node: Node) -> bool:
    if slice_.node_name or slice_.all_nodes or slice_.node_selector is not None:
        return node_matches(node, slice_.node_name, slice_.all_nodes, slice_.node_selector)
    if slice_.per_device_node_selection:
        return any(
            node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in slice_.devices
        )
    return False


def _duplicate_device(slices: Iterable[SliceRecord]) -> str:
    seen: set[str] = set()
    for s in slices:
        for d in s.devices:
            if d.name in seen:
                return f"duplicate device name {d.name}"
            seen.add(d.name)
    return ""


def _counter_problem(counter_sets: Mapping[str, CounterSet], slices: Iterable[SliceRecord]) -> str:
    for s in slices:
        for d in s.devices:
            for consumption in d.consumes_counters:
                found = counter_sets.get(consumption.counter_set)
                if found is None:
                    return f"counter set {consumption.counter_set} not found"
                for name in consumption.counters:
                    if name not in found.counters:
                        return f"counter {name} not found in counter set {found.name}"
    return ""


def _build_pool(
    pool_id: PoolID, slices: list[SliceRecord], all_for_pool: Sequence[SliceRecord] | None
) -> Pool:
    slices = sorted(slices, key=lambda s: s.name)
    device_slices = [s for s in slices if not s.shared_counters]
    counter_slices = [s for s in slices if s.shared_counters]
    not_on_node: list[SliceRecord] = []
    if all_for_pool is not None and len(slices) < len(all_for_pool):
        here = {s.name for s in slices}
        for s in all_for_pool:
            if s.name in here:
                continue
            (counter_slices if s.shared_counters else not_on_node).append(s)
    reason = _duplicate_device(device_slices)
    if reason:
        return Pool(pool_id, invalid=True, invalid_reason=reason)
    counter_sets: dict[str, CounterSet] = {}
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in counter_sets:
                return Pool(
                    pool_id, invalid=True, invalid_reason=f"duplicate counter set name {cs.name}"
                )
            counter_sets[cs.name] = cs
    reason = _counter_problem(counter_sets, device_slices) or _counter_problem(
        counter_sets, not_on_node
    )
    if reason:
        return Pool(pool_id, invalid=True, invalid_reason=reason)
    cacheable = not counter_sets and not any(
        s.per_device_node_selection
        or any(d.allow_multiple_allocations or d.consumes_counters or d.binding_conditions
               for d in s.devices)
        for s in device_slices
    )  # fmt: skip
    return Pool(
        pool_id,
        cacheable=cacheable,
        device_ids=[tuple((*pool_id, d.name) for d in s.devices) for s in device_slices],
        slices_on_node=device_slices,
        slices_not_on_node=not_on_node,
        counter_sets=counter_sets,
    )


def _has_binding_conditions(pool: Pool) -> bool:
    return any(d.binding_conditions for s in pool.slices_on_node for d in s.devices)


class SliceIndex(Sequence[SliceRecord]):
    """The slices, with what gathering pools for one node looks up: the slices published
    for that node by name, the ones that may reach any node (node selector, all nodes,
    per-device selection), and each pool's slices. Upstream's GatherPools scans every
    slice for every node; at hundreds of nodes with a slice each that scan would be most
    of a pod's Filter here, and the answer does not depend on the order slices come in
    (pools are keyed and sorted, a pool's slices sorted by name)."""

    def __init__(self, slices: Iterable[SliceRecord]) -> None:
        self._all = tuple(slices)
        self._by_node: dict[str, list[SliceRecord]] = {}
        self._elsewhere: list[SliceRecord] = []
        self._by_pool: dict[PoolID, list[SliceRecord]] = {}
        # a node's pools, while they depend on its name alone (no slice reaches nodes
        # by selector): the index is rebuilt on every slice change, so this stays true
        self._pools: dict[str, Sequence[Pool]] = {}
        for s in self._all:
            if s.node_name:
                self._by_node.setdefault(s.node_name, []).append(s)
            else:
                self._elsewhere.append(s)
            self._by_pool.setdefault((s.driver, s.pool), []).append(s)

    @staticmethod
    def of(slices: Sequence[SliceRecord]) -> SliceIndex:
        return slices if isinstance(slices, SliceIndex) else SliceIndex(slices)

    def for_node(self, node_name: str) -> Iterator[SliceRecord]:
        """Every slice that may reach `node_name` (a superset: GatherPools still checks)."""
        yield from self._by_node.get(node_name, ())
        yield from self._elsewhere

    @property
    def pools_stable(self) -> bool:
        """Whether `pools_for` gives the same pools object for a node each time."""
        return not self._elsewhere

    def pools_for(self, node: Node) -> Sequence[Pool]:
        """gather_pools, remembered per node name where the labels cannot matter."""
        if self._elsewhere:
            return gather_pools(self, node)
        pools = self._pools.get(node.name)
        if pools is None:
            pools = self._pools[node.name] = tuple(gather_pools(self, node))
        return pools

    def in_pool(self, pool_id: PoolID) -> Sequence[SliceRecord]:
        return self._by_pool.get(pool_id, ())

    @overload
    def __getitem__(self, i: int) -> SliceRecord: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[SliceRecord]: ...
    def __getitem__(self, i: int | slice) -> SliceRecord | Sequence[SliceRecord]:
        return self._all[i]

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[SliceRecord]:
        return iter(self._all)


def gather_pools(index: SliceIndex, node: Node) -> list[Pool]:
    by_pool: dict[PoolID, list[SliceRecord]] = {}
    for s in index.for_node(node.name):
        if s.uses_compatibility_groups or not _relevant(s, node):
            continue
        pool_id = (s.driver, s.pool)
        kept = by_pool.get(pool_id)
        if kept is None or s.generation > kept[0].generation:
            by_pool[pool_id] = [s]
        elif s.generation == kept[0].generation:
            kept.append(s)
    pools: list[Pool] = []
    with_conditions: list[Pool] = []
    for pool_id, slices in by_pool.items():
        generation, count = slices[0].generation, slices[0].resource_slice_count
        if len(slices) == count:
            pool = _build_pool(pool_id, slices, None)
        else:
            # checkSlicesInPool: a newer generation elsewhere makes these obsolete
            in_pool = index.in_pool(pool_id)
            same = [s for s in in_pool if s.generation == generation]
            if any(s.generation > generation for s in in_pool):
                continue
            same = [s for s in same if not s.uses_compatibility_groups]
            if len(same) != count:
                pools.append(Pool(pool_id, incomplete=True))
                continue
            pool = _build_pool(pool_id, slices, same)
        (with_conditions if _has_binding_conditions(pool) else pools).append(pool)
    pools.sort(key=lambda p: p.id)
    with_conditions.sort(key=lambda p: p.id)
    return pools + with_conditions


def device_consumption(device: DeviceRecord) -> dict[str, dict[str, Fraction]]:
    """The counters a device consumes, by counter set."""
    out: dict[str, dict[str, Fraction]] = {}
    for c in device.consumes_counters:
        per_set = out.setdefault(c.counter_set, {})
        for name, amount in c.counters.items():
            per_set[name] = per_set.get(name, Fraction(0)) + amount
    return out
