"""VolumeZone (upstream framework/plugins/volumezone/volume_zone.go).

A bound PV labelled with a zone or region (topology.kubernetes.io/{zone,region} or
their failure-domain.beta forms; several zones joined by "__") can only be used on a
node carrying one of those values: else "node(s) had no available volume zone"
(UnschedulableAndUnresolvable). A node without any zone/region label passes. Unbound
claims of WaitForFirstConsumer classes are VolumeBinding's business and skipped here;
other unbound claims, missing claims, classes or PVs reject the pod at PreFilter.
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
    NodePodsIndependentFilter,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo
from scheduler.model.volume import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    PVInfo,
    StorageClassInfo,
)
from scheduler.plugins.helpers import QUEUE, SKIP, event
from scheduler.plugins.volume_filtering import (
    FiltersEachNode,
    pod_claims,
    pvc_not_found,
    pvc_of_pod_changed,
)

REASON_CONFLICT = "node(s) had no available volume zone"
_STATE_KEY = "PreFilter" + names.VOLUME_ZONE

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)  # upstream's order
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
MULTI_ZONE_DELIMITER = "__"  # cloud-provider volume.LabelMultiZoneDelimiter


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def pv_topologies(pv: PVInfo) -> tuple[PVTopology, ...]:
    out: list[PVTopology] = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
        if any(not z for z in zones):  # upstream LabelZonesToSet fails: label ignored
            continue
        out.append(PVTopology(pv.name, key, frozenset(zones)))
    return tuple(out)


class VolumeZone(
    FiltersEachNode,
    PreFilterPlugin,
    BatchFilterPlugin,
    NodePodsIndependentFilter,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.VOLUME_ZONE

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._conflict = Status.unresolvable(REASON_CONFLICT, plugin=self.name)

    def _fail(self, msg: str) -> tuple[tuple[PVTopology, ...], Status]:
        return (), Status.unresolvable(msg, plugin=self.name)

    def _topologies(self, pod: PodInfo) -> tuple[tuple[PVTopology, ...], Status]:
        storage = self._handle.storage
        out: list[PVTopology] = []
        for v, pvc in pod_claims(pod, storage, ephemeral=False):
            if pvc is None:
                return self._fail(pvc_not_found(v.claim_name))
            if not pvc.volume_name:
                if not pvc.storage_class:
                    return self._fail("PersistentVolumeClaim had no pv name and storageClass name")
                sc = storage.get_storage_class(pvc.storage_class)
                if sc is None:
                    return self._fail(
                        f'storageclass.storage.k8s.io "{pvc.storage_class}" not found'
                    )
                if sc.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
                    continue
                return self._fail("PersistentVolume had no name")
            pv = storage.get_pv(pvc.volume_name)
            if pv is None:
                return self._fail(f'persistentvolume "{pvc.volume_name}" not found')
            out.extend(pv_topologies(pv))
        return tuple(out), Status.success()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        topologies, st = self._topologies(pod)
        if not st.ok:
            return None, st
        if not topologies:
            return None, Status(Code.SKIP)
        state.write(_STATE_KEY, topologies)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        if not pod.volumes:
            return Status.success()
        topologies: tuple[PVTopology, ...] | None = state.get(_STATE_KEY)
        if topologies is None:
            topologies, st = self._topologies(pod)
            if not st.ok:
                return st
        labels = view.labels
        if not any(k in labels for k in TOPOLOGY_LABELS):
            return Status.success()
        for t in topologies:
            value = labels.get(t.key)
            if value is None:
                value = labels.get(_GA.get(t.key, t.key))
            if value is None or value not in t.values:
                return self._conflict
        return Status.success()

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(EventResource.STORAGE_CLASS, ActionType.ADD, _sc_added),
            event(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
            event(EventResource.PVC, ActionType.ADD | ActionType.UPDATE, pvc_of_pod_changed),
            event(EventResource.PV, ActionType.ADD | ActionType.UPDATE, _pv_changed),
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream VolumeZone.SignPod: the pod's volume sources."""
        return ((signature.VOLUMES, signature.volumes_signer(pod)),), Status.success()


def _sc_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, StorageClassInfo):
        return QUEUE
    return QUEUE if new.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER else SKIP


def _pv_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, PVInfo) or not isinstance(new, PVInfo):
        return QUEUE
    return QUEUE if pv_topologies(old) != pv_topologies(new) else SKIP


def new(args: Any, handle: Handle) -> VolumeZone:
    return VolumeZone(handle)
