"""Snapshot: the cycle's consistent view of the cluster, updated incrementally.

`Cache.update_snapshot(snapshot)` copies only the nodes whose generation moved since the
last update, so a cycle after one bind touches one row, not 5000. The snapshot holds:
- `table`: the NodeTable (numpy columns) for batch plugins;
- `views[slot]`: a NodeView clone per node, for per-node plugins;
- slots having pods with (anti-)affinity, for InterPodAffinity;
- a pod label index (key -> value -> slot -> {uid: pod}) so a selector with a
  positive requirement (matchLabels, In, Exists) visits only candidate pods;
- the pods grouped by what a label selector reads (`candidate_groups`: namespace,
  labels, terminating or not) with their count per slot, so PodTopologySpread and
  InterPodAffinity match a selector once per group rather than once per pod (a
  Deployment's replicas are one group); when pods carry labels of their own, groups
  merged on the keys the selectors read (cache/pod_groups.py, GroupProjection);
- the existing pods' pod (anti)-affinity terms grouped by identity (`pod_terms[kind]`:
  (term, weight) -> {slot: how many times pods there carry it}), so InterPodAffinity
  matches the incoming pod once per distinct term rather than once per pod (a
  Deployment's replicas share their terms);
- `node_order()`: the live slots in upstream's nodeInfoList order (the node tree's
  zone-interleaved list, node_tree.py), set by the Cache when it rebuilds the list.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from scheduler.cache.node_table import IntArray, NodeTable
from scheduler.cache.node_view import NodeView
from scheduler.cache.pod_groups import GroupProjection, PodGroup
from scheduler.model.pod import PodInfo
from scheduler.model.pod_affinity import AffinityTerm
from scheduler.model.selectors import LabelSelector

# the kinds of an existing pod's term in Snapshot.pod_terms
REQUIRED_AFFINITY = 0
REQUIRED_ANTI_AFFINITY = 1
PREFERRED_AFFINITY = 2
PREFERRED_ANTI_AFFINITY = 3

# (term, weight); weight 0 for the required kinds
TermKey = tuple[AffinityTerm, int]

__all__ = ["PodGroup", "Snapshot"]

# projections kept (least recently used dropped first): each one moves with every pod
# change, and one is rebuilt from the groups when asked for again
MAX_PROJECTIONS = 16
# below this many candidate groups the label index's answer is used as it is
SMALL_CANDIDATE_SET = 32


GroupKey = tuple[str, frozenset[tuple[str, str]], bool]


class Snapshot:
    def __init__(self) -> None:
        self.table = NodeTable()
        self.views: list[NodeView | None] = []
        self.generation = 0
        self.with_affinity: set[int] = set()
        self.with_required_anti_affinity: set[int] = set()
        self._pod_index: dict[str, dict[str, dict[int, dict[str, PodInfo]]]] = {}
        self._groups: dict[GroupKey, PodGroup] = {}
        # label -> value -> the groups whose pods carry it
        self._group_index: dict[str, dict[str, dict[GroupKey, PodGroup]]] = {}
        self._projections: OrderedDict[tuple[str, ...], GroupProjection] = OrderedDict()
        self.pod_terms: tuple[dict[TermKey, dict[int, int]], ...] = ({}, {}, {}, {})
        # upstream's nodeInfoList as slots; None until the Cache builds it (or after a
        # node came or went), when node_order falls back to slot order
        self._node_order: IntArray | None = None

    # ------------------------------------------------------------ reads
    @property
    def num_nodes(self) -> int:
        return self.table.num_nodes

    def live_slots(self) -> IntArray:
        return self.table.live_slots()

    def node_order(self) -> IntArray:
        """The live slots in the order a cycle walks them (upstream's nodeInfoList:
        the node tree's list when it was last rebuilt, cache.py update_snapshot)."""
        if self._node_order is None:
            return self.table.live_slots()
        return self._node_order

    def slot_of(self, node_name: str) -> int | None:
        return self.table.index.get(node_name)

    def get(self, node_name: str) -> NodeView | None:
        slot = self.table.index.get(node_name)
        return self.views[slot] if slot is not None else None

    def view(self, slot: int) -> NodeView:
        v = self.views[slot]
        assert v is not None
        return v

    def node_views(self) -> Iterator[NodeView]:
        for slot in self.table.live_slots():
            v = self.views[int(slot)]
            if v is not None:
                yield v

    def node_names(self) -> list[str]:
        return [n for n in self.table.names if n is not None]

    def candidate_pods(self, selector: LabelSelector) -> Iterator[tuple[int, PodInfo]]:
        """(slot, pod) pairs that may match `selector` (a superset; callers still
        evaluate the selector). Uses the label index when the selector has a positive
        requirement, else visits every pod."""
        if selector.match_nothing:
            return
        best: dict[int, dict[str, PodInfo]] | None = None
        best_size = -1
        for key, value in selector.positive_pairs():
            by_value = self._pod_index.get(key)
            if by_value is None:
                return  # no pod carries the key: nothing can match
            if value is None:
                size = sum(len(p) for slots in by_value.values() for p in slots.values())
                if best is None or size < best_size:
                    merged: dict[int, dict[str, PodInfo]] = {}
                    for slots in by_value.values():
                        for slot, pods in slots.items():
                            merged.setdefault(slot, {}).update(pods)
                    best, best_size = merged, size
                continue
            slots_for = by_value.get(value)
            if slots_for is None:
                return
            size = sum(len(p) for p in slots_for.values())
            if best is None or size < best_size:
                best, best_size = slots_for, size
        if best is not None:
            for slot, pods in best.items():
                for pod in pods.values():
                    yield slot, pod
            return
        for slot in self.table.live_slots():
            v = self.views[int(slot)]
            if v is None:
                continue
            s = int(slot)
            for pod in v.pods.values():
                yield s, pod

    def candidate_groups(
        self, selector: LabelSelector, also: Iterable[LabelSelector] = ()
    ) -> list[PodGroup]:
        """The pod groups that may match `selector` (a superset, as candidate_pods).

        The groups returned may be projected (pod_groups.GroupProjection): their labels
        are then only the keys `selector` and the selectors in `also` read, so the
        caller may evaluate those selectors on them and nothing else. Projection is
        used when the label index leaves many candidates that the selectors cannot tell
        apart (pods with a label of their own)."""
        if selector.match_nothing:
            return []
        pairs = selector.positive_pairs()
        best: dict[GroupKey, PodGroup] | None = None
        for key, value in pairs:
            by_value = self._group_index.get(key)
            if by_value is None:
                return []
            if value is None:
                found: dict[GroupKey, PodGroup] = {}
                for groups_with_value in by_value.values():
                    found.update(groups_with_value)
            else:
                found = by_value.get(value) or {}
            if not found:
                return []
            if best is None or len(found) < len(best):
                best = found
        size = len(best) if best is not None else len(self._groups)
        if size > SMALL_CANDIDATE_SET:
            keys = {r.key for r in selector.requirements}
            for other in also:
                keys.update(r.key for r in other.requirements)
            projection = self._projection(tuple(sorted(keys)))
            if len(projection.groups) < size:
                return [g for g in projection.groups.values() if _carries(g.labels, pairs)]
        if best is None:
            return list(self._groups.values())
        return list(best.values())

    def _projection(self, keys: tuple[str, ...]) -> GroupProjection:
        projections = self._projections
        projection = projections.get(keys)
        if projection is not None:
            projections.move_to_end(keys)
            return projection
        projection = GroupProjection(keys)
        for g in self._groups.values():
            for slot, n in g.slots.items():
                projection.count(slot, g.namespace, g.labels, g.terminating, n)
        projections[keys] = projection
        if len(projections) > MAX_PROJECTIONS:
            projections.popitem(last=False)
        return projection

    # ------------------------------------------------------------ writes (by the cache)
    def _index_pod(self, slot: int, pod: PodInfo) -> None:
        index = self._pod_index
        for k, v in pod.labels.items():
            index.setdefault(k, {}).setdefault(v, {}).setdefault(slot, {})[pod.uid] = pod

    def _unindex_pod(self, slot: int, pod: PodInfo) -> None:
        index = self._pod_index
        for k, v in pod.labels.items():
            by_value = index.get(k)
            if by_value is None:
                continue
            slots = by_value.get(v)
            if slots is None:
                continue
            pods = slots.get(slot)
            if pods is None:
                continue
            pods.pop(pod.uid, None)
            if not pods:
                del slots[slot]
                if not slots:
                    del by_value[v]
                    if not by_value:
                        del index[k]

    def _index_groups(self, slot: int, pods: Iterable[PodInfo], delta: int) -> None:
        groups = self._groups
        for pod in pods:
            terminating = pod.deletion_timestamp is not None
            key = (pod.namespace, frozenset(pod.labels.items()), terminating)
            group = groups.get(key)
            if group is None:
                if delta < 0:
                    continue
                group = PodGroup(pod.namespace, pod.labels, terminating)
                groups[key] = group
                for k, v in pod.labels.items():
                    self._group_index.setdefault(k, {}).setdefault(v, {})[key] = group
            for projection in self._projections.values():
                projection.count(slot, pod.namespace, pod.labels, terminating, delta)
            n = group.slots.get(slot, 0) + delta
            if n:
                group.slots[slot] = n
                continue
            group.slots.pop(slot, None)
            if group.slots:
                continue
            del groups[key]
            for k, v in pod.labels.items():
                by_value = self._group_index[k]
                keys = by_value[v]
                keys.pop(key, None)
                if not keys:
                    del by_value[v]
                    if not by_value:
                        del self._group_index[k]

    def _index_terms(self, slot: int, pods: Iterable[PodInfo], delta: int) -> None:
        for pod in pods:
            if not pod.has_pod_affinity:
                continue
            keys: list[tuple[int, TermKey]] = [
                (REQUIRED_AFFINITY, (t, 0)) for t in pod.required_affinity
            ]
            keys += [(REQUIRED_ANTI_AFFINITY, (t, 0)) for t in pod.required_anti_affinity]
            keys += [(PREFERRED_AFFINITY, (w.term, w.weight)) for w in pod.preferred_affinity]
            keys += [
                (PREFERRED_ANTI_AFFINITY, (w.term, w.weight)) for w in pod.preferred_anti_affinity
            ]
            for kind, key in keys:
                terms = self.pod_terms[kind]
                by_slot = terms.setdefault(key, {})
                n = by_slot.get(slot, 0) + delta
                if n:
                    by_slot[slot] = n
                else:
                    del by_slot[slot]
                    if not by_slot:
                        del terms[key]

    def _set_node_order(self, names: Iterable[str]) -> None:
        """upstream updateNodeInfoSnapshotList(updateAll): the list in node tree order,
        names the snapshot does not hold skipped."""
        index = self.table.index
        slots = [index[n] for n in names if n in index]
        self._node_order = np.asarray(slots, dtype=np.int64)

    def _set(self, name: str, view: NodeView) -> bool:
        """Copy `view` in; True when the node is new to the snapshot."""
        table = self.table
        new_node = name not in table.index
        if new_node:
            self._node_order = None
        slot = table.allocate(name)
        while len(self.views) < table.size:
            self.views.append(None)
        old = self.views[slot]
        new = view.clone()
        self.views[slot] = new
        # every index moves only for the pod records that changed (a PodInfo is immutable,
        # so the same object is the same pod record): a cycle after one bind touches one pod
        old_pods = old.pods if old is not None else {}
        gone = [p for uid, p in old_pods.items() if new.pods.get(uid) is not p]
        came = [p for uid, p in new.pods.items() if old_pods.get(uid) is not p]
        for pod in gone:
            self._unindex_pod(slot, pod)
        for pod in came:
            self._index_pod(slot, pod)
        self._index_groups(slot, gone, -1)
        self._index_groups(slot, came, +1)
        self._index_terms(slot, gone, -1)
        self._index_terms(slot, came, +1)
        table.set_row(slot, new)
        _toggle(self.with_affinity, slot, new.with_affinity > 0)
        _toggle(self.with_required_anti_affinity, slot, new.with_required_anti_affinity > 0)
        return new_node

    def _remove(self, name: str) -> bool:
        """Drop the node; True when the snapshot held it."""
        slot = self.table.index.get(name)
        if slot is None:
            return False
        self._node_order = None
        old = self.views[slot]
        if old is not None:
            for pod in old.pods.values():
                self._unindex_pod(slot, pod)
            self._index_groups(slot, old.pods.values(), -1)
            self._index_terms(slot, old.pods.values(), -1)
        self.views[slot] = None
        self.table.release(name)
        self.with_affinity.discard(slot)
        self.with_required_anti_affinity.discard(slot)
        return True


def _carries(labels: Mapping[str, str], pairs: Iterable[tuple[str, str | None]]) -> bool:
    """The labels have every (key, value) pair (value None: the key, any value)."""
    for key, value in pairs:
        have = labels.get(key)
        if have is None or (value is not None and have != value):
            return False
    return True


def _toggle(s: set[int], slot: int, on: bool) -> None:
    if on:
        s.add(slot)
    else:
        s.discard(slot)
