"""InterPodAffinity: required pod affinity / anti-affinity (Filter), existing pods'
required anti-affinity against the incoming pod (Filter), preferred terms and existing
pods' terms (Score), as upstream.

PreFilter counts, per topology pair (key, value): existing pods matching all of the
pod's affinity terms, existing pods matching each anti-affinity term, and existing pods
whose anti-affinity terms match the pod. Candidate pods come from the snapshot's pod
label index, so a term with matchLabels visits only the pods carrying that label.
The batch filter turns the counts into allowed/forbidden label codes and compares whole
columns; the per-node form reads the same counts (kept right by AddPod/RemovePod).

namespaceSelector: the pod's own terms are resolved against the namespace lister once
per cycle; existing pods' terms are matched with the incoming pod's namespace labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
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

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
_FILTER_KEY = "PreFilter" + names.INTER_POD_AFFINITY
_SCORE_KEY = "PreScore" + names.INTER_POD_AFFINITY

Pair = tuple[str, str]


def _bump(counts: dict[Pair, int], key: str, labels: Mapping[str, str], delta: int) -> None:
    value = labels.get(key)
    if value is None:
        return
    pair = (key, value)
    n = counts.get(pair, 0) + delta
    if n:
        counts[pair] = n
    else:
        counts.pop(pair, None)


def _by_key(counts: Mapping[Pair, int]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for (k, v), c in counts.items():
        if c > 0:
            out.setdefault(k, []).append(v)
    return out


@dataclass
class _FilterState:
    affinity_terms: tuple[AffinityTerm, ...]
    anti_terms: tuple[AffinityTerm, ...]
    ns_labels: Mapping[str, str]
    self_match: bool
    affinity_counts: dict[Pair, int] = field(default_factory=dict)
    anti_counts: dict[Pair, int] = field(default_factory=dict)
    existing_anti: dict[Pair, int] = field(default_factory=dict)

    def clone(self) -> _FilterState:
        return dataclasses.replace(
            self,
            affinity_counts=dict(self.affinity_counts),
            anti_counts=dict(self.anti_counts),
            existing_anti=dict(self.existing_anti),
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
        s = _FilterState(aff, anti, ns_labels, bool(aff) and all(t.matches(pod, None) for t in aff))
        views = snapshot.views
        for slot in snapshot.with_required_anti_affinity:
            view = views[slot]
            if view is None:
                continue
            for p in view.pods.values():
                for t in p.required_anti_affinity:
                    if t.matches(pod, ns_labels):
                        _bump(s.existing_anti, t.topology_key, view.labels, 1)
        if aff:
            for slot, p in snapshot.candidate_pods(aff[0].selector):
                if all(t.matches(p, None) for t in aff):
                    labels = snapshot.view(slot).labels
                    for t in aff:
                        _bump(s.affinity_counts, t.topology_key, labels, 1)
        for t in anti:
            for slot, p in snapshot.candidate_pods(t.selector):
                if t.matches(p, None):
                    _bump(s.anti_counts, t.topology_key, snapshot.view(slot).labels, 1)
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
                if s.affinity_counts.get((t.topology_key, v), 0) <= 0:
                    pods_exist = False
            if not pods_exist and not (not s.affinity_counts and s.self_match):
                return self._affinity
        for t in s.anti_terms:
            v = labels.get(t.topology_key)
            if v is not None and s.anti_counts.get((t.topology_key, v), 0) > 0:
                return self._anti
        for (k, v), c in s.existing_anti.items():
            if c > 0 and labels.get(k) == v:
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
            if s.affinity_counts or not s.self_match:
                allowed = _by_key(s.affinity_counts)
                for t in s.affinity_terms:
                    ok &= self._codes_in(
                        table, t.topology_key, allowed.get(t.topology_key, []), slots
                    )
            reasons[~ok] = 0
        if s.anti_terms:
            forbidden = _by_key(s.anti_counts)
            hit = np.zeros(n, dtype=np.bool_)
            for t in s.anti_terms:
                hit |= self._codes_in(
                    table, t.topology_key, forbidden.get(t.topology_key, []), slots
                )
            reasons[hit & (reasons < 0)] = 1
        if s.existing_anti:
            hit = np.zeros(n, dtype=np.bool_)
            for k, vals in _by_key(s.existing_anti).items():
                hit |= self._codes_in(table, k, vals, slots)
            reasons[hit & (reasons < 0)] = 2
        passed = reasons < 0
        return BatchFilterResult(passed, [self._affinity, self._anti, self._existing], reasons)

    @staticmethod
    def _codes_in(table: Any, key: str, values: list[str], slots: IntArray) -> Any:
        col = table.labels.get(key)
        if col is None or not values:
            return np.zeros(len(slots), dtype=np.bool_)
        codes = [col.value_codes[v] for v in values if v in col.value_codes]
        if not codes:
            return np.zeros(len(slots), dtype=np.bool_)
        return np.isin(col.codes[slots], codes)

    # -------------------------------------------------------------- score
    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        has_constraints = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status(Code.SKIP)
        scores: dict[str, dict[str, int]] = {}

        def add(key: str, labels: Mapping[str, str], weight: int) -> None:
            v = labels.get(key)
            if v is not None:
                by_value = scores.setdefault(key, {})
                by_value[v] = by_value.get(v, 0) + weight

        for multiplier, terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
            for wt in self._resolve_weighted(terms):
                for slot, p in snapshot.candidate_pods(wt.term.selector):
                    if wt.term.matches(p, None):
                        add(
                            wt.term.topology_key, snapshot.view(slot).labels, wt.weight * multiplier
                        )
        ns_labels = self._ns_labels(pod.namespace)
        hard = self.args.hard_pod_affinity_weight
        for slot in snapshot.with_affinity:
            view = snapshot.views[slot]
            if view is None:
                continue
            labels = view.labels
            for p in view.pods.values():
                if not p.has_pod_affinity:
                    continue
                if hard > 0 and labels:
                    for t in p.required_affinity:
                        if t.matches(pod, ns_labels):
                            add(t.topology_key, labels, hard)
                for wt in p.preferred_affinity:
                    if wt.term.matches(pod, ns_labels):
                        add(wt.term.topology_key, labels, wt.weight)
                for wt in p.preferred_anti_affinity:
                    if wt.term.matches(pod, ns_labels):
                        add(wt.term.topology_key, labels, -wt.weight)
        if not scores:
            return Status(Code.SKIP)
        state.write(_SCORE_KEY, scores)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        scores: dict[str, dict[str, int]] = state.read(_SCORE_KEY)
        total = 0
        for k, by_value in scores.items():
            v = view.labels.get(k)
            if v is not None:
                total += by_value.get(v, 0)
        return total, Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        scores: dict[str, dict[str, int]] = state.read(_SCORE_KEY)
        table = snapshot.table
        total = np.zeros(len(slots), dtype=np.int64)
        for k, by_value in scores.items():
            col = table.labels.get(k)
            if col is None:
                continue
            per_code = np.zeros(len(col.values) + 1, dtype=np.int64)  # last: absent (-1)
            for v, sc in by_value.items():
                code = col.value_codes.get(v)
                if code is not None:
                    per_code[code] = sc
            total += per_code[col.codes[slots]]
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
