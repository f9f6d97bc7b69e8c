"""NodeAffinity: nodeSelector, required node affinity and the profile's addedAffinity
(Filter, UnschedulableAndUnresolvable); preferred terms (Score). PreFilter narrows the
candidates when every required term pins metadata.name.

Terms that do not parse (model.selectors): a required term matches no node and the
other ORed terms still decide (upstream's LazyErrorNodeSelector; Filter ignores the
error). Preferred terms are all-or-nothing, as upstream's NewPreferredSchedulingTerms:
one bad term makes PreScore fail with the parse error, so a pod with more than one
feasible node gets a scheduler error (SchedulerError), and one with a single feasible
node is placed there without scoring (upstream skips scoring then)."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.config.args import NodeAffinityArgs
from scheduler.framework import signature
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    BatchFilterPlugin,
    BatchFilterResult,
    BatchScorePlugin,
    EnqueueExtensions,
    IntArray,
    NodePodsIndependentFilter,
    NormalizeScorePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.node import NodeInfo
from scheduler.model.pod import PodInfo
from scheduler.plugins.helpers import QUEUE, SKIP, default_normalize, event

REASON_POD = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
# every required term pins metadata.name, and the pinned sets leave no node (upstream
# errReasonConflict)
REASON_CONFLICT = "pod affinity terms conflict"
_PRESCORE_KEY = "PreScore" + names.NODE_AFFINITY


class NodeAffinity(
    PreFilterPlugin,
    BatchFilterPlugin,
    NodePodsIndependentFilter,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    NormalizeScorePlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.NODE_AFFINITY

    def __init__(self, args: NodeAffinityArgs) -> None:
        self.args = args
        self._pod_status = Status.unresolvable(REASON_POD, plugin=self.name)
        self._enforced_status = Status.unresolvable(REASON_ENFORCED, plugin=self.name)

    def _matches_added(self, node: NodeInfo) -> bool:
        sel = self.args.added_required
        return sel is None or sel.matches(node.labels, node.name)

    # -------------------------------------------------------------- filter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if (
            not pod.node_selector
            and pod.required_node_affinity is None
            and (self.args.added_required is None)
        ):
            return None, Status(Code.SKIP)
        if pod.required_node_affinity is not None:
            pinned = pod.required_node_affinity.node_names()
            if pinned is not None and not pinned:
                # upstream: every term's matchFields names intersect to nothing
                return None, Status.unresolvable(REASON_CONFLICT, plugin=self.name)
            if pinned is not None:
                return PreFilterResult(pinned), Status.success()
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        node = view.node
        if node is None:
            return Status.success()
        if not self._matches_added(node):
            return self._enforced_status
        if not pod.matches_required_node_affinity(node):
            return self._pod_status
        return Status.success()

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        table = snapshot.table
        n = len(slots)
        added = (
            table.match_node_selector(self.args.added_required, slots)
            if self.args.added_required is not None
            else np.ones(n, dtype=np.bool_)
        )
        own = np.ones(n, dtype=np.bool_)
        if pod.node_selector:
            own &= table.match_label_map(pod.node_selector, slots)
        if pod.required_node_affinity is not None:
            own &= table.match_node_selector(pod.required_node_affinity, slots)
        passed = added & own
        reasons = np.where(added, 1, 0).astype(np.int32)
        return BatchFilterResult(passed, [self._enforced_status, self._pod_status], reasons)

    # -------------------------------------------------------------- score
    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        if pod.preferred_node_affinity_error:
            # upstream PreScore: fwk.AsStatus(err) of getPodPreferredNodeAffinity
            return Status(Code.ERROR, (pod.preferred_node_affinity_error,), self.name)
        terms = (*pod.preferred_node_affinity, *self.args.added_preferred)
        if not terms:
            return Status(Code.SKIP)
        state.write(_PRESCORE_KEY, terms)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        total = 0
        for t in state.read(_PRESCORE_KEY):
            if t.term.matches(view.labels, view.name):
                total += t.weight
        return total, Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        out = np.zeros(len(slots), dtype=np.int64)
        for t in state.read(_PRESCORE_KEY):
            out += snapshot.table.match_node_selector_term(t.term, slots) * t.weight
        return out

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, scores: IntArray, slots: IntArray
    ) -> Status:
        return default_normalize(scores)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        def hint(pod: PodInfo, old: Any, new: Any) -> Any:
            if (
                isinstance(new, NodeInfo)
                and self._matches_added(new)
                and (pod.matches_required_node_affinity(new))
            ):
                return QUEUE
            return SKIP

        return [event(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL, hint)]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream NodeAffinity.SignPod: the pod's node affinity and nodeSelector."""
        return (
            (signature.NODE_AFFINITY, signature.node_affinity_signer(pod)),
            (signature.NODE_SELECTOR, signature.sorted_mapping(pod.node_selector)),
        ), Status.success()


def new(args: NodeAffinityArgs | None, handle: Handle) -> NodeAffinity:
    return NodeAffinity(args or NodeAffinityArgs())
