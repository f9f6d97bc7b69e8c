"""NodeUnschedulable (Filter): spec.unschedulable nodes take only pods tolerating the
node.kubernetes.io/unschedulable:NoSchedule taint."""

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
    EnqueueExtensions,
    IntArray,
    NodePodsIndependentFilter,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Status
from scheduler.model.node import NodeInfo
from scheduler.model.pod import PodInfo
from scheduler.model.taints import NO_SCHEDULE, TAINT_NODE_UNSCHEDULABLE, Taint, tolerates
from scheduler.plugins.helpers import QUEUE, SKIP, event

REASON = "node(s) were unschedulable"
_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", NO_SCHEDULE)


def _tolerated(pod: PodInfo) -> bool:
    return tolerates(pod.tolerations, _TAINT)


def _node_became_schedulable(pod: PodInfo, old: Any, new: Any) -> Any:
    if isinstance(new, NodeInfo) and (not new.unschedulable or _tolerated(pod)):
        return QUEUE
    return SKIP


class NodeUnschedulable(
    BatchFilterPlugin, NodePodsIndependentFilter, EnqueueExtensions, SignPlugin
):
    name = names.NODE_UNSCHEDULABLE

    def __init__(self) -> None:
        self._status = Status.unresolvable(REASON, plugin=self.name)

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        node = view.node
        if node is None or not node.unschedulable or _tolerated(pod):
            return Status.success()
        return self._status

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        if _tolerated(pod):
            return BatchFilterResult.all_pass(len(slots))
        return BatchFilterResult(
            np.logical_not(snapshot.table.unschedulable[slots]), [self._status]
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(
                EventResource.NODE,
                ActionType.ADD | ActionType.UPDATE_NODE_TAINT,
                _node_became_schedulable,
            )
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream NodeUnschedulable.SignPod: the pod's tolerations."""
        return ((signature.TOLERATIONS, signature.tolerations_signer(pod)),), Status.success()


def new(args: object, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()
