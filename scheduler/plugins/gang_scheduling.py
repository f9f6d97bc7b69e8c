"""GangScheduling (PreEnqueue, Permit, placement feasibility): all-or-nothing for the
members of a PodGroup with the gang policy (GenericWorkload).

As k8s.io/kubernetes v1.37.2 pkg/scheduler/framework/plugins/gangscheduling/
gangscheduling.go, reading the cache's live member counts (cache/gang_state.py):
- PreEnqueue: a member waits until its PodGroup is known and, for a gang, until the
  scheduler knows minCount members (pending, assumed or bound);
- placement feasibility, asked by the pod-group cycle before and after each member it
  places: Unschedulable once minCount can no longer be reached with the members left to
  try, Wait while it is not yet reached;
- Permit: a member is let through once minCount members are assumed or bound; before
  that it waits (5 minutes, upstream's permitTimeoutDuration) and the one that completes
  the quorum releases its waiting siblings.
A basic group behaves as a gang of minCount 1: nothing waits.
"""

from __future__ import annotations

from typing import Any

from scheduler.cache.gang_state import GangState
from scheduler.config import names
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import EnqueueExtensions, PermitPlugin, PreEnqueuePlugin
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.plugins.helpers import QUEUE, SKIP, event

# gangscheduling.go permitTimeoutDuration
PERMIT_TIMEOUT = 5 * 60.0

WAITING_AT_PERMIT = "waiting for minCount pods from a gang to be scheduled"


def min_count(pod_group: PodGroupInfo) -> int:
    """A basic group's minCount is 1 (gangscheduling.go getMinCount)."""
    return pod_group.min_count if pod_group.is_gang else 1


def placement_feasible(pod_group: PodGroupInfo, scheduled: int, remaining: int) -> Status:
    """gangscheduling.go PlacementFeasible, its words."""
    need = min_count(pod_group)
    if remaining + scheduled < need:
        return Status.unschedulable(
            f"minCount ({need}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining",
            plugin=names.GANG_SCHEDULING,
        )
    if scheduled < need:
        message = (
            f"minCount ({need}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"
        )
        return Status(Code.WAIT, (message,), names.GANG_SCHEDULING)
    return Status.success()


def _same_group(pod: PodInfo, namespace: str, name: str) -> bool:
    return bool(pod.pod_group) and pod.namespace == namespace and pod.pod_group == name


def _pod_added(pod: PodInfo, old: Any, new: Any) -> Any:
    """A new member (pending or bound) may complete the gang's minCount."""
    if isinstance(new, PodInfo) and _same_group(pod, new.namespace, new.pod_group):
        return QUEUE
    return SKIP


def _pod_group_added(pod: PodInfo, old: Any, new: Any) -> Any:
    if isinstance(new, PodGroupInfo) and _same_group(pod, new.namespace, new.name):
        return QUEUE
    return SKIP


def _pod_group_updated(pod: PodInfo, old: Any, new: Any) -> Any:
    """Only a gang whose minCount went down can have become ready."""
    if not (isinstance(old, PodGroupInfo) and isinstance(new, PodGroupInfo)):
        return QUEUE
    if not _same_group(pod, new.namespace, new.name):
        return SKIP
    if not (old.is_gang and new.is_gang) or new.min_count >= old.min_count:
        return SKIP
    return QUEUE


class GangScheduling(PreEnqueuePlugin, PermitPlugin, EnqueueExtensions):
    name = names.GANG_SCHEDULING

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def _gang(self, pod: PodInfo) -> GangState | None:
        return self.handle.gang_lookup(pod.namespace, pod.pod_group)

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.pod_group:
            return Status.success()
        state = self._gang(pod)
        if state is None or state.pod_group is None:
            # upstream's words, "pods's" included (gangscheduling.go PreEnqueue, v1.37.2)
            return Status.unresolvable(
                f'waiting for pods\'s pod group "{pod.pod_group}" to appear in scheduling queue',
                plugin=self.name,
            )
        if not state.pod_group.is_gang:
            return Status.success()
        if state.all_count < state.pod_group.min_count:
            return Status.unresolvable(
                "waiting for minCount pods from a gang to appear in scheduling queue",
                plugin=self.name,
            )
        return Status.success()

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        if not pod.pod_group:
            return Status.success(), 0.0
        gang = self._gang(pod)
        if gang is None or gang.pod_group is None or not gang.pod_group.is_gang:
            return Status.success(), 0.0
        if gang.scheduled_count < gang.pod_group.min_count:
            # the members not yet placed are worth trying now: this one holds a node
            self.handle.activate(gang.unscheduled_pods())
            return Status(Code.WAIT, (WAITING_AT_PERMIT,), self.name), PERMIT_TIMEOUT
        # quorum: release the siblings waiting at Permit
        for uid in gang.assumed:
            if uid != pod.uid:
                waiting = self.handle.waiting_pods.get(uid)
                if waiting is not None:
                    waiting.allow()
        return Status.success(), 0.0

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(EventResource.UNSCHEDULED_POD, ActionType.ADD, _pod_added),
            event(EventResource.ASSIGNED_POD, ActionType.ADD, _pod_added),
            event(EventResource.POD_GROUP, ActionType.ADD, _pod_group_added),
            event(EventResource.POD_GROUP, ActionType.UPDATE, _pod_group_updated),
        ]


def new(args: object, handle: Handle) -> GangScheduling:
    return GangScheduling(handle)
