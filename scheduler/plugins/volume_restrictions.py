"""VolumeRestrictions (upstream framework/plugins/volumerestrictions/volume_restrictions.go).

- Inline disks that cannot be shared: a GCE PD or an iSCSI/RBD disk already used by a
  pod on the node (unless both uses are read-only), an AWS EBS volume at all ->
  "node(s) had no available disk" (Unschedulable).
- A ReadWriteOncePod claim already used by any pod in the cluster ->
  Unschedulable on every node; preemption can free it, which is why this plugin keeps
  its PreFilter count right through AddPod/RemovePod (the only volume plugin that does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.framework import signature
from scheduler.framework.cluster_event import (
    ActionType,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    BatchFilterPlugin,
    EnqueueExtensions,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo
from scheduler.model.volume import READ_WRITE_ONCE_POD
from scheduler.plugins.helpers import QUEUE, SKIP, event
from scheduler.plugins.volume_filtering import (
    FiltersEachNode,
    pod_claims,
    pvc_not_found,
    pvc_of_pod_changed,
)

REASON_DISK_CONFLICT = "node(s) had no available disk"
REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
_STATE_KEY = "PreFilter" + names.VOLUME_RESTRICTIONS


@dataclass
class _State:
    rwop_claims: frozenset[str]  # claim names (the pod's namespace)
    conflicting_refs: int  # pods in the cluster using one of them

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicting_refs)

    def refs_of(self, other: PodInfo) -> int:
        # upstream compares claim names only (not namespaces)
        return sum(
            1
            for v in other.volumes
            if v.claim_name and not v.ephemeral and v.claim_name in self.rwop_claims
        )


def _pvc_keys_in_use(snapshot: Snapshot) -> set[str]:
    """upstream StorageInfos().IsPVCUsedByPods: claims of every pod on a node."""
    used: set[str] = set()
    for view in snapshot.node_views():
        for p in view.pods.values():
            for v in p.volumes:
                if v.claim_name and not v.ephemeral:
                    used.add(f"{p.namespace}/{v.claim_name}")
    return used


class VolumeRestrictions(
    FiltersEachNode,
    PreFilterPlugin,
    PreFilterExtensions,
    BatchFilterPlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.VOLUME_RESTRICTIONS

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._disk_conflict = Status(Code.UNSCHEDULABLE, (REASON_DISK_CONFLICT,), self.name)
        self._rwop_conflict = Status(Code.UNSCHEDULABLE, (REASON_RWOP_CONFLICT,), self.name)

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        needs_check = any(v.disk is not None for v in pod.volumes)
        rwop: set[str] = set()
        for v, pvc in pod_claims(pod, self._handle.storage, ephemeral=False):
            if pvc is None:
                return None, Status.unresolvable(pvc_not_found(v.claim_name), plugin=self.name)
            if READ_WRITE_ONCE_POD in pvc.access_modes:
                rwop.add(pvc.name)
        refs = 0
        if rwop:
            used = _pvc_keys_in_use(snapshot)
            refs = sum(1 for name in rwop if f"{pod.namespace}/{name}" in used)
        if not needs_check and refs == 0:
            return None, Status(Code.SKIP)
        state.write(_STATE_KEY, _State(frozenset(rwop), refs))
        return None, Status.success()

    def add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, view: NodeView
    ) -> Status:
        s: _State | None = state.get(_STATE_KEY)
        if s is not None:
            s.conflicting_refs += s.refs_of(pod_to_add)
        return Status.success()

    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, view: NodeView
    ) -> Status:
        s: _State | None = state.get(_STATE_KEY)
        if s is not None:
            s.conflicting_refs -= s.refs_of(pod_to_remove)
        return Status.success()

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        if not _disks_free(pod, view.pods.values()):
            return self._disk_conflict
        s: _State | None = state.get(_STATE_KEY)
        if s is None:
            return Status.from_error(
                RuntimeError(f'cannot read "{_STATE_KEY}" from cycleState'), self.name
            )
        if s.conflicting_refs > 0:
            return self._rwop_conflict
        return Status.success()

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(EventResource.ASSIGNED_POD, ActionType.DELETE, _assigned_pod_deleted),
            event(EventResource.NODE, ActionType.ADD),
            event(EventResource.PVC, ActionType.ADD, pvc_of_pod_changed),
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream VolumeRestrictions.SignPod: the pod's volume sources."""
        return ((signature.VOLUMES, signature.volumes_signer(pod)),), Status.success()


def _disks_free(pod: PodInfo, others: Any) -> bool:
    disks = [v.disk for v in pod.volumes if v.disk is not None]
    if not disks:
        return True
    for other in others:
        for ov in other.volumes:
            if ov.disk is None:
                continue
            if any(d.conflicts(ov.disk) for d in disks):
                return False
    return True


def _assigned_pod_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    deleted = old if isinstance(old, PodInfo) else new
    if not isinstance(deleted, PodInfo) or deleted.namespace != pod.namespace:
        return SKIP
    if not _disks_free(pod, [deleted]):
        return QUEUE
    mine = {v.claim_name for v in pod.volumes if v.claim_name and not v.ephemeral}
    theirs = {v.claim_name for v in deleted.volumes if v.claim_name and not v.ephemeral}
    return QUEUE if mine & theirs else SKIP


def new(args: Any, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)
