"""Snapshot: the cycle's consistent view of the cluster, updated incrementally.

`Cache.update_snapshot(snapshot)` copies only the nodes whose generation moved since the
last update, so a cycle after one bind touches one row, not 5000. The snapshot holds:
- `table`: the NodeTable (numpy columns) for batch plugins;
- `views[slot]`: a NodeView clone per node, for per-node plugins;
- slots having pods with (anti-)affinity, for InterPodAffinity;
- a pod label index (key -> value -> slot -> {uid: pod}) so a selector with a
  positive requirement (matchLabels, In, Exists) visits only candidate pods.
"""

from __future__ import annotations

from collections.abc import Iterator

from scheduler.cache.node_table import IntArray, NodeTable
from scheduler.cache.node_view import NodeView
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import LabelSelector


class Snapshot:
    def __init__(self) -> None:
        self.table = NodeTable()
        self.views: list[NodeView | None] = []
        self.generation = 0
        self.with_affinity: set[int] = set()
        self.with_required_anti_affinity: set[int] = set()
        self._pod_index: dict[str, dict[str, dict[int, dict[str, PodInfo]]]] = {}

    # ------------------------------------------------------------ reads
    @property
    def num_nodes(self) -> int:
        return self.table.num_nodes

    def live_slots(self) -> IntArray:
        return self.table.live_slots()

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

    def _reindex(self, slot: int, old: dict[str, PodInfo], new: dict[str, PodInfo]) -> None:
        """Move the label index of `slot` from the pods `old` to the pods `new`, touching
        only the records that differ (a cycle after one bind changes one pod of a node,
        not all of them)."""
        for uid, pod in old.items():
            if new.get(uid) is not pod:
                self._unindex_pod(slot, pod)
        for uid, pod in new.items():
            if old.get(uid) is not pod:
                self._index_pod(slot, pod)

    def _set(self, name: str, view: NodeView) -> None:
        table = self.table
        slot = table.allocate(name)
        while len(self.views) < table.size:
            self.views.append(None)
        old = self.views[slot]
        new = view.clone()
        self.views[slot] = new
        self._reindex(slot, old.pods if old is not None else {}, new.pods)
        table.set_row(slot, new)
        _toggle(self.with_affinity, slot, new.with_affinity > 0)
        _toggle(self.with_required_anti_affinity, slot, new.with_required_anti_affinity > 0)

    def _remove(self, name: str) -> None:
        slot = self.table.index.get(name)
        if slot is None:
            return
        old = self.views[slot]
        if old is not None:
            self._reindex(slot, old.pods, {})
        self.views[slot] = None
        self.table.release(name)
        self.with_affinity.discard(slot)
        self.with_required_anti_affinity.discard(slot)


def _toggle(s: set[int], slot: int, on: bool) -> None:
    if on:
        s.add(slot)
    else:
        s.discard(slot)
