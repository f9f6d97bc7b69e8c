"""Cluster events that can make a rejected pod schedulable again (queueing hints).

Every plugin that can reject a pod declares the events that may change its verdict, each
with an optional hint function. When such an event arrives, the queue moves the pods that
plugin rejected from the unschedulable set to backoff/active, instead of waiting for the
periodic flush. The vocabulary mirrors upstream's framework.ClusterEvent.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class EventResource(enum.StrEnum):
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"  # a pod bound to a node (a change to a node's usage)
    UNSCHEDULED_POD = "UnscheduledPod"  # a pending pod (its own spec changed)
    NODE = "Node"
    NAMESPACE = "Namespace"
    PVC = "PersistentVolumeClaim"
    PV = "PersistentVolume"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    VOLUME_ATTACHMENT = "VolumeAttachment"
    POD_GROUP = "PodGroup"  # scheduling.k8s.io PodGroup (GenericWorkload)
    RESOURCE_CLAIM = "ResourceClaim"  # resource.k8s.io (dynamic resource allocation)
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    WILDCARD = "*"


class ActionType(enum.IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256  # a pod's requests shrank
    UPDATE_POD_TOLERATION = 512
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1024
    UPDATE_POD_GENERATED = 2048  # any other update
    # status.resourceClaimStatuses changed: the controller made a template's claim
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 4096
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATION
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_GENERATED
        | UPDATE_POD_GENERATED_RESOURCE_CLAIM
    )
    ALL = ADD | DELETE | UPDATE


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: EventResource
    action: ActionType
    label: str = ""

    def matches(self, other: ClusterEvent) -> bool:
        """True when `other` (an event that happened) is covered by this registration."""
        resource_ok = (
            self.resource == EventResource.WILDCARD
            or self.resource == other.resource
            # a registration for Pod covers assigned and unscheduled pods alike
            or (
                self.resource == EventResource.POD
                and other.resource in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD)
            )
        )
        return resource_ok and bool(self.action & other.action)


class QueueingHint(enum.Enum):
    SKIP = 0  # the event cannot help this pod: leave it where it is
    QUEUE = 1  # the event may help: move the pod to backoff/active


# hint(pod, old_object, new_object) -> QueueingHint; objects are the internal records
# (or None for add/delete); the pod is the rejected pod's record.
QueueingHintFn = Callable[[Any, Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None  # None: always QUEUE
