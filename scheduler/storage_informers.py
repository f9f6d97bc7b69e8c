"""Informers for the storage objects the volume plugins read, feeding the shared
listers and telling the queue (upstream's eventhandlers.go registers the same kinds:
PVC, PV, StorageClass, CSINode, CSIDriver, CSIStorageCapacity, VolumeAttachment).

Every add/update/delete updates the lister first, then moves the rejected pods whose
plugins registered the event (their queueing hints decide), so a pod waiting for its
claim to be bound is retried the moment the PV controller binds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from scheduler.client.connection import Connection
from scheduler.client.informer import Informer, Resource
from scheduler.framework.cluster_event import ActionType, ClusterEvent, EventResource
from scheduler.framework.handle import InMemoryListers
from scheduler.model.csi import (
    csi_driver_from_dict,
    csi_node_from_dict,
    csi_storage_capacity_from_dict,
    volume_attachment_from_dict,
)
from scheduler.model.volume import pv_from_dict, pvc_from_dict, storage_class_from_dict

PVCS = Resource("", "v1", "persistentvolumeclaims")
PVS = Resource("", "v1", "persistentvolumes")
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses")
CSI_NODES = Resource("storage.k8s.io", "v1", "csinodes")
CSI_DRIVERS = Resource("storage.k8s.io", "v1", "csidrivers")
CSI_STORAGE_CAPACITIES = Resource("storage.k8s.io", "v1", "csistoragecapacities")
VOLUME_ATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments")


_ListerWrite = Callable[[Any], object]
# (collection, transform, event resource, put into the listers, drop from them)
StorageKind = tuple[Resource, Callable[[Any], Any], EventResource, _ListerWrite, _ListerWrite]


class ClusterEventReceiver(Protocol):
    """Where a storage object's change goes as a cluster event (the scheduling queue)."""

    def move_all_to_active_or_backoff(
        self, event: ClusterEvent, old: Any = None, new: Any = None
    ) -> int: ...


class StorageFeed:
    """Informer handler: keep one kind in the listers, then report the event."""

    def __init__(
        self,
        resource: EventResource,
        put: _ListerWrite,
        drop: _ListerWrite,
        sink: Callable[[], ClusterEventReceiver | None],
    ) -> None:
        self.resource = resource  # the kind of ClusterEvent it reports
        self._put = put
        self._drop = drop
        self._sink = sink
        self._add = ClusterEvent(resource, ActionType.ADD, f"{resource}Add")
        self._update = ClusterEvent(resource, ActionType.UPDATE, f"{resource}Update")
        self._delete = ClusterEvent(resource, ActionType.DELETE, f"{resource}Delete")

    def _emit(self, event: ClusterEvent, old: Any, new: Any) -> None:
        sink = self._sink()
        if sink is not None:
            sink.move_all_to_active_or_backoff(event, old, new)

    def on_add(self, obj: Any) -> None:
        self._put(obj)
        self._emit(self._add, None, obj)

    def on_update(self, old: Any, new: Any) -> None:
        self._put(new)
        self._emit(self._update, old, new)

    def on_delete(self, obj: Any) -> None:
        self._drop(obj)
        self._emit(self._delete, obj, None)


def storage_informers(
    connection: Connection, ls: InMemoryListers, sink: Callable[[], ClusterEventReceiver | None]
) -> list[Informer[Any]]:
    """`sink` is looked up per event (the queue may be built after the informers)."""
    kinds: list[StorageKind] = [
        (PVCS, pvc_from_dict, EventResource.PVC,
         ls.set_pvc, lambda o: ls.pvcs.pop(o.key, None)),
        (PVS, pv_from_dict, EventResource.PV,
         ls.set_pv, lambda o: ls.pvs.pop(o.name, None)),
        (STORAGE_CLASSES, storage_class_from_dict, EventResource.STORAGE_CLASS,
         ls.set_storage_class, lambda o: ls.storage_classes.pop(o.name, None)),
        (CSI_NODES, csi_node_from_dict, EventResource.CSI_NODE,
         ls.set_csi_node, lambda o: ls.csi_nodes.pop(o.name, None)),
        (CSI_DRIVERS, csi_driver_from_dict, EventResource.CSI_DRIVER,
         ls.set_csi_driver, lambda o: ls.csi_drivers.pop(o.name, None)),
        (CSI_STORAGE_CAPACITIES, csi_storage_capacity_from_dict,
         EventResource.CSI_STORAGE_CAPACITY,
         ls.set_csi_storage_capacity, lambda o: ls.csi_capacities.pop(o.key, None)),
        (VOLUME_ATTACHMENTS, volume_attachment_from_dict, EventResource.VOLUME_ATTACHMENT,
         ls.set_volume_attachment, lambda o: ls.volume_attachments.pop(o.name, None)),
    ]  # fmt: skip
    return feed_informers(connection, kinds, sink)


def feed_informers(
    connection: Connection,
    kinds: list[StorageKind],
    sink: Callable[[], ClusterEventReceiver | None],
) -> list[Informer[Any]]:
    """One informer per kind, each feeding its listers through a StorageFeed."""
    return [
        Informer(
            connection,
            resource,
            transform,
            StorageFeed(event_resource, put, drop, sink),
            name=resource.plural,
        )
        for resource, transform, event_resource, put, drop in kinds
    ]
