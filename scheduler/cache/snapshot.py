"""Snapshot: the cycle's consistent view of the cluster, updated incrementally.

`Cache.update_snapshot(snapshot)` copies only the nodes whose generation moved since the
last update, so a cycle after one bind touches one row, not 5000. The snapshot holds:
- `table`: the NodeTable (numpy columns) for batch plugins;
- `views[slot]`: a NodeView clone per node, for per-node plugins;
- slots having pods with (anti-)affinity, for InterPodAffinity;
- `pod_matcher` (cache/pod_matcher.py): which existing pods a selector admits, per
  slot, for InterPodAffinity and PodTopologySpread alike (pod groups, their label
  index, projections and the memo of answers, all its own);
- the existing pods' pod (anti)-affinity terms grouped by identity (`pod_terms[kind]`:
  (term, weight) -> {slot: how many times pods there carry it}), so InterPodAffinity
  matches the incoming pod once per distinct term rather than once per pod (a
  Deployment's replicas share their terms);
- `node_order()`: the live slots in upstream's nodeInfoList order (the node tree's
  zone-interleaved list, node_tree.py), set by the Cache when it rebuilds the list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

import numpy as np

from scheduler.cache.node_table import IntArray, NodeTable
from scheduler.cache.node_view import NodeView
from scheduler.cache.pod_matcher import PodMatcher
from scheduler.model.pod import PodInfo
from scheduler.model.pod_affinity import AffinityTerm

# the kinds of an existing pod's term in Snapshot.pod_terms
REQUIRED_AFFINITY = 0
REQUIRED_ANTI_AFFINITY = 1
PREFERRED_AFFINITY = 2
PREFERRED_ANTI_AFFINITY = 3

# (term, weight); weight 0 for the required kinds
TermKey = tuple[AffinityTerm, int]


class Snapshot:
    def __init__(self) -> None:
        self.table = NodeTable()
        self.views: list[NodeView | None] = []
        self.generation = 0
        # the cache's purge count at this snapshot's last refresh (Cache.refresh_snapshot)
        self.purges_seen = 0
        self.with_affinity: set[int] = set()
        self.with_required_anti_affinity: set[int] = set()
        # which existing pods a selector admits (InterPodAffinity, PodTopologySpread)
        self.pod_matcher = PodMatcher()
        self.pod_terms: tuple[dict[TermKey, dict[int, int]], ...] = ({}, {}, {}, {})
        # upstream's nodeInfoList as slots; None until the Cache builds it (or after a
        # node came or went), when node_order falls back to slot order
        self._node_order: IntArray | None = None
        # a node came into or left this snapshot since its order was last rebuilt
        # (Cache._copy_changes rebuilds it once the snapshot is up to date)
        self.order_stale = False
        # the views as the cache gave them, for the nodes a simulation changed (the
        # pod-group cycle, pod-group preemption); restore_mutations puts them back
        self._before_mutations: dict[str, NodeView] = {}

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

    # ------------------------------------------------------------ simulations
    # upstream's snapshot AssumePod/ForgetPod and its mutation session
    # (pkg/scheduler/backend/cache/snapshot.go): a pod-group cycle places its members here
    # and not in the cache, and pod-group preemption removes victims here; everything is
    # undone by restore_mutations before the cache next updates this snapshot.
    def add_pod(self, pod: PodInfo, node_name: str) -> None:
        """Count `pod` (its node_name set to `node_name`) on that node."""
        view = self._mutable(node_name)
        view.add_pod(pod if pod.node_name == node_name else _on_node(pod, node_name))
        self._set(node_name, view, owned=True)

    def remove_pod(self, pod: PodInfo, node_name: str) -> None:
        view = self._current(node_name)
        self._set(node_name, view.clone_without((pod.uid,)), owned=True)

    def add_pods(self, pods: Iterable[PodInfo], node_name: str) -> None:
        """add_pod of each, with one write of the node (its indexes moved once)."""
        view = self._mutable(node_name)
        for pod in pods:
            view.add_pod(pod if pod.node_name == node_name else _on_node(pod, node_name))
        self._set(node_name, view, owned=True)

    def remove_pods(self, pods: Iterable[PodInfo], node_name: str) -> None:
        """remove_pod of each, with one write of the node."""
        view = self._current(node_name)
        self._set(node_name, view.clone_without({p.uid for p in pods}), owned=True)

    def _current(self, node_name: str) -> NodeView:
        """The node's view, kept for restore_mutations if it is the cache's."""
        view = self.get(node_name)
        if view is None:
            raise KeyError(f"node {node_name} is not in the snapshot")
        self._before_mutations.setdefault(node_name, view)
        return view

    def _mutable(self, node_name: str) -> NodeView:
        return self._current(node_name).clone()

    @property
    def mutated(self) -> bool:
        return bool(self._before_mutations)

    def restore_mutations(self) -> None:
        """Every node a simulation changed back as the cache gave it (its pods in their
        order, so victims' ties and the search see the same node again)."""
        saved, self._before_mutations = self._before_mutations, {}
        for name, view in saved.items():
            # the saved view left self.views when it was first replaced: no one else
            # holds it to change it
            self._set(name, view, owned=True)

    # ------------------------------------------------------------ writes (by the cache)
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

    def _set(self, name: str, view: NodeView, *, owned: bool = False) -> bool:
        """Copy `view` in (take it as it is when `owned`: a fresh view no one else
        holds, as a simulation's); True when the node is new to the snapshot."""
        table = self.table
        new_node = name not in table.index
        if new_node:
            self._node_order = None
        slot = table.allocate(name)
        while len(self.views) < table.size:
            self.views.append(None)
        old = self.views[slot]
        new = view if owned else view.clone()
        self.views[slot] = new
        # every index moves only for the pod records that changed (a PodInfo is immutable,
        # so the same object is the same pod record): a cycle after one bind touches one pod
        old_pods = old.pods if old is not None else {}
        gone = [p for uid, p in old_pods.items() if new.pods.get(uid) is not p]
        came = [p for uid, p in new.pods.items() if old_pods.get(uid) is not p]
        self.pod_matcher.count(slot, gone, -1)
        self.pod_matcher.count(slot, came, +1)
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
            self.pod_matcher.count(slot, old.pods.values(), -1)
            self._index_terms(slot, old.pods.values(), -1)
        self.views[slot] = None
        self.table.release(name)
        self.with_affinity.discard(slot)
        self.with_required_anti_affinity.discard(slot)
        return True


def _on_node(pod: PodInfo, node_name: str) -> PodInfo:
    return dataclasses.replace(pod, node_name=node_name)


def _toggle(s: set[int], slot: int, on: bool) -> None:
    if on:
        s.add(slot)
    else:
        s.discard(slot)
