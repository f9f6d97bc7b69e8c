"""NodeName (Filter): a pod with spec.nodeName fits only that node."""

from __future__ import annotations

from typing import Any

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
from scheduler.plugins.helpers import QUEUE, SKIP, event

REASON = "node(s) didn't match the requested node name"


def _named_node_added(pod: PodInfo, old: Any, new: Any) -> Any:
    return QUEUE if isinstance(new, NodeInfo) and new.name == pod.node_name else SKIP


class NodeName(BatchFilterPlugin, NodePodsIndependentFilter, EnqueueExtensions, SignPlugin):
    name = names.NODE_NAME

    def __init__(self) -> None:
        self._status = Status.unresolvable(REASON, plugin=self.name)

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        if not pod.node_name or pod.node_name == view.name:
            return Status.success()
        return self._status

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        if not pod.node_name:
            return BatchFilterResult.all_pass(len(slots))
        slot = snapshot.slot_of(pod.node_name)
        return BatchFilterResult(slots == (-1 if slot is None else slot), [self._status])

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [event(EventResource.NODE, ActionType.ADD, _named_node_added)]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream NodeName.SignPod: the pod's spec.nodeName."""
        return ((signature.NODE_NAME, pod.node_name),), Status.success()


def new(args: object, handle: Handle) -> NodeName:
    return NodeName()
