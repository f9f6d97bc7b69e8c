"""What plugins may reach outside themselves: listers, the binder, the cycle's
snapshot and nominator (upstream framework.Handle).

The client layer builds informers and provides objects satisfying the lister
Protocols; `InMemoryListers` is a dict-backed implementation for tests and for
wiring informer stores.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.model.namespace import NamespaceInfo
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import LabelSelector
from scheduler.model.volume import PVCInfo, PVInfo, StorageClassInfo

if TYPE_CHECKING:
    from scheduler.cache.nominator import Nominator
    from scheduler.cache.snapshot import Snapshot


class NamespaceLister(Protocol):
    def get_namespace(self, name: str) -> NamespaceInfo | None: ...
    def list_namespaces(self) -> Iterable[NamespaceInfo]: ...


class PVCLister(Protocol):
    def get_pvc(self, namespace: str, name: str) -> PVCInfo | None: ...


class PVLister(Protocol):
    def get_pv(self, name: str) -> PVInfo | None: ...


class StorageClassLister(Protocol):
    def get_storage_class(self, name: str) -> StorageClassInfo | None: ...


class WorkloadSelectorLister(Protocol):
    """For PodTopologySpread's system default constraints: the selector of the
    services / replica sets / stateful sets / replication controllers selecting the pod
    (upstream helper.DefaultSelector); None when there is none."""

    def default_selector(self, pod: PodInfo) -> LabelSelector | None: ...


# bind(pod, node_name): performs the API call; raises on failure
Binder = Callable[[PodInfo, str], Awaitable[None]]


class InMemoryListers:
    """Dict-backed listers (tests; informer stores can feed it through the setters)."""

    def __init__(self) -> None:
        self.namespaces: dict[str, NamespaceInfo] = {}
        self.pvcs: dict[str, PVCInfo] = {}
        self.pvs: dict[str, PVInfo] = {}
        self.storage_classes: dict[str, StorageClassInfo] = {}
        self.selectors: dict[str, LabelSelector] = {}  # pod key -> default selector

    def set_namespace(self, ns: NamespaceInfo) -> None:
        self.namespaces[ns.name] = ns

    def set_pvc(self, pvc: PVCInfo) -> None:
        self.pvcs[pvc.key] = pvc

    def set_pv(self, pv: PVInfo) -> None:
        self.pvs[pv.name] = pv

    def set_storage_class(self, sc: StorageClassInfo) -> None:
        self.storage_classes[sc.name] = sc

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


@dataclass
class Handle:
    namespaces: NamespaceLister = field(default_factory=InMemoryListers)
    pvcs: PVCLister = field(default_factory=InMemoryListers)
    pvs: PVLister = field(default_factory=InMemoryListers)
    storage_classes: StorageClassLister = field(default_factory=InMemoryListers)
    workload_selectors: WorkloadSelectorLister = field(default_factory=InMemoryListers)
    binder: Binder = _no_binder
    clock: Clock = SYSTEM_CLOCK
    # set by schedule_pod for the cycle (PostFilter plugins read them)
    snapshot: Snapshot | None = None
    nominator: Nominator | None = None
    # set by the Framework that owns this handle
    framework: Any = None

    @classmethod
    def from_listers(cls, listers: InMemoryListers, **kw: Any) -> Handle:
        return cls(
            namespaces=listers, pvcs=listers, pvs=listers, storage_classes=listers,
            workload_selectors=listers, **kw,
        )  # fmt: skip
