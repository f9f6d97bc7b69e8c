"""NodeVolumeLimits (upstream framework/plugins/nodevolumelimits/csi.go).

A node's CSINode publishes, per CSI driver, how many volumes it can attach
(allocatable.count). The pod's new unique volumes (driver/handle; an unbound claim
counts as a volume of its class's provisioner) plus the unique volumes of the pods
already on the node plus VolumeAttachments to the node not already counted must stay
within that limit: else "node(s) exceed max volume count" (Unschedulable). With
VolumeLimitScaling (beta, on in 1.37) a driver whose CSIDriver asks for
preventPodSchedulingIfMissing must be on the node's CSINode.

No PreFilter state and no AddPod/RemovePod: Filter counts the pods of the node it is
given, so a preemption dry run without a victim frees the victim's slots by itself.
In-tree volumes are counted only through a class whose in-tree provisioner the node's
CSINode lists as migrated; in-tree PV and inline sources are not translated.
"""

from __future__ import annotations

import secrets
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
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.csi import CSINodeInfo
from scheduler.model.pod import PodInfo
from scheduler.model.volume import PVCInfo
from scheduler.plugins.helpers import QUEUE, SKIP, event
from scheduler.plugins.volume_binder import claim_not_owned
from scheduler.plugins.volume_filtering import FiltersEachNode, pod_claims, pvc_not_found

REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"

# csi-translation-lib: in-tree provisioner -> CSI driver (IsMigratableIntreePluginByName)
IN_TREE_TO_CSI = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}


class _LookupError(Exception):
    def __init__(self, message: str, not_found: bool) -> None:
        super().__init__(message)
        self.not_found = not_found


def _migrated(csi_node: CSINodeInfo | None, plugin: str) -> bool:
    if csi_node is None or not csi_node.migrated_plugins:
        return False
    return plugin in csi_node.migrated_plugins.split(",")


class NodeVolumeLimits(
    FiltersEachNode,
    PreFilterPlugin,
    BatchFilterPlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.NODE_VOLUME_LIMITS

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        # upstream: a random prefix names the volume an unbound claim will get
        self._prefix = secrets.token_hex(16)

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if any(v.claim_name for v in pod.volumes):
            return None, Status.success()
        return None, Status(Code.SKIP)

    def _driver_info(self, csi_node: CSINodeInfo | None, pvc: PVCInfo) -> tuple[str, str]:
        storage = self._handle.storage
        if pvc.volume_name:
            pv = storage.get_pv(pvc.volume_name)
            if pv is not None:
                return (pv.csi_driver, pv.csi_handle) if pv.csi_driver else ("", "")
        if not pvc.storage_class:
            return "", ""
        sc = storage.get_storage_class(pvc.storage_class)
        if sc is None:
            return "", ""
        handle = f"{self._prefix}-{pvc.namespace}/{pvc.name}"
        driver = IN_TREE_TO_CSI.get(sc.provisioner)
        if driver is not None:
            return (driver, handle) if _migrated(csi_node, sc.provisioner) else ("", "")
        return sc.provisioner, handle

    def _attachable(
        self, pod: PodInfo, csi_node: CSINodeInfo | None, new_pod: bool, out: dict[str, str]
    ) -> None:
        storage = self._handle.storage
        for v, pvc in pod_claims(pod, storage):
            if pvc is None:
                if new_pod:
                    raise _LookupError(
                        f"looking up PVC {pod.namespace}/{v.claim_name}: "
                        + pvc_not_found(v.claim_name),
                        True,
                    )
                continue
            if v.ephemeral:
                msg = claim_not_owned(pod, pvc)
                if msg is not None:
                    raise _LookupError(msg, False)
            driver, handle = self._driver_info(csi_node, pvc)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver

    def _driver_installed(self, driver: str, csi_node: CSINodeInfo | None) -> bool:
        obj = self._handle.storage.get_csi_driver(driver)
        if obj is None or not obj.prevent_scheduling_if_missing:
            return True
        return csi_node is not None and driver in csi_node.drivers

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        if not pod.volumes:
            return Status.success()
        csi_node = self._handle.storage.get_csi_node(view.name)
        new: dict[str, str] = {}
        try:
            self._attachable(pod, csi_node, True, new)
        except _LookupError as exc:
            if exc.not_found:
                return Status.unresolvable(str(exc), plugin=self.name)
            return Status.from_error(exc, self.name)
        if not new:
            return Status.success()
        for driver in sorted(set(new.values())):
            if not self._driver_installed(driver, csi_node):
                return Status.unschedulable(
                    f"{driver} CSI driver is not installed on the node", plugin=self.name
                )
        limits = csi_node.limits() if csi_node is not None else {}
        if not limits:
            return Status.success()
        attached: dict[str, str] = {}
        try:
            for other in view.pods.values():
                self._attachable(other, csi_node, False, attached)
        except _LookupError as exc:
            return Status.from_error(exc, self.name)
        counts: dict[str, int] = {}
        for unique, driver in attached.items():
            new.pop(unique, None)
            counts[driver] = counts.get(driver, 0) + 1
        for unique, driver in self._attachments(view.name).items():
            if unique not in attached:
                counts[driver] = counts.get(driver, 0) + 1
        wanted: dict[str, int] = {}
        for driver in new.values():
            wanted[driver] = wanted.get(driver, 0) + 1
        for driver, n in wanted.items():
            limit = limits.get(driver)
            if limit is not None and counts.get(driver, 0) + n > limit:
                return Status.unschedulable(REASON_MAX_VOLUME_COUNT, plugin=self.name)
        return Status.success()

    def _attachments(self, node_name: str) -> dict[str, str]:
        """upstream getNodeVolumeAttachmentInfo: CSI volumes attached to the node."""
        storage = self._handle.storage
        out: dict[str, str] = {}
        for va in storage.volume_attachments_on(node_name):
            if not va.attacher or va.pv_name is None:
                continue
            pv = storage.get_pv(va.pv_name)
            if pv is None or not pv.csi_driver:
                continue
            out[f"{va.attacher}/{pv.csi_handle}"] = va.attacher
        return out

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(EventResource.CSI_NODE, ActionType.ADD),
            event(EventResource.CSI_NODE, ActionType.UPDATE, _csi_node_updated),
            event(EventResource.ASSIGNED_POD, ActionType.DELETE, _assigned_pod_deleted),
            event(EventResource.PVC, ActionType.ADD, _pvc_added),
            event(EventResource.VOLUME_ATTACHMENT, ActionType.DELETE, _attachment_deleted),
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream CSILimits.SignPod: the pod's volume sources."""
        return ((signature.VOLUMES, signature.volumes_signer(pod)),), Status.success()


def _counts(node: CSINodeInfo) -> dict[str, int]:
    return {d: (n or 0) for d, n in node.drivers.items()}


def _csi_node_updated(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, CSINodeInfo) or not isinstance(new, CSINodeInfo):
        return QUEUE
    before = _counts(old)
    return QUEUE if any(n > before.get(d, 0) for d, n in _counts(new).items()) else SKIP


def _assigned_pod_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    deleted = old if isinstance(old, PodInfo) else new
    if not isinstance(deleted, PodInfo) or not deleted.volumes:
        return SKIP
    if not deleted.node_name and not deleted.nominated_node_name:
        return SKIP
    return QUEUE if any(v.claim_name for v in deleted.volumes) else SKIP


def _pvc_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, PVCInfo) or new.namespace != pod.namespace:
        return SKIP
    return QUEUE if any(v.claim_name == new.name for v in pod.volumes) else SKIP


def _attachment_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    return QUEUE if any(v.claim_name and not v.ephemeral for v in pod.volumes) else SKIP


def new(args: Any, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle)


__all__ = ["REASON_MAX_VOLUME_COUNT", "NodeVolumeLimits", "new"]
