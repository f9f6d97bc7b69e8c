"""TaintToleration: Filter rejects nodes with an untolerated NoSchedule/NoExecute taint
(UnschedulableAndUnresolvable, "node(s) had untolerated taint(s)" without naming the
taint, as upstream v1.37 tainttoleration/taint_toleration.go); Score counts untolerated
PreferNoSchedule taints (tolerations with effect "" or PreferNoSchedule only), reverse
DefaultNormalizeScore.

Batch form: the table interns each node's taint tuple, so tolerations are evaluated
once per distinct taint set and gathered onto the nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
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
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Status
from scheduler.model.node import NodeInfo
from scheduler.model.pod import PodInfo
from scheduler.model.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    find_untolerated,
    tolerates,
)
from scheduler.plugins.helpers import QUEUE, SKIP, default_normalize, event

_HARD = frozenset({NO_SCHEDULE, NO_EXECUTE})


REASON = "node(s) had untolerated taint(s)"


def _node_tolerated(pod: PodInfo, old: Any, new: Any) -> Any:
    if isinstance(new, NodeInfo) and find_untolerated(new.taints, pod.tolerations, _HARD) is None:
        return QUEUE
    return SKIP


def _pod_toleration_changed(pod: PodInfo, old: Any, new: Any) -> Any:
    return QUEUE if isinstance(new, PodInfo) and new.uid == pod.uid else SKIP


def _prefer_count(taints: tuple[Taint, ...], pod: PodInfo) -> int:
    tols = tuple(t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))
    return sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerates(tols, t))


class TaintToleration(
    BatchFilterPlugin,
    NodePodsIndependentFilter,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    NormalizeScorePlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.TAINT_TOLERATION

    def __init__(self) -> None:
        self._status = Status.unresolvable(REASON, plugin=self.name)

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        if find_untolerated(view.taints, pod.tolerations, _HARD) is None:
            return Status.success()
        return self._status

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        table = snapshot.table
        if len(table.taint_sets) == 1:  # only the empty set
            return BatchFilterResult.all_pass(len(slots))
        tolerated = np.array(
            [find_untolerated(ts, pod.tolerations, _HARD) is None for ts in table.taint_sets],
            dtype=np.bool_,
        )
        if tolerated.all():
            return BatchFilterResult.all_pass(len(slots))
        return BatchFilterResult(tolerated[table.taint_set_id[slots]], [self._status])

    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        return _prefer_count(view.taints, pod), Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        table = snapshot.table
        per_set = np.array([_prefer_count(ts, pod) for ts in table.taint_sets], dtype=np.int64)
        out: IntArray = per_set[table.taint_set_id[slots]]
        return out

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, scores: IntArray, slots: IntArray
    ) -> Status:
        return default_normalize(scores, reverse=True)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(
                EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT, _node_tolerated
            ),
            event(
                EventResource.UNSCHEDULED_POD,
                ActionType.UPDATE_POD_TOLERATION,
                _pod_toleration_changed,
            ),
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream TaintToleration.SignPod: the pod's tolerations."""
        return ((signature.TOLERATIONS, signature.tolerations_signer(pod)),), Status.success()


def new(args: object, handle: Handle) -> TaintToleration:
    return TaintToleration()
