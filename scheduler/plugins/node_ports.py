"""NodePorts (Filter): a pod's host ports must be free on the node (same protocol and
port conflict when either side binds 0.0.0.0 or both bind the same address)."""

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
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.pod import HostPort, PodInfo
from scheduler.plugins.helpers import QUEUE, SKIP, event

REASON = "node(s) didn't have free ports for the requested pod ports"


def fits_ports(wanted: tuple[HostPort, ...], used: list[HostPort]) -> bool:
    return not any(w.conflicts(u) for w in wanted for u in used)


def _freed_ports(pod: PodInfo, old: Any, new: Any) -> Any:
    gone = old if isinstance(old, PodInfo) else None
    if (
        gone is not None
        and gone.host_ports
        and not fits_ports(pod.host_ports, list(gone.host_ports))
    ):
        return QUEUE
    return SKIP


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions, SignPlugin):
    name = names.NODE_PORTS

    def __init__(self) -> None:
        self._status = Status.unschedulable(REASON, plugin=self.name)

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.host_ports:
            return None, Status(Code.SKIP)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        if not pod.host_ports or fits_ports(pod.host_ports, view.used_ports):
            return Status.success()
        return self._status

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(EventResource.ASSIGNED_POD, ActionType.DELETE, _freed_ports),
            event(EventResource.NODE, ActionType.ADD),
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream NodePorts.SignPod: the pod's host ports."""
        return ((signature.HOST_PORTS, signature.host_ports_signer(pod)),), Status.success()


def new(args: object, handle: Handle) -> NodePorts:
    return NodePorts()
