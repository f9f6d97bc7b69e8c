"""The pod matcher: which existing pods a query admits, as (slot, count) pairs.

InterPodAffinity (the pod's own terms against existing pods) and PodTopologySpread (a
constraint's selector in the pod's namespace) ask the same question of the snapshot's
pods: "how many pods that a selector admits are on each node". One `PodMatcher` per
snapshot answers it, and it alone owns the structures that make the answer cheap:

- the pod groups (cache/pod_groups.py): one per (namespace, labels, terminating), with
  their count per slot, so a query is evaluated once per group, not once per pod (a
  Deployment's replicas are one group);
- an index label -> value -> groups carrying it, so a query with a positive requirement
  (matchLabels, In, Exists) visits only the groups that may match;
- projections: when more than SMALL_CANDIDATE_SET groups remain (pods with a label of
  their own, as a StatefulSet's pod-name), the groups merged on the keys the query's
  selectors read; a few kept (MAX_PROJECTIONS, least recently used dropped) and moved
  with every pod change;
- groups left with no pod stay (in the index too) until there are more of them than
  twice the groups with pods, so a pod removed and added back in a simulation finds its
  group; a query admits an empty group at no more than its memo's cost;
- the memo: a query's answer for a group depends only on the group's namespace, labels
  and terminating state, so it is kept on the group under the query's token. Tokens are
  given by the query's value (equal queries share answers, whichever plugin or cycle
  built them) and never reused, so a dropped token's leftovers cannot answer another
  query. A group's memo is keyed by its content in the matcher, so it outlives the
  group: a Deployment scaled to zero and back, or a projection dropped and rebuilt,
  finds what was learnt.

Plugins read answers; nothing outside this module writes into a group.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_groups import GroupProjection, Memo, PodGroup
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import LabelSelector

# projections kept (least recently used dropped first): each one moves with every pod
# change, and one is rebuilt from the groups when asked for again
MAX_PROJECTIONS = 16
# at most this many candidate groups are answered as they are, without a projection
SMALL_CANDIDATE_SET = 32
# query tokens kept (least recently used dropped first); most cycles ask the few queries
# of one template again and again
QUERIES_KEPT = 256
# answers kept per group: a group's memo is emptied when it reaches this many
MEMO_PER_GROUP = 16
# memos kept for content no live group has, beyond twice the live groups' own
MEMO_SLACK = 1024
# groups kept with no pod, beyond twice the others: a pod with a label of its own is a
# group of its own, and a preemption's dry run takes tens of thousands of them off their
# nodes and puts them back; dropping and rebuilding each group (its index entries, its
# memo lookup) was most of that write's cost
EMPTY_SLACK = 1024

# a group's key: namespace, labels, terminating
GroupKey = tuple[str, frozenset[tuple[str, str]], bool]

# the answer when no group can match: shared, so read-only
_NO_SLOTS: IntArray = np.zeros(0, dtype=np.int64)
_NO_SLOTS.flags.writeable = False


@dataclass(frozen=True, slots=True)
class PodQuery:
    """The pods in one of `namespaces` whose labels match every selector of
    `selectors`; terminating pods only if `with_terminating`.

    InterPodAffinity's own terms (namespaceSelector merged into the namespaces, upstream
    mergeAffinityTermNamespacesIfNotEmpty) are one query: all its required affinity
    terms at once, or one anti-affinity or preferred term. PodTopologySpread's constraint
    is its selector in the pod's namespace, terminating pods left out (upstream
    countPodsMatchSelector)."""

    selectors: tuple[LabelSelector, ...]
    namespaces: frozenset[str]
    with_terminating: bool

    def admits(self, namespace: str, labels: Mapping[str, str], terminating: bool) -> bool:
        if terminating and not self.with_terminating:
            return False
        if namespace not in self.namespaces:
            return False
        for s in self.selectors:  # noqa: SIM110 - a plain loop is faster on this hot path
            if not s.matches(labels):
                return False
        return True


class PodMatcher:
    def __init__(self) -> None:
        self._groups: dict[GroupKey, PodGroup] = {}
        # label -> value -> the groups whose pods carry it
        self._index: dict[str, dict[str, dict[GroupKey, PodGroup]]] = {}
        self._projections: OrderedDict[tuple[str, ...], GroupProjection] = OrderedDict()
        self._tokens: OrderedDict[PodQuery, int] = OrderedDict()
        self._next_token = 0
        # content (a GroupKey, or a projection's keys and a projected key) -> its memo
        self._memos: dict[Hashable, Memo] = {}
        self._memo_limit = MEMO_SLACK
        # the keys of the groups with no pod left (see EMPTY_SLACK)
        self._emptied: dict[GroupKey, None] = {}
        self._empty_limit = EMPTY_SLACK

    # ------------------------------------------------------------ reads
    def matching(self, query: PodQuery) -> tuple[IntArray, IntArray]:
        """The slots of the pods `query` admits and how many there, as two aligned
        arrays (a slot may repeat, once per group). Gathered in lists and converted
        once: groups are often one pod on one node each, and two numpy arrays per
        group cost more than the rest of a 500-node affinity cycle."""
        candidates = self.candidate_groups(query)
        if not candidates:
            return _NO_SLOTS, _NO_SLOTS
        token = self._token(query)
        admits = query.admits
        slots: list[int] = []
        counts: list[int] = []
        for g in candidates:
            memo = g.memo
            hit = memo.get(token)
            if hit is None:
                hit = admits(g.namespace, g.labels, g.terminating)
                if len(memo) >= MEMO_PER_GROUP:
                    memo.clear()
                memo[token] = hit
            if hit:
                by_slot = g.slots
                slots.extend(by_slot)
                counts.extend(by_slot.values())
        return np.array(slots, dtype=np.int64), np.array(counts, dtype=np.int64)

    def candidate_groups(self, query: PodQuery) -> Collection[PodGroup]:
        """The groups that may hold pods `query` admits (a superset: the caller still
        asks the query). They may be projected (their labels then only the keys the
        query's selectors read): so only this query may be asked of them."""
        selectors = query.selectors
        best: dict[GroupKey, PodGroup] | None = None
        for s in selectors:
            if s.match_nothing:
                return ()
            for key, value in s.positive_pairs():
                by_value = self._index.get(key)
                if by_value is None:
                    return ()  # no pod carries the key: nothing can match
                if value is None:
                    found: dict[GroupKey, PodGroup] = {}
                    for groups_with_value in by_value.values():
                        found.update(groups_with_value)
                else:
                    found = by_value.get(value) or {}
                if not found:
                    return ()
                if best is None or len(found) < len(best):
                    best = found
        candidates = self._groups if best is None else best
        if len(candidates) > SMALL_CANDIDATE_SET:
            keys = tuple(sorted({r.key for s in selectors for r in s.requirements}))
            projection = self._projection(keys)
            if len(projection.groups) < len(candidates):
                return projection.groups.values()
        return candidates.values()

    def groups(self) -> Collection[PodGroup]:
        """Every group with pods, unprojected."""
        return [g for g in self._groups.values() if g.slots]

    @property
    def projections_kept(self) -> int:
        return len(self._projections)

    # ------------------------------------------------------------ writes (by the snapshot)
    def count(self, slot: int, pods: Iterable[PodInfo], delta: int) -> None:
        """`delta` of each of `pods` came to (or, negative, left) `slot`."""
        # alike pods (a node's replicas, a preemption's victims put back) are counted
        # once with their number: each group and projection is touched once per call
        tally: dict[GroupKey, tuple[PodInfo, int]] = {}
        for pod in pods:
            terminating = pod.deletion_timestamp is not None
            key = (pod.namespace, frozenset(pod.labels.items()), terminating)
            seen = tally.get(key)
            tally[key] = (pod, delta if seen is None else seen[1] + delta)
        groups = self._groups
        for key, (pod, change) in tally.items():
            terminating = key[2]
            group = groups.get(key)
            if group is None:
                if change < 0:
                    continue
                group = PodGroup(pod.namespace, pod.labels, terminating, self._memo_for(key))
                groups[key] = group
                for k, v in pod.labels.items():
                    self._index.setdefault(k, {}).setdefault(v, {})[key] = group
            elif not group.slots:
                if change < 0:
                    continue
                del self._emptied[key]
            for projection in self._projections.values():
                projection.count(slot, pod.namespace, pod.labels, terminating, change)
            n = group.slots.get(slot, 0) + change
            if n:
                group.slots[slot] = n
                continue
            group.slots.pop(slot, None)
            if not group.slots:
                self._emptied[key] = None
        if len(self._emptied) > self._empty_limit:
            self._drop_emptied()

    def _drop_emptied(self) -> None:
        groups, index = self._groups, self._index
        for key in self._emptied:
            group = groups.pop(key)
            for k, v in group.labels.items():
                by_value = index[k]
                keys = by_value[v]
                keys.pop(key, None)
                if not keys:
                    del by_value[v]
                    if not by_value:
                        del index[k]
        self._emptied = {}
        self._empty_limit = 2 * len(groups) + EMPTY_SLACK

    # ------------------------------------------------------------ internals
    def _token(self, query: PodQuery) -> int:
        tokens = self._tokens
        token = tokens.get(query)
        if token is not None:
            tokens.move_to_end(query)
            return token
        token = self._next_token
        self._next_token += 1
        tokens[query] = token
        if len(tokens) > QUERIES_KEPT:
            tokens.popitem(last=False)
        return token

    def _memo_for(self, content: Hashable) -> Memo:
        memo = self._memos.get(content)
        if memo is None:
            if len(self._memos) >= self._memo_limit:
                self._drop_dead_memos()
            memo = self._memos[content] = {}
        return memo

    def _drop_dead_memos(self) -> None:
        """Keep only the memos of live groups (amortised: the limit then doubles the
        live count, so this runs once per that many new contents)."""
        kept: dict[Hashable, Memo] = {key: g.memo for key, g in self._groups.items() if g.slots}
        for keys, projection in self._projections.items():
            for pkey, g in projection.groups.items():
                kept[(keys, pkey)] = g.memo
        self._memos = kept
        self._memo_limit = 2 * len(kept) + MEMO_SLACK

    def _projection(self, keys: tuple[str, ...]) -> GroupProjection:
        projections = self._projections
        projection = projections.get(keys)
        if projection is not None:
            projections.move_to_end(keys)
            return projection
        projection = GroupProjection(keys, self._memo_for)
        for g in self._groups.values():
            for slot, n in g.slots.items():
                projection.count(slot, g.namespace, g.labels, g.terminating, n)
        projections[keys] = projection
        if len(projections) > MAX_PROJECTIONS:
            projections.popitem(last=False)
        return projection
