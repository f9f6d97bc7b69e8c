"""Informers for dynamic resource allocation (resource.k8s.io/v1, served by default since
Kubernetes 1.34): ResourceSlices, DeviceClasses and ResourceClaims kept in a DeviceState,
each change then reported to the queue as a cluster event, as upstream's eventhandlers.go
registers the same three kinds for the DynamicResources plugin.

Each informer's transform reads the API's JSON into the records the allocator uses
(scheduler/dra/resources.py); an object it cannot read is logged and counted by the
informer (transform errors) and left out, which for a slice makes its pool incomplete:
the allocator then refuses the pool as upstream refuses one with a missing slice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler.client.connection import Connection
from scheduler.client.informer import Informer, Resource
from scheduler.dra.device_state import DeviceState
from scheduler.dra.resources import claim_from_dict, device_class_from_dict, slice_from_dict
from scheduler.framework.cluster_event import EventResource
from scheduler.storage_informers import ClusterEventReceiver, StorageKind, feed_informers

RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices")
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses")
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims")


def dra_informers(
    connection: Connection,
    state: DeviceState,
    sink: Callable[[], ClusterEventReceiver | None],
) -> list[Informer[Any]]:
    """`sink` is looked up per event (the queue may be built after the informers)."""
    kinds: list[StorageKind] = [
        (RESOURCE_SLICES, slice_from_dict, EventResource.RESOURCE_SLICE,
         state.set_slice, state.drop_slice),
        (DEVICE_CLASSES, device_class_from_dict, EventResource.DEVICE_CLASS,
         state.set_class, state.drop_class),
        (RESOURCE_CLAIMS, claim_from_dict, EventResource.RESOURCE_CLAIM,
         state.set_claim, state.drop_claim),
    ]  # fmt: skip
    return feed_informers(connection, kinds, sink)
