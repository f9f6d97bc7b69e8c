"""Informers for dynamic resource allocation (resource.k8s.io/v1, served by default since
Kubernetes 1.34): ResourceSlices, DeviceClasses, ResourceClaims and DeviceTaintRules
(DRADeviceTaintRules, GA and on in v1.37.2) kept in a DeviceState,
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
from scheduler.dra.resources import (
    DeviceTaintRule,
    claim_from_dict,
    device_class_from_dict,
    device_taint_rule_from_dict,
    slice_from_dict,
)
from scheduler.framework.cluster_event import ActionType, ClusterEvent, EventResource
from scheduler.storage_informers import ClusterEventReceiver, StorageKind, feed_informers

RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices")
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses")
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims")
DEVICE_TAINT_RULES = Resource("resource.k8s.io", "v1", "devicetaintrules")


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
    return [
        *feed_informers(connection, kinds, sink),
        Informer(
            connection,
            DEVICE_TAINT_RULES,
            device_taint_rule_from_dict,
            TaintRuleFeed(state, sink),
            name=DEVICE_TAINT_RULES.plural,
        ),
    ]


class TaintRuleFeed:
    """A DeviceTaintRule changes the devices of the slices it selects: whether it is
    added, changed or deleted, the queue hears of an update of slices, which is what
    upstream's resourceslice tracker sends its handlers (the patched slice's update)."""

    _event = ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.UPDATE, "ResourceSliceUpdate")

    def __init__(self, state: DeviceState, sink: Callable[[], ClusterEventReceiver | None]) -> None:
        self._state = state
        self._sink = sink

    def _emit(self) -> None:
        sink = self._sink()
        if sink is not None:
            sink.move_all_to_active_or_backoff(self._event)

    def on_add(self, obj: DeviceTaintRule) -> None:
        self._state.set_taint_rule(obj)
        self._emit()

    def on_update(self, old: DeviceTaintRule, new: DeviceTaintRule) -> None:
        self._state.set_taint_rule(new)
        self._emit()

    def on_delete(self, obj: DeviceTaintRule) -> None:
        self._state.drop_taint_rule(obj)
        self._emit()
