"""Plugin names (as upstream's) and kube-scheduler v1's default plugin set.

The configuration loader resolves a profile's enabled/disabled lists against
DEFAULT_MULTI_POINT and expands multiPoint to every extension point a plugin implements
(config/plugins.py); which points those are, the plugin classes say (their Protocol bases,
framework.interfaces.extension_points_of), passed down by scheduler.catalog.
"""

from __future__ import annotations

from dataclasses import dataclass

PRIORITY_SORT = "PrioritySort"
SCHEDULING_GATES = "SchedulingGates"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_NAME = "NodeName"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_PORTS = "NodePorts"
NODE_RESOURCES_FIT = "NodeResourcesFit"
VOLUME_RESTRICTIONS = "VolumeRestrictions"
NODE_VOLUME_LIMITS = "NodeVolumeLimits"
VOLUME_BINDING = "VolumeBinding"
VOLUME_ZONE = "VolumeZone"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"
DEFAULT_PREEMPTION = "DefaultPreemption"
NODE_RESOURCES_BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"
DEFAULT_BINDER = "DefaultBinder"
GANG_SCHEDULING = "GangScheduling"
DYNAMIC_RESOURCES = "DynamicResources"

# extension point keys as they appear in KubeSchedulerConfiguration `plugins:`
MULTI_POINT = "multiPoint"
PRE_ENQUEUE = "preEnqueue"
QUEUE_SORT = "queueSort"
PRE_FILTER = "preFilter"
FILTER = "filter"
POST_FILTER = "postFilter"
PRE_SCORE = "preScore"
SCORE = "score"
RESERVE = "reserve"
PERMIT = "permit"
PRE_BIND = "preBind"
BIND = "bind"
POST_BIND = "postBind"
EXTENSION_POINTS = (
    PRE_ENQUEUE, QUEUE_SORT, PRE_FILTER, FILTER, POST_FILTER, PRE_SCORE, SCORE,
    RESERVE, PERMIT, PRE_BIND, BIND, POST_BIND,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    weight: int = 0  # score weight; 0 means "not set" (the framework uses 1)


# kube-scheduler v1 defaults (pkg/scheduler/apis/config/v1/default_plugins.go), in order.
DEFAULT_MULTI_POINT: tuple[PluginRef, ...] = (
    PluginRef(SCHEDULING_GATES),
    PluginRef(PRIORITY_SORT),
    PluginRef(NODE_UNSCHEDULABLE),
    PluginRef(NODE_NAME),
    PluginRef(TAINT_TOLERATION, 3),
    PluginRef(NODE_AFFINITY, 2),
    PluginRef(NODE_PORTS),
    PluginRef(NODE_RESOURCES_FIT, 1),
    PluginRef(VOLUME_RESTRICTIONS),
    PluginRef(NODE_VOLUME_LIMITS),
    PluginRef(VOLUME_BINDING),
    PluginRef(VOLUME_ZONE),
    PluginRef(POD_TOPOLOGY_SPREAD, 2),
    PluginRef(INTER_POD_AFFINITY, 2),
    PluginRef(DEFAULT_PREEMPTION),
    PluginRef(NODE_RESOURCES_BALANCED_ALLOCATION, 1),
    PluginRef(IMAGE_LOCALITY, 1),
    PluginRef(DEFAULT_BINDER),
)
# with the GenericWorkload gate, upstream appends GangScheduling after every other default
# plugin (pkg/scheduler/apis/config/v1/default_plugins.go)
DEFAULT_MULTI_POINT_GENERIC_WORKLOAD: tuple[PluginRef, ...] = (
    *DEFAULT_MULTI_POINT,
    PluginRef(GANG_SCHEDULING),
)

NOT_IMPLEMENTED: frozenset[str] = frozenset()
