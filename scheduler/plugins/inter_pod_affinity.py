"""InterPodAffinity: required pod affinity / anti-affinity (Filter), existing pods'
required anti-affinity against the incoming pod (Filter), preferred terms and existing
pods' terms (Score), as upstream (pkg/scheduler/framework/plugins/interpodaffinity/
filtering.go, scoring.go).

Counts per topology domain are arrays (topology_counts.DomainCounts, indexed by the node
table's label codes), never per node in Python:
- the pod's own terms are matched against the snapshot's pod groups (pods alike in
  namespace and labels, with their count per node), so a Deployment's replicas are
  matched once; the matching groups' slots are summed into the domains with numpy;
- existing pods' terms come grouped by identity from the snapshot (`pod_terms`), so
  each distinct term is matched against the incoming pod once;
- Filter and Score over the candidate nodes are gathers `counts[codes[slots]]`; the
  per-node forms read the same counts (kept right by AddPod/RemovePod in dry runs).

namespaceSelector: the pod's own terms are resolved against the namespace lister once
per cycle; existing pods' terms are matched with the incoming pod's namespace labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.pod_matcher import PodQuery
from scheduler.cache.snapshot import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    Snapshot,
)
from scheduler.config import names
from scheduler.config.plugin_args import InterPodAffinityArgs
from scheduler.framework import signature
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    BatchFilterPlugin,
    BatchFilterResult,
    BatchScorePlugin,
    EnqueueExtensions,
    IntArray,
    NormalizeScorePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo
from scheduler.model.pod_affinity import AffinityTerm, WeightedAffinityTerm
from scheduler.model.selectors import LabelSelector
from scheduler.plugins.helpers import QUEUE, SKIP, event
from scheduler.plugins.topology_counts import DomainCounts, slots_and_counts

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
_FILTER_KEY = "PreFilter" + names.INTER_POD_AFFINITY
_SCORE_KEY = "PreScore" + names.INTER_POD_AFFINITY


@dataclass
class _FilterState:
    """upstream preFilterState (interpodaffinity/filtering.go): the three
    topologyToMatchedTermCount maps, as DomainCounts."""

    affinity_terms: tuple[AffinityTerm, ...]
    anti_terms: tuple[AffinityTerm, ...]
    ns_labels: Mapping[str, str]
    self_match: bool
    affinity_counts: DomainCounts
    anti_counts: DomainCounts
    existing_anti: DomainCounts

    def clone(self) -> _FilterState:
        return dataclasses.replace(
            self,
            affinity_counts=self.affinity_counts.clone(),
            anti_counts=self.anti_counts.clone(),
            existing_anti=self.existing_anti.clone(),
        )

    def update_with_pod(
        self, other: PodInfo, incoming: PodInfo, labels: Mapping[str, str], delta: int
    ) -> None:
        for t in other.required_anti_affinity:
            if t.matches(incoming, self.ns_labels):
                _bump(self.existing_anti, t.topology_key, labels, delta)
        if self.affinity_terms and all(t.matches(other, None) for t in self.affinity_terms):
            for t in self.affinity_terms:
                _bump(self.affinity_counts, t.topology_key, labels, delta)
        for t in self.anti_terms:
            if t.matches(other, None):
                _bump(self.anti_counts, t.topology_key, labels, delta)


def _bump(counts: DomainCounts, key: str, labels: Mapping[str, str], delta: int) -> None:
    value = labels.get(key)
    if value is not None:
        counts.bump(key, value, delta)


def _add_group(counts: DomainCounts, key: str, by_slot: Mapping[int, int], weight: int) -> bool:
    """A group of existing pods sharing one term ({slot: how many}), each adding
    `weight` to its node's domain."""
    slots, n = slots_and_counts(by_slot)
    return counts.add_slots(key, slots, n * weight)


def _own_terms_query(terms: tuple[AffinityTerm, ...]) -> PodQuery:
    """The existing pods that the pod's own terms all match (namespaceSelector already
    merged into their namespaces by _resolve, so no namespace labels: upstream passes
    nil), terminating ones included."""
    namespaces = terms[0].namespaces
    for t in terms[1:]:
        namespaces = namespaces & t.namespaces
    return PodQuery(tuple(t.selector for t in terms), namespaces, True)


class InterPodAffinity(
    PreFilterPlugin,
    PreFilterExtensions,
    BatchFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    NormalizeScorePlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.INTER_POD_AFFINITY

    def __init__(self, args: InterPodAffinityArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._affinity = Status.unresolvable(REASON_AFFINITY, plugin=self.name)
        self._anti = Status.unschedulable(REASON_ANTI_AFFINITY, plugin=self.name)
        self._existing = Status.unschedulable(REASON_EXISTING_ANTI, plugin=self.name)

    # -------------------------------------------------------------- helpers
    def _ns_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self._handle.namespaces.get_namespace(namespace)
        return ns.labels if ns is not None else {}

    def _resolve(self, terms: Iterable[AffinityTerm]) -> tuple[AffinityTerm, ...]:
        """Merge namespaceSelector into the namespace set (upstream
        mergeAffinityTermNamespacesIfNotEmpty)."""
        out = []
        for t in terms:
            if t.namespace_selector.match_nothing:
                out.append(t)
                continue
            sel = t.namespace_selector
            extra = {
                ns.name
                for ns in self._handle.namespaces.list_namespaces()
                if sel.matches(ns.labels)
            }
            out.append(dataclasses.replace(t, namespaces=t.namespaces | extra,
                                           namespace_selector=LabelSelector.nothing()))  # fmt: skip
        return tuple(out)

    def _resolve_weighted(
        self, terms: Iterable[WeightedAffinityTerm]
    ) -> tuple[WeightedAffinityTerm, ...]:
        return tuple(
            WeightedAffinityTerm(w.weight, r)
            for w, r in zip(terms, self._resolve(w.term for w in terms), strict=True)
        )

    # -------------------------------------------------------------- filter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if (
            not pod.required_affinity
            and not pod.required_anti_affinity
            and (not snapshot.with_required_anti_affinity)
        ):
            return None, Status(Code.SKIP)
        aff = self._resolve(pod.required_affinity)
        anti = self._resolve(pod.required_anti_affinity)
        ns_labels = self._ns_labels(pod.namespace)
        table = snapshot.table
        s = _FilterState(
            aff, anti, ns_labels, bool(aff) and all(t.matches(pod, None) for t in aff),
            DomainCounts(table), DomainCounts(table), DomainCounts(table),
        )  # fmt: skip
        # existing pods' required anti-affinity: each distinct term is matched against the
        # pod once, then its pods count at their nodes' domains (upstream
        # getExistingAntiAffinityCounts, per pod and term)
        for (t, _), by_slot in snapshot.pod_terms[REQUIRED_ANTI_AFFINITY].items():
            if t.matches(pod, ns_labels):
                _add_group(s.existing_anti, t.topology_key, by_slot, 1)
        # upstream getIncomingAffinityAntiAffinityCounts: every existing pod matching all
        # affinity terms counts once per term; each anti-affinity term counts its own.
        # The snapshot's pod matcher answers a group of alike pods at a time.
        matcher = snapshot.pod_matcher
        if aff:
            slots, n = matcher.matching(_own_terms_query(aff))
            for t in aff:
                s.affinity_counts.add_slots(t.topology_key, slots, n)
        for t in anti:
            slots, n = matcher.matching(_own_terms_query((t,)))
            s.anti_counts.add_slots(t.topology_key, slots, n)
        state.write(_FILTER_KEY, s)
        return None, Status.success()

    def add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, view: NodeView
    ) -> Status:
        s: _FilterState = state.read(_FILTER_KEY)
        s.update_with_pod(pod_to_add, pod, view.labels, 1)
        return Status.success()

    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, view: NodeView
    ) -> Status:
        s: _FilterState = state.read(_FILTER_KEY)
        s.update_with_pod(pod_to_remove, pod, view.labels, -1)
        return Status.success()

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        s: _FilterState = state.read(_FILTER_KEY)
        labels = view.labels
        if s.affinity_terms:
            pods_exist = True
            for t in s.affinity_terms:
                v = labels.get(t.topology_key)
                if v is None:
                    return self._affinity
                if s.affinity_counts.get(t.topology_key, v) <= 0:
                    pods_exist = False
            if not pods_exist and not (not s.affinity_counts.any_nonzero() and s.self_match):
                return self._affinity
        for t in s.anti_terms:
            v = labels.get(t.topology_key)
            if v is not None and s.anti_counts.get(t.topology_key, v) > 0:
                return self._anti
        if s.existing_anti.positive_pairs(labels):
            return self._existing
        return Status.success()

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        s: _FilterState = state.read(_FILTER_KEY)
        table = snapshot.table
        n = len(slots)
        reasons = np.full(n, -1, dtype=np.int32)
        if s.affinity_terms:
            keys = {t.topology_key for t in s.affinity_terms}
            ok = table.has_all_keys(keys, slots)
            # upstream: with no matching pod anywhere, a pod matching its own terms may
            # start the group (satisfiesSelfAffinityCheck)
            if s.affinity_counts.any_nonzero() or not s.self_match:
                for t in s.affinity_terms:
                    ok &= s.affinity_counts.positive_at(t.topology_key, slots)
            reasons[~ok] = 0
        if s.anti_terms:
            hit = np.zeros(n, dtype=np.bool_)
            for t in s.anti_terms:
                hit |= s.anti_counts.positive_at(t.topology_key, slots)
            reasons[hit & (reasons < 0)] = 1
        if s.existing_anti.arrays:
            hit = np.zeros(n, dtype=np.bool_)
            for k in s.existing_anti.arrays:
                hit |= s.existing_anti.positive_at(k, slots)
            reasons[hit & (reasons < 0)] = 2
        passed = reasons < 0
        return BatchFilterResult(passed, [self._affinity, self._anti, self._existing], reasons)

    # -------------------------------------------------------------- score
    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        has_constraints = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status(Code.SKIP)
        scores = DomainCounts(snapshot.table)
        hit = False
        # the pod's preferred terms against every existing pod (upstream
        # processExistingPod, first two processTerms)
        for multiplier, terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
            for wt in self._resolve_weighted(terms):
                t = wt.term
                slots, n = snapshot.pod_matcher.matching(_own_terms_query((t,)))
                hit |= scores.add_slots(t.topology_key, slots, n * (wt.weight * multiplier))
        # existing pods' terms against the pod: each distinct term matched once, its pods
        # adding the weight at their nodes' domains (the rest of processExistingPod)
        ns_labels = self._ns_labels(pod.namespace)
        hard = self.args.hard_pod_affinity_weight
        terms_of = snapshot.pod_terms
        if hard > 0:
            for (t, _), by_slot in terms_of[REQUIRED_AFFINITY].items():
                if t.matches(pod, ns_labels):
                    hit |= _add_group(scores, t.topology_key, by_slot, hard)
        for kind, sign in ((PREFERRED_AFFINITY, 1), (PREFERRED_ANTI_AFFINITY, -1)):
            for (t, weight), by_slot in terms_of[kind].items():
                if t.matches(pod, ns_labels):
                    hit |= _add_group(scores, t.topology_key, by_slot, weight * sign)
        # upstream: Skip when no term matched a pod on a node carrying its topology key
        if not hit:
            return Status(Code.SKIP)
        state.write(_SCORE_KEY, scores)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        scores: DomainCounts = state.read(_SCORE_KEY)
        labels = view.labels
        total = 0
        for k in scores.topology_keys():
            v = labels.get(k)
            if v is not None:
                total += scores.get(k, v)
        return total, Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        scores: DomainCounts = state.read(_SCORE_KEY)
        total = np.zeros(len(slots), dtype=np.int64)
        for k in scores.arrays:
            total += scores.at(k, slots)
        return total

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, scores: IntArray, slots: IntArray
    ) -> Status:
        if len(scores) == 0:
            return Status.success()
        lo, hi = int(scores.min()), int(scores.max())
        if hi - lo > 0:
            scores[:] = (MAX_NODE_SCORE * ((scores - lo) / (hi - lo))).astype(np.int64)
        else:
            scores[:] = 0
        return Status.success()

    # -------------------------------------------------------------- events
    def events_to_register(self) -> list[ClusterEventWithHint]:
        def pod_changed(pod: PodInfo, old: Any, new: Any) -> Any:
            changed = new if isinstance(new, PodInfo) else old
            if not isinstance(changed, PodInfo):
                return QUEUE
            if changed.has_pod_affinity:
                return QUEUE
            terms = [*pod.required_affinity, *pod.required_anti_affinity]
            terms += [w.term for w in (*pod.preferred_affinity, *pod.preferred_anti_affinity)]
            for t in terms:
                if not t.namespace_selector.match_nothing or t.matches(changed, None):
                    return QUEUE
            return SKIP

        return [
            event(
                EventResource.ASSIGNED_POD,
                ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_POD_LABEL,
                pod_changed,
            ),
            event(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream InterPodAffinity.SignPod: a pod with (anti-)affinity terms is not
        signable; otherwise its labels (existing pods' terms may select it), unless
        ignorePreferredTermsOfExistingPods makes them irrelevant."""
        if (
            pod.required_affinity
            or pod.required_anti_affinity
            or pod.preferred_affinity
            or pod.preferred_anti_affinity
        ):
            return (), Status.unschedulable("pods with InterPodAffinity are not signable")
        if self.args.ignore_preferred_terms_of_existing_pods:
            return (), Status.success()
        return ((signature.LABELS, signature.labels_signer(pod)),), Status.success()


def new(args: InterPodAffinityArgs | None, handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(args or InterPodAffinityArgs(), handle)
