"""Informer events into the cache, the queue and the nominator (upstream's eventhandlers).

Routing rule for pods, the one upstream uses:
- a pod with spec.nodeName (assigned) lives in the cache, whoever bound it: its requests
  count on its node; the queue only hears that "an assigned pod changed" (which may make
  rejected pods schedulable);
- a pod without spec.nodeName, of one of our profiles and not terminating, lives in the
  queue;
- a pod that goes from unassigned to assigned leaves the queue and enters the cache (this
  is how our own binds, and binds by others, are confirmed).
The nominator follows nominatedNodeName on pods of our profiles only, as upstream's does
(its nominator lives in the scheduling queue, which only responsible pods reach:
eventhandlers.go, backend/queue/nominator.go): another scheduler's nomination reserves
nothing here. A nomination is dropped when its pod is bound, deleted or nominated
elsewhere.

No pod the API server stores is dropped: the model reads every pod it can name (see
model.pod), so an assigned pod always counts on its node. A pending pod of ours that this
scheduler must not place (PodInfo.refusal(): parts it cannot read, resource claims, which
need dynamic resource allocation, or a pod group, which needs the gang cycle) never
enters the queue; `on_refused` tells the
pod why (a FailedScheduling event and PodScheduled=False), once per distinct reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from scheduler.cache import Cache, Nominator
from scheduler.framework.cluster_event import ActionType, ClusterEvent, EventResource
from scheduler.model import NodeInfo, PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.queue import SchedulingQueue
from scheduler.queue.events import (
    ASSIGNED_POD_DELETE,
    POD_GROUP_ADD,
    POD_GROUP_DELETE,
    POD_GROUP_UPDATE,
    UNSCHEDULED_POD_ADD,
)

log = logging.getLogger(__name__)

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
NODE_DELETE = ClusterEvent(EventResource.NODE, ActionType.DELETE, "NodeDelete")


def node_update_event(old: NodeInfo, new: NodeInfo) -> ClusterEvent | None:
    """What changed on a node, as one event with every matching action bit set."""
    action = ActionType(0)
    if old.allocatable != new.allocatable:
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.labels != new.labels:
        action |= ActionType.UPDATE_NODE_LABEL
    if old.taints != new.taints or old.unschedulable != new.unschedulable:
        action |= ActionType.UPDATE_NODE_TAINT
    if old.ready != new.ready:
        action |= ActionType.UPDATE_NODE_CONDITION
    if old.images != new.images:
        action |= ActionType.UPDATE_NODE_ANNOTATION
    if not action:
        return None
    return ClusterEvent(EventResource.NODE, action, "NodeUpdate")


def _warn_unreadable(old: NodeInfo | None, new: NodeInfo) -> None:
    """A node with parts the scheduler cannot read takes (almost) no pods (see
    model.node_from_dict): say so once per change, not on every update."""
    if new.problems and (old is None or old.problems != new.problems):
        log.warning(
            "cannot read parts of node=%s, it takes no new pods: %s",
            new.name,
            "; ".join(new.problems),
        )


class NodeEventHandler:
    def __init__(self, cache: Cache, queue: SchedulingQueue[PodInfo]) -> None:
        self.cache = cache
        self.queue = queue

    def on_add(self, node: NodeInfo) -> None:
        _warn_unreadable(None, node)
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff(NODE_ADD, None, node)

    def on_update(self, old: NodeInfo, new: NodeInfo) -> None:
        _warn_unreadable(old, new)
        self.cache.update_node(old, new)
        event = node_update_event(old, new)
        if event is not None:
            self.queue.move_all_to_active_or_backoff(event, old, new)

    def on_delete(self, node: NodeInfo) -> None:
        self.cache.remove_node(node)
        self.queue.move_all_to_active_or_backoff(NODE_DELETE, node, None)


class PodEventHandler:
    def __init__(
        self,
        cache: Cache,
        queue: SchedulingQueue[PodInfo],
        nominator: Nominator,
        scheduler_names: Collection[str],
        on_refused: Callable[[PodInfo, str], None] | None = None,
        *,
        gangs: bool = False,
        dra: bool = False,
        reject_waiting: Callable[[str], bool] = lambda uid: False,
    ) -> None:
        self.cache = cache
        # rejects the pod of this uid if it waits at Permit (True when it did)
        self.reject_waiting = reject_waiting
        # GenericWorkload: members of a PodGroup are queued (and counted in the cache's
        # gang state) instead of refused
        self.gangs = gangs
        self.dra = dra  # the DynamicResourceAllocation gate: pods with claims are taken
        self.queue = queue
        self.nominator = nominator
        self.scheduler_names = frozenset(scheduler_names)
        # tells a pending pod why it will not be placed (event + PodScheduled=False)
        self.on_refused = on_refused

    def responsible_for(self, pod: PodInfo) -> bool:
        return pod.scheduler_name in self.scheduler_names

    def _pending_ours(self, pod: PodInfo) -> bool:
        return not pod.node_name and self.responsible_for(pod) and pod.deletion_timestamp is None

    def _queued(self, pod: PodInfo) -> bool:
        # a terminating pod stays queued, as upstream's (eventhandlers.go
        # updatePodInSchedulingQueue updates it in the queue): when popped it is skipped
        # with upstream's "skip schedule deleting pod" event (loop.schedule_one), and a
        # failed attempt in flight is requeued and told as upstream's is
        return (
            not pod.node_name
            and self.responsible_for(pod)
            and not pod.refusal(gangs=self.gangs, dra=self.dra)
        )

    def _refuse(self, pod: PodInfo, old: PodInfo | None) -> None:
        """Tell the pod why it is refused, unless it was already told the same."""
        reason = pod.refusal(gangs=self.gangs, dra=self.dra)
        if (
            old is not None
            and self._pending_ours(old)
            and old.refusal(gangs=self.gangs, dra=self.dra) == reason
        ):
            return
        log.warning("refusing pod=%s: %s", pod.key, reason)
        if self.on_refused is not None:
            self.on_refused(pod, reason)

    def on_add(self, pod: PodInfo) -> None:
        if self.responsible_for(pod):
            self.nominator.on_pod_add(pod)
        if pod.node_name:
            self.cache.add_pod(pod)
            self.queue.assigned_pod_added(pod)
        elif self._queued(pod):
            self._enqueue(pod)
        elif self._pending_ours(pod):
            self._refuse(pod, None)

    def _enqueue(self, pod: PodInfo) -> None:
        """A new pending pod of ours. A PodGroup member is counted in the cache first,
        then queued, then announced, so a gang waiting for minCount members hears of it
        (upstream eventhandlers.go addPodToSchedulingQueue)."""
        if pod.pod_group:
            self.cache.add_gang_member(pod)
            self.queue.add(pod)
            self.queue.move_all_to_active_or_backoff(UNSCHEDULED_POD_ADD, None, pod)
            return
        self.queue.add(pod)

    def _dequeue(self, pod: PodInfo) -> None:
        self.queue.delete(pod)
        self.cache.remove_gang_member(pod)

    def on_update(self, old: PodInfo, new: PodInfo) -> None:
        if self.responsible_for(new) or self.responsible_for(old):
            self.nominator.on_pod_update(old, new)
        if new.node_name:
            if old.node_name:
                self.cache.update_pod(old, new)
                self.queue.assigned_pod_updated(old, new)
            else:
                # bound since we last saw it (by us or by someone else); a member moves
                # from unscheduled to assigned in its gang state through cache.add_pod
                if self._queued(old):
                    self.queue.delete(old)
                self.cache.add_pod(new)
                self.queue.assigned_pod_added(new)
            return
        if self._queued(new):
            if self._queued(old):
                self.queue.update(old, new)
            else:
                self._enqueue(new)
            return
        if self._queued(old):
            # it became unplaceable while pending
            self._dequeue(old)
        if self._pending_ours(new):
            self._refuse(new, old)

    def _activate_nominees(self, gone: PodInfo) -> None:
        """Beyond upstream: a pod nominated to this node with a higher priority than the
        pod that just left it is waiting for exactly this room (usually a preemptor and
        its victim). Upstream moves it through the queueing hints, which respect its
        backoff, so a preemptor that retried while its victims were still terminating
        waits out a 1-2 s backoff after the room is free. Activating it skips that wait;
        it is tried at once against a cache that no longer holds the victim."""
        waiting = [
            p
            for p in self.nominator.nominated_pods_for_node(gone.node_name)
            if p.priority > gone.priority and self.responsible_for(p)
        ]
        if waiting:
            self.queue.activate(waiting)

    def on_delete(self, pod: PodInfo) -> None:
        if self.responsible_for(pod):
            self.nominator.on_pod_delete(pod)
        if pod.node_name:
            self.cache.remove_pod(pod)
            self.queue.assigned_pod_deleted(pod)
            self._activate_nominees(pod)
        elif self.responsible_for(pod):
            self._dequeue(pod)
            if self.cache.is_assumed(pod):
                self._assumed_pod_deleted(pod)

    def _assumed_pod_deleted(self, pod: PodInfo) -> None:
        """A pod deleted while its binding cycle holds it (upstream eventhandlers.go
        handleAssumedPodDeletion): one waiting at Permit is rejected, and its binding
        task undoes the assumption; any other assumption is dropped now, so its node's
        room is free at once instead of when the bind fails. Either way pods that
        wanted that room are moved."""
        if not self.reject_waiting(pod.uid):
            assumed = self.cache.get_pod(pod.uid)
            if assumed is not None:
                self.cache.forget_pod(assumed)
        self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod, None)


class PodGroupEventHandler:
    """PodGroup informer events (GenericWorkload): the cache's gang state first, then a
    move request, so gated members are checked again (upstream eventhandlers.go)."""

    def __init__(self, cache: Cache, queue: SchedulingQueue[PodInfo]) -> None:
        self.cache = cache
        self.queue = queue

    def on_add(self, pod_group: PodGroupInfo) -> None:
        self.cache.set_pod_group(pod_group)
        self.queue.move_all_to_active_or_backoff(POD_GROUP_ADD, None, pod_group)

    def on_update(self, old: PodGroupInfo, new: PodGroupInfo) -> None:
        self.cache.set_pod_group(new)
        self.queue.move_all_to_active_or_backoff(POD_GROUP_UPDATE, old, new)

    def on_delete(self, pod_group: PodGroupInfo) -> None:
        self.cache.remove_pod_group(pod_group)
        self.queue.move_all_to_active_or_backoff(POD_GROUP_DELETE, pod_group, None)


def raw_pod_summary(raw: Any) -> tuple[str, str, str, str, str]:
    """(namespace, name, uid, schedulerName, nodeName) of a pod we may not be able to
    parse, with '' for whatever is missing."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    spec = raw.get("spec") if isinstance(raw, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    spec = spec if isinstance(spec, dict) else {}

    def s(v: Any) -> str:
        return v if isinstance(v, str) else ""

    return (
        s(meta.get("namespace")),
        s(meta.get("name")),
        s(meta.get("uid")),
        s(spec.get("schedulerName")) or "default-scheduler",
        s(spec.get("nodeName")),
    )
