"""TaintToleration: Filter rejects nodes with an untolerated NoSchedule/NoExecute taint
(UnschedulableAndUnresolvable); Score prefers nodes with fewer untolerated
PreferNoSchedule taints (reverse-normalized).

Batch form: the table interns each node's taint tuple, so tolerations are evaluated
once per distinct taint set and gathered onto the nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import BatchFilterResult, IntArray
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


def reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def _node_tolerated(pod: PodInfo, old: Any, new: Any) -> Any:
    if isinstance(new, NodeInfo) and find_untolerated(new.taints, pod.tolerations, _HARD) is None:
        return QUEUE
    return SKIP


def _pod_toleration_changed(pod: PodInfo, old: Any, new: Any) -> Any:
    return QUEUE if isinstance(new, PodInfo) and new.uid == pod.uid else SKIP


def _prefer_count(taints: tuple[Taint, ...], pod: PodInfo) -> int:
    tols = tuple(t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))
    return sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerates(tols, t))


class TaintToleration:
    name = names.TAINT_TOLERATION

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        taint = find_untolerated(view.taints, pod.tolerations, _HARD)
        if taint is None:
            return Status.success()
        return Status.unresolvable(reason(taint), plugin=self.name)

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        table = snapshot.table
        if len(table.taint_sets) == 1:  # only the empty set
            return BatchFilterResult.all_pass(len(slots))
        statuses: list[Status] = []
        code_of_set = np.full(len(table.taint_sets), -1, dtype=np.int32)
        by_reason: dict[str, int] = {}
        for i, ts in enumerate(table.taint_sets):
            taint = find_untolerated(ts, pod.tolerations, _HARD)
            if taint is not None:
                r = reason(taint)
                code = by_reason.get(r)
                if code is None:
                    code = len(statuses)
                    by_reason[r] = code
                    statuses.append(Status.unresolvable(r, plugin=self.name))
                code_of_set[i] = code
        if not statuses:
            return BatchFilterResult.all_pass(len(slots))
        codes = code_of_set[table.taint_set_id[slots]]
        return BatchFilterResult(codes < 0, statuses, codes)

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


def new(args: object, handle: Handle) -> TaintToleration:
    return TaintToleration()
