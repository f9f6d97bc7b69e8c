"""Plugin names (as upstream's) and kube-scheduler v1's default plugin set.

The configuration loader resolves a profile's enabled/disabled lists against
DEFAULT_MULTI_POINT and expands multiPoint to every extension point a plugin implements
(config/plugins.py, from DEFAULT_PLUGINS below); the framework then checks that each
placed plugin's class declares that point's Protocol.
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

NOT_IMPLEMENTED: frozenset[str] = frozenset()

# the Filter plugins that prepare their state in a PreFilter, in the default order
_FILTERS_WITH_PRE_FILTER = (
    NODE_AFFINITY,
    NODE_PORTS,
    NODE_RESOURCES_FIT,
    VOLUME_RESTRICTIONS,
    NODE_VOLUME_LIMITS,
    VOLUME_BINDING,
    VOLUME_ZONE,
    POD_TOPOLOGY_SPREAD,
    INTER_POD_AFFINITY,
)

# The same defaults expanded per extension point (what upstream's multiPoint expansion
# yields), for documentation, `--dump-config` and tests.
DEFAULT_PLUGINS: dict[str, tuple[PluginRef, ...]] = {
    PRE_ENQUEUE: (PluginRef(SCHEDULING_GATES), PluginRef(DEFAULT_PREEMPTION)),
    QUEUE_SORT: (PluginRef(PRIORITY_SORT),),
    PRE_FILTER: tuple(PluginRef(n) for n in _FILTERS_WITH_PRE_FILTER),
    FILTER: tuple(
        PluginRef(n)
        for n in (NODE_UNSCHEDULABLE, NODE_NAME, TAINT_TOLERATION, *_FILTERS_WITH_PRE_FILTER)
    ),
    POST_FILTER: (PluginRef(DEFAULT_PREEMPTION),),
    PRE_SCORE: tuple(
        PluginRef(n)
        for n in (
            TAINT_TOLERATION,
            NODE_AFFINITY,
            NODE_RESOURCES_FIT,
            VOLUME_BINDING,
            POD_TOPOLOGY_SPREAD,
            INTER_POD_AFFINITY,
            NODE_RESOURCES_BALANCED_ALLOCATION,
        )
    ),
    SCORE: (
        PluginRef(TAINT_TOLERATION, 3),
        PluginRef(NODE_AFFINITY, 2),
        PluginRef(NODE_RESOURCES_FIT, 1),
        PluginRef(VOLUME_BINDING, 1),  # StorageCapacityScoring: beta, on in 1.37
        PluginRef(POD_TOPOLOGY_SPREAD, 2),
        PluginRef(INTER_POD_AFFINITY, 2),
        PluginRef(NODE_RESOURCES_BALANCED_ALLOCATION, 1),
        PluginRef(IMAGE_LOCALITY, 1),
    ),
    RESERVE: (PluginRef(VOLUME_BINDING),),
    PERMIT: (),
    PRE_BIND: (PluginRef(VOLUME_BINDING),),
    BIND: (PluginRef(DEFAULT_BINDER),),
    POST_BIND: (),
}

# every in-tree plugin is in the default set
ALL_PLUGINS = frozenset(ref.name for ref in DEFAULT_MULTI_POINT)
