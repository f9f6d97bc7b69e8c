"""What plugins may reach outside themselves (upstream framework.Handle): listers, the
binder, the nominated pods (read only), the pods waiting at Permit, and activate(pods).

Nothing on the Handle changes from cycle to cycle: the cycle's snapshot is handed to
each extension point as an argument, and nominations are written by the scheduling loop
alone (plugins return what to nominate in their PostFilterResult).

The client layer builds informers and provides objects satisfying the lister
Protocols; `InMemoryListers` is a dict-backed implementation for tests and for
wiring informer stores.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from scheduler.cache.gang_state import GangState
from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.framework.nominated_pods import NominatedPods as NominatedPods  # re-exported
from scheduler.framework.waiting_pods import WaitingPods
from scheduler.model.csi import (
    CSIDriverInfo,
    CSINodeInfo,
    CSIStorageCapacityInfo,
    VolumeAttachmentInfo,
)
from scheduler.model.namespace import NamespaceInfo
from scheduler.model.node import NodeInfo
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import LabelSelector
from scheduler.model.volume import PVCInfo, PVInfo, StorageClassInfo

if TYPE_CHECKING:
    from scheduler.framework.filter_runner import FilterRunner


class NamespaceLister(Protocol):
    def get_namespace(self, name: str) -> NamespaceInfo | None: ...
    def list_namespaces(self) -> Iterable[NamespaceInfo]: ...


class PVCLister(Protocol):
    def get_pvc(self, namespace: str, name: str) -> PVCInfo | None: ...


class PVLister(Protocol):
    def get_pv(self, name: str) -> PVInfo | None: ...


class StorageClassLister(Protocol):
    def get_storage_class(self, name: str) -> StorageClassInfo | None: ...


class StorageLister(PVCLister, PVLister, StorageClassLister, Protocol):
    """Everything the volume plugins read (PVs and PVCs also listed, CSI objects)."""

    def list_pvs(self) -> Iterable[PVInfo]: ...
    def get_csi_node(self, name: str) -> CSINodeInfo | None: ...
    def get_csi_driver(self, name: str) -> CSIDriverInfo | None: ...
    def list_csi_storage_capacities(self) -> Iterable[CSIStorageCapacityInfo]: ...
    def volume_attachments_on(self, node_name: str) -> Iterable[VolumeAttachmentInfo]: ...


class VolumeAPI(Protocol):
    """The writes VolumeBinding's PreBind makes (upstream: PersistentVolumes().Update,
    PersistentVolumeClaims().Update). Each returns the object as stored."""

    async def update_pv(self, raw: Mapping[str, Any]) -> dict[str, Any]: ...
    async def update_pvc(self, raw: Mapping[str, Any]) -> dict[str, Any]: ...


class ResourceClaimAPI(Protocol):
    """The calls DynamicResources' PreBind makes (upstream: ResourceClaims().Get, Update,
    UpdateStatus; for extended resources backed by DRA also Create and Delete, and the
    pod's status patch). Each returns the object as stored."""

    async def get_resource_claim(self, namespace: str, name: str) -> dict[str, Any]: ...
    async def update_resource_claim(self, raw: Mapping[str, Any]) -> dict[str, Any]: ...
    async def update_resource_claim_status(self, raw: Mapping[str, Any]) -> dict[str, Any]: ...
    async def unreserve_resource_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> dict[str, Any]: ...
    async def create_resource_claim(self, raw: Mapping[str, Any]) -> dict[str, Any]: ...
    async def delete_resource_claim(self, namespace: str, name: str) -> dict[str, Any]: ...
    async def patch_pod_status(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]: ...


class WorkloadSelectorLister(Protocol):
    """For PodTopologySpread's system default constraints: the selector of the
    services / replica sets / stateful sets / replication controllers selecting the pod
    (upstream helper.DefaultSelector); None when there is none."""

    def default_selector(self, pod: PodInfo) -> LabelSelector | None: ...


# bind(pod, node_name): performs the API call; raises on failure
Binder = Callable[[PodInfo, str], Awaitable[None]]


class PodActivator(Protocol):
    """Moves pods to activeQ now (upstream PodActivator; the scheduling queue is one)."""

    def activate(self, pods: Iterable[PodInfo], /) -> None: ...


class _NoNominations:
    def nominated_pods_for_node(self, node_name: str, /) -> Iterable[PodInfo]:
        return ()

    def nominated_node(self, pod: PodInfo, /) -> str | None:
        return None

    def nodes_with_nominations(self) -> Mapping[str, Mapping[str, PodInfo]]:
        return {}


class _NoActivator:
    def activate(self, pods: Iterable[PodInfo], /) -> None:
        raise RuntimeError("no pod activator set on the framework handle")


class InMemoryListers:
    """Dict-backed listers (tests; informer stores can feed it through the setters)."""

    def __init__(self) -> None:
        self.namespaces: dict[str, NamespaceInfo] = {}
        self.pvcs: dict[str, PVCInfo] = {}
        self.pvs: dict[str, PVInfo] = {}
        self.storage_classes: dict[str, StorageClassInfo] = {}
        self.selectors: dict[str, LabelSelector] = {}  # pod key -> default selector
        self.csi_nodes: dict[str, CSINodeInfo] = {}
        self.csi_drivers: dict[str, CSIDriverInfo] = {}
        self.csi_capacities: dict[str, CSIStorageCapacityInfo] = {}  # "ns/name"
        self.volume_attachments: dict[str, VolumeAttachmentInfo] = {}

    def set_namespace(self, ns: NamespaceInfo) -> None:
        self.namespaces[ns.name] = ns

    def set_pvc(self, pvc: PVCInfo) -> None:
        self.pvcs[pvc.key] = pvc

    def set_pv(self, pv: PVInfo) -> None:
        self.pvs[pv.name] = pv

    def set_storage_class(self, sc: StorageClassInfo) -> None:
        self.storage_classes[sc.name] = sc

    def set_csi_node(self, obj: CSINodeInfo) -> None:
        self.csi_nodes[obj.name] = obj

    def set_csi_driver(self, obj: CSIDriverInfo) -> None:
        self.csi_drivers[obj.name] = obj

    def set_csi_storage_capacity(self, obj: CSIStorageCapacityInfo) -> None:
        self.csi_capacities[obj.key] = obj

    def set_volume_attachment(self, obj: VolumeAttachmentInfo) -> None:
        self.volume_attachments[obj.name] = obj

    def list_pvs(self) -> Iterable[PVInfo]:
        return list(self.pvs.values())

    def get_csi_node(self, name: str) -> CSINodeInfo | None:
        return self.csi_nodes.get(name)

    def get_csi_driver(self, name: str) -> CSIDriverInfo | None:
        return self.csi_drivers.get(name)

    def list_csi_storage_capacities(self) -> Iterable[CSIStorageCapacityInfo]:
        return list(self.csi_capacities.values())

    def volume_attachments_on(self, node_name: str) -> Iterable[VolumeAttachmentInfo]:
        # attachments are few (one per attached volume); a scan is cheaper than an index
        return [a for a in self.volume_attachments.values() if a.node_name == node_name]

    def get_namespace(self, name: str) -> NamespaceInfo | None:
        return self.namespaces.get(name)

    def list_namespaces(self) -> Iterable[NamespaceInfo]:
        return list(self.namespaces.values())

    def get_pvc(self, namespace: str, name: str) -> PVCInfo | None:
        return self.pvcs.get(f"{namespace}/{name}")

    def get_pv(self, name: str) -> PVInfo | None:
        return self.pvs.get(name)

    def get_storage_class(self, name: str) -> StorageClassInfo | None:
        return self.storage_classes.get(name)

    def default_selector(self, pod: PodInfo) -> LabelSelector | None:
        return self.selectors.get(pod.key)


async def _no_binder(pod: PodInfo, node_name: str) -> None:
    raise RuntimeError("no binder configured on the framework handle")


class _NoResourceClaimAPI:
    async def get_resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
        raise RuntimeError("no resource claim API configured on the framework handle")

    async def update_resource_claim(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        raise RuntimeError("no resource claim API configured on the framework handle")

    async def update_resource_claim_status(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        raise RuntimeError("no resource claim API configured on the framework handle")

    async def unreserve_resource_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> dict[str, Any]:
        raise RuntimeError("no resource claim API configured on the framework handle")

    async def create_resource_claim(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        raise RuntimeError("no resource claim API configured on the framework handle")

    async def delete_resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
        raise RuntimeError("no resource claim API configured on the framework handle")

    async def patch_pod_status(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        raise RuntimeError("no resource claim API configured on the framework handle")


class _NoVolumeAPI:
    async def update_pv(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        raise RuntimeError("no volume API configured on the framework handle")

    async def update_pvc(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        raise RuntimeError("no volume API configured on the framework handle")


@dataclass
class Handle:
    namespaces: NamespaceLister = field(default_factory=InMemoryListers)
    pvcs: PVCLister = field(default_factory=InMemoryListers)
    pvs: PVLister = field(default_factory=InMemoryListers)
    storage_classes: StorageClassLister = field(default_factory=InMemoryListers)
    storage: StorageLister = field(default_factory=InMemoryListers)
    volume_api: VolumeAPI = field(default_factory=_NoVolumeAPI)
    # dynamic resource allocation: the DRA informers' view (a scheduler.dra.device_state
    # DeviceState; typed loosely because the dra layer sits above the framework) and the
    # claim writes of PreBind
    device_state: object = None
    resource_claim_api: ResourceClaimAPI = field(default_factory=_NoResourceClaimAPI)
    # the informers' view, for VolumeBinding's wait at PreBind (upstream node/pod listers)
    node_lookup: Callable[[str], NodeInfo | None] = lambda name: None
    pod_exists: Callable[[PodInfo], bool] = lambda pod: True
    workload_selectors: WorkloadSelectorLister = field(default_factory=InMemoryListers)
    binder: Binder = _no_binder
    clock: Clock = SYSTEM_CLOCK
    nominator: NominatedPods = field(default_factory=_NoNominations)
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    # the scheduling queue; set once it exists (Framework.set_pod_activator)
    activator: PodActivator = field(default_factory=_NoActivator)
    # the Filter rule of the Framework that owns this handle (set once by its
    # constructor): PostFilter plugins run Filter on node copies through it (upstream:
    # the framework is the Handle, RunFilterPluginsWithNominatedPods one of its methods)
    filter_runner: FilterRunner | None = None
    # the live state of a PodGroup's members, by (namespace, name) (GangScheduling;
    # upstream's PodGroupManager): the cache's, set by the app
    gang_lookup: Callable[[str, str], GangState | None] = lambda namespace, name: None

    def activate(self, pods: Iterable[PodInfo]) -> None:
        self.activator.activate(pods)

    @classmethod
    def from_listers(cls, listers: InMemoryListers, **kw: Any) -> Handle:
        return cls(
            namespaces=listers, pvcs=listers, pvs=listers, storage_classes=listers,
            storage=listers, workload_selectors=listers, **kw,
        )  # fmt: skip
