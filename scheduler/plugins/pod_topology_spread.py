"""PodTopologySpread: DoNotSchedule constraints (Filter) and ScheduleAnyway constraints
(Score), with minDomains, nodeAffinityPolicy / nodeTaintsPolicy, matchLabelKeys (merged
into the selector when the pod record is built) and upstream's system default
constraints (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) when the pod has none,
using the selector of the workload owning it (WorkloadSelectorLister on the handle).

State is kept per constraint as arrays indexed by the topology key's label codes
(count of matching pods per domain, which domains are eligible), so the batch filter is
a gather and a compare; AddPod/RemovePod update the same arrays for dry runs. Matching
pods are counted a group at a time (the snapshot's pod groups: same namespace, labels
and terminating state), so a selector is evaluated once per group, not once per pod.
Upstream: pkg/scheduler/framework/plugins/podtopologyspread/ (filtering.go, scoring.go,
common.go).
Pods counted: same namespace as the incoming pod, not terminating, selector matches; an
empty selector counts none (upstream countPodsMatchSelector returns 0 for
selector.Empty()), while the pod still matches itself. matchLabelKeys merge into the
selector as upstream's mergeLabelSetWithSelector: into an empty selector they make a real
one (the pod's values), into an absent (nil, match-nothing) one they change nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.cache.node_table import BoolArray, NodeTable
from scheduler.cache.node_view import NodeView
from scheduler.cache.pod_matcher import PodQuery
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.config.plugin_args import DEFAULTING_SYSTEM, PodTopologySpreadArgs
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
from scheduler.model.node import LABEL_HOSTNAME, LABEL_ZONE
from scheduler.model.pod import PodInfo
from scheduler.model.pod_spread import (
    DO_NOT_SCHEDULE,
    POLICY_HONOR,
    SCHEDULE_ANYWAY,
    SpreadConstraint,
)
from scheduler.model.selectors import LabelSelector
from scheduler.model.taints import NO_EXECUTE, NO_SCHEDULE, find_untolerated
from scheduler.plugins.helpers import QUEUE, SKIP, event

REASON_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON_CONSTRAINTS + " (missing required label)"
_FILTER_KEY = "PreFilter" + names.POD_TOPOLOGY_SPREAD
_SCORE_KEY = "PreScore" + names.POD_TOPOLOGY_SPREAD
_HARD_TAINTS = frozenset({NO_SCHEDULE, NO_EXECUTE})

SYSTEM_DEFAULT_CONSTRAINTS = (
    SpreadConstraint(3, LABEL_HOSTNAME, SCHEDULE_ANYWAY, LabelSelector.nothing()),
    SpreadConstraint(5, LABEL_ZONE, SCHEDULE_ANYWAY, LabelSelector.nothing()),
)


def _per_slot_counts(snapshot: Snapshot, selector: LabelSelector, namespace: str) -> IntArray:
    """upstream countPodsMatchSelector per node: an EMPTY selector (`labelSelector: {}`,
    labels.Everything() after metav1.LabelSelectorAsSelector) counts no pod at all,
    though it matches the incoming pod itself (selfMatch) and, in AddPod/RemovePod
    (preemption dry runs), the pods added or removed."""
    if selector.is_everything:
        return np.zeros(snapshot.table.capacity, dtype=np.int64)
    # the snapshot's pod matcher answers a group of alike pods (same namespace, labels
    # and terminating state) at a time; terminating pods are not counted
    slots, n = snapshot.pod_matcher.matching(PodQuery((selector,), frozenset((namespace,)), False))
    out: IntArray = np.zeros(snapshot.table.capacity, dtype=np.int64)
    np.add.at(out, slots, n)
    return out


class _Inclusion:
    """Per-node masks for nodeAffinityPolicy / nodeTaintsPolicy, computed on demand."""

    def __init__(self, table: NodeTable, pod: PodInfo, slots: IntArray) -> None:
        self.table, self.pod, self.slots = table, pod, slots
        self._aff: BoolArray | None = None
        self._taints: BoolArray | None = None

    def mask(self, c: SpreadConstraint) -> BoolArray:
        m = np.ones(len(self.slots), dtype=np.bool_)
        if c.node_affinity_policy == POLICY_HONOR:
            if self._aff is None:
                a = np.ones(len(self.slots), dtype=np.bool_)
                if self.pod.node_selector:
                    a &= self.table.match_label_map(self.pod.node_selector, self.slots)
                if self.pod.required_node_affinity is not None:
                    a &= self.table.match_node_selector(self.pod.required_node_affinity, self.slots)
                self._aff = a
            m &= self._aff
        if c.node_taints_policy == POLICY_HONOR:
            if self._taints is None:
                ok = np.array(
                    [find_untolerated(ts, self.pod.tolerations, _HARD_TAINTS) is None
                     for ts in self.table.taint_sets], dtype=np.bool_,
                )  # fmt: skip
                self._taints = ok[self.table.taint_set_id[self.slots]]
            m &= self._taints
        return m


def _included(c: SpreadConstraint, pod: PodInfo, view: NodeView) -> bool:
    node = view.node
    if node is None:
        return False
    if c.node_affinity_policy == POLICY_HONOR and not pod.matches_required_node_affinity(node):
        return False
    return not (
        c.node_taints_policy == POLICY_HONOR
        and find_untolerated(node.taints, pod.tolerations, _HARD_TAINTS) is not None
    )


@dataclass
class _FilterState:
    pod: PodInfo
    constraints: tuple[SpreadConstraint, ...]
    codes: tuple[Mapping[str, int], ...]  # per constraint: value -> code
    counts: list[IntArray]  # per constraint: matching pods per domain code
    eligible: list[BoolArray]  # per constraint: which domain codes are eligible
    self_match: tuple[bool, ...]
    _min: list[int | None]

    def clone(self) -> _FilterState:
        return dataclasses.replace(
            self,
            counts=[c.copy() for c in self.counts],
            eligible=[e.copy() for e in self.eligible],
            _min=list(self._min),
        )

    def min_match(self, i: int) -> int:
        m = self._min[i]
        if m is None:
            elig = self.eligible[i]
            domains = int(elig.sum())
            if domains < self.constraints[i].min_domains:
                m = 0
            else:
                m = int(self.counts[i][elig].min()) if domains else 0
            self._min[i] = m
        return m

    def update_with_pod(self, other: PodInfo, view: NodeView, delta: int) -> None:
        if other.namespace != self.pod.namespace:
            return
        labels = view.labels
        if any(c.topology_key not in labels for c in self.constraints):
            return
        for i, c in enumerate(self.constraints):
            if not _included(c, self.pod, view) or not c.selector.matches(other.labels):
                continue
            code = self.codes[i].get(labels[c.topology_key])
            if code is None or code >= len(self.counts[i]):
                continue
            self.counts[i][code] += delta
            self.eligible[i][code] = True
            self._min[i] = None


@dataclass
class _ScoreState:
    constraints: tuple[SpreadConstraint, ...]
    ignored: BoolArray  # over capacity slots
    per_slot: list[IntArray]  # hostname constraints: matching pods per slot
    per_code: list[IntArray | None]  # other constraints: matching pods per domain code
    weights: list[float]
    snapshot: Snapshot  # the cycle's, for the per-node Score form

    def clone(self) -> _ScoreState:
        return self


class PodTopologySpread(
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
    name = names.POD_TOPOLOGY_SPREAD

    def __init__(self, args: PodTopologySpreadArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._system_defaulted = args.defaulting_type == DEFAULTING_SYSTEM
        self._missing = Status.unresolvable(REASON_MISSING_LABEL, plugin=self.name)
        self._skew = Status.unschedulable(REASON_CONSTRAINTS, plugin=self.name)

    def _constraints(self, pod: PodInfo, when: str) -> tuple[SpreadConstraint, ...]:
        if pod.spread_constraints:
            return tuple(c for c in pod.spread_constraints if c.when_unsatisfiable == when)
        defaults = (
            SYSTEM_DEFAULT_CONSTRAINTS if self._system_defaulted else self.args.default_constraints
        )
        defaults = tuple(c for c in defaults if c.when_unsatisfiable == when)
        if not defaults:
            return ()
        selector = self._handle.workload_selectors.default_selector(pod)
        if selector is None or selector.match_nothing or selector.is_everything:
            return ()
        return tuple(dataclasses.replace(c, selector=selector) for c in defaults)

    # -------------------------------------------------------------- filter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if not constraints:
            return None, Status(Code.SKIP)
        table = snapshot.table
        slots = snapshot.live_slots()
        has_keys = table.has_all_keys({c.topology_key for c in constraints}, slots)
        inclusion = _Inclusion(table, pod, slots)
        codes_maps: list[Mapping[str, int]] = []
        counts: list[IntArray] = []
        eligible: list[BoolArray] = []
        per_slot_cache: dict[LabelSelector, IntArray] = {}
        for c in constraints:
            col = table.labels.get(c.topology_key)
            nvals = len(col.values) if col is not None else 0
            codes_maps.append(col.value_codes if col is not None else {})
            if col is None:
                counts.append(np.zeros(0, dtype=np.int64))
                eligible.append(np.zeros(0, dtype=np.bool_))
                continue
            per_slot = per_slot_cache.get(c.selector)
            if per_slot is None:
                per_slot = _per_slot_counts(snapshot, c.selector, pod.namespace)
                per_slot_cache[c.selector] = per_slot
            elig_nodes = has_keys & inclusion.mask(c)
            node_codes = col.codes[slots][elig_nodes]
            counts.append(
                np.bincount(
                    node_codes, weights=per_slot[slots][elig_nodes], minlength=nvals
                ).astype(np.int64)
            )
            eligible.append(np.bincount(node_codes, minlength=nvals) > 0)
        s = _FilterState(
            pod, constraints, tuple(codes_maps), counts, eligible,
            tuple(c.selector.matches(pod.labels) for c in constraints), [None] * len(constraints),
        )  # fmt: skip
        state.write(_FILTER_KEY, s)
        return None, Status.success()

    def add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, view: NodeView
    ) -> Status:
        s: _FilterState = state.read(_FILTER_KEY)
        s.update_with_pod(pod_to_add, view, 1)
        return Status.success()

    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, view: NodeView
    ) -> Status:
        s: _FilterState = state.read(_FILTER_KEY)
        s.update_with_pod(pod_to_remove, view, -1)
        return Status.success()

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        s: _FilterState = state.read(_FILTER_KEY)
        labels = view.labels
        for i, c in enumerate(s.constraints):
            v = labels.get(c.topology_key)
            if v is None:
                return self._missing
            code = s.codes[i].get(v)
            match = int(s.counts[i][code]) if code is not None and code < len(s.counts[i]) else 0
            if match + int(s.self_match[i]) - s.min_match(i) > c.max_skew:
                return self._skew
        return Status.success()

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        s: _FilterState = state.read(_FILTER_KEY)
        table = snapshot.table
        reasons = np.full(len(slots), -1, dtype=np.int32)
        for i, c in enumerate(s.constraints):
            col = table.labels.get(c.topology_key)
            if col is None:
                reasons[reasons < 0] = 0
                break
            codes = col.codes[slots]
            ext = np.append(s.counts[i], 0)  # code -1 (absent) -> 0
            ext = np.pad(ext, (0, max(0, len(col.values) + 1 - len(ext))))
            match = ext[codes]
            missing = codes < 0
            skewed = match + int(s.self_match[i]) - s.min_match(i) > c.max_skew
            reasons[missing & (reasons < 0)] = 0
            reasons[skewed & ~missing & (reasons < 0)] = 1
        return BatchFilterResult(reasons < 0, [self._missing, self._skew], reasons)

    # -------------------------------------------------------------- score
    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        if snapshot.num_nodes == 0:
            return Status(Code.SKIP)
        constraints = self._constraints(pod, SCHEDULE_ANYWAY)
        if not constraints:
            return Status(Code.SKIP)
        table = snapshot.table
        require_all = bool(pod.spread_constraints) or not self._system_defaulted
        keys = {c.topology_key for c in constraints}
        ignored = np.zeros(table.capacity, dtype=np.bool_)
        if require_all:
            ignored[slots] = ~table.has_all_keys(keys, slots)
        scored = slots[~ignored[slots]]
        live = snapshot.live_slots()
        live_ok = (
            table.has_all_keys(keys, live) if require_all else np.ones(len(live), dtype=np.bool_)
        )
        inclusion = _Inclusion(table, pod, live)
        per_slot_list: list[IntArray] = []
        per_code_list: list[IntArray | None] = []
        weights: list[float] = []
        per_slot_cache: dict[LabelSelector, IntArray] = {}  # read only: shared by constraints
        for c in constraints:
            per_slot = per_slot_cache.get(c.selector)
            if per_slot is None:
                per_slot = _per_slot_counts(snapshot, c.selector, pod.namespace)
                per_slot_cache[c.selector] = per_slot
            per_slot_list.append(per_slot)
            col = table.labels.get(c.topology_key)
            if c.topology_key == LABEL_HOSTNAME:
                per_code_list.append(None)
                weights.append(math.log(len(scored) + 2))
                continue
            if col is None:
                per_code_list.append(np.zeros(1, dtype=np.int64))
                weights.append(math.log(2))
                continue
            nvals = len(col.values)
            all_codes = col.codes
            empty = col.value_codes.get("")
            if empty is not None and not require_all:
                # upstream reads a missing label as "": one domain with nodes labelled ""
                all_codes = np.where(all_codes < 0, empty, all_codes)
            scored_codes = all_codes[scored]
            domains = np.bincount(scored_codes[scored_codes >= 0], minlength=nvals) > 0
            size = int(domains.sum()) + (1 if (scored_codes < 0).any() else 0)
            weights.append(math.log(size + 2))
            elig = live_ok & inclusion.mask(c)
            codes = all_codes[live][elig]
            keep = codes >= 0
            per_code = np.bincount(codes[keep], weights=per_slot[live][elig][keep], minlength=nvals)
            per_code = np.where(domains, per_code, 0).astype(np.int64)
            per_code_list.append(np.append(per_code, 0))
        state.write(
            _SCORE_KEY, _ScoreState(
                constraints, ignored, per_slot_list, per_code_list, weights, snapshot
            )
        )
        return Status.success()

    def _raw_scores(self, s: _ScoreState, table: NodeTable, slots: IntArray) -> IntArray:
        total = np.zeros(len(slots), dtype=np.float64)
        for i, c in enumerate(s.constraints):
            col = table.labels.get(c.topology_key)
            if col is None:
                continue
            codes = col.codes[slots]
            has = codes >= 0
            per_code = s.per_code[i]
            if per_code is None:
                cnt = s.per_slot[i][slots]
            else:
                ext = np.pad(per_code, (0, max(0, len(col.values) + 1 - len(per_code))))
                cnt = ext[codes]
            total += np.where(has, cnt * s.weights[i] + (c.max_skew - 1), 0.0)
        out: IntArray = np.floor(total + 0.5).astype(np.int64)  # Go math.Round (total >= 0)
        return out

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        s: _ScoreState = state.read(_SCORE_KEY)
        snap = s.snapshot
        slot = snap.slot_of(view.name)
        if slot is None or s.ignored[slot]:
            return 0, Status.success()
        return int(
            self._raw_scores(s, snap.table, np.array([slot], dtype=np.int64))[0]
        ), Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        s: _ScoreState = state.read(_SCORE_KEY)
        return self._raw_scores(s, snapshot.table, slots)

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, scores: IntArray, slots: IntArray
    ) -> Status:
        s: _ScoreState = state.read(_SCORE_KEY)
        ignored = s.ignored[slots]
        valid = scores[~ignored]
        if len(valid) == 0:
            scores[:] = 0
            return Status.success()
        lo, hi = int(valid.min()), int(valid.max())
        if hi == 0:
            out = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        else:
            out = MAX_NODE_SCORE * (hi + lo - scores) // hi
        out[ignored] = 0
        scores[:] = out
        return Status.success()

    # -------------------------------------------------------------- events
    def events_to_register(self) -> list[ClusterEventWithHint]:
        def pod_changed(pod: PodInfo, old: Any, new: Any) -> Any:
            changed = new if isinstance(new, PodInfo) else old
            if not isinstance(changed, PodInfo) or not pod.spread_constraints:
                return QUEUE
            if changed.namespace != pod.namespace:
                return SKIP
            for c in pod.spread_constraints:
                if c.selector.matches(changed.labels) or (
                    isinstance(old, PodInfo) and c.selector.matches(old.labels)
                ):
                    return QUEUE
            return SKIP

        return [
            event(
                EventResource.ASSIGNED_POD,
                ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_POD_LABEL,
                pod_changed,
            ),
            event(
                EventResource.NODE,
                ActionType.ADD
                | ActionType.DELETE
                | ActionType.UPDATE_NODE_LABEL
                | ActionType.UPDATE_NODE_TAINT,
            ),
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream PodTopologySpread.SignPod: a pod with its own constraints is not
        signable, and no pod is while the plugin has default constraints (System
        defaulting, upstream's default, always has them)."""
        if pod.spread_constraints:
            return (), Status.unschedulable("pods with topology constraints are not signable")
        if self.args.defaulting_type == DEFAULTING_SYSTEM or self.args.default_constraints:
            return (), Status.unschedulable(
                "pods with default topology constraints are not signable"
            )
        return (), Status.success()


def new(args: PodTopologySpreadArgs | None, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(args or PodTopologySpreadArgs(), handle)
