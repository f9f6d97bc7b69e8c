"""The in-tree plugin registry (everything in scheduler/plugins).

DefaultPreemption lives in scheduler.preemption and is merged on top by the app:
`in_tree_registry().merge(Registry({names.DEFAULT_PREEMPTION: factory}))`.
"""

from __future__ import annotations

from scheduler.config import names
from scheduler.framework.registry import Registry
from scheduler.plugins import (
    default_binder,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    priority_sort,
    scheduling_gates,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)


def in_tree_registry() -> Registry:
    return Registry(
        {
            names.PRIORITY_SORT: priority_sort.new,
            names.SCHEDULING_GATES: scheduling_gates.new,
            names.NODE_UNSCHEDULABLE: node_unschedulable.new,
            names.NODE_NAME: node_name.new,
            names.TAINT_TOLERATION: taint_toleration.new,
            names.NODE_AFFINITY: node_affinity.new,
            names.NODE_PORTS: node_ports.new,
            names.NODE_RESOURCES_FIT: node_resources_fit.new,
            names.NODE_RESOURCES_BALANCED_ALLOCATION: node_resources_balanced_allocation.new,
            names.IMAGE_LOCALITY: image_locality.new,
            names.INTER_POD_AFFINITY: inter_pod_affinity.new,
            names.POD_TOPOLOGY_SPREAD: pod_topology_spread.new,
            names.VOLUME_RESTRICTIONS: volume_restrictions.new,
            names.NODE_VOLUME_LIMITS: node_volume_limits.new,
            names.VOLUME_BINDING: volume_binding.new,
            names.VOLUME_ZONE: volume_zone.new,
            names.DEFAULT_BINDER: default_binder.new,
        }
    )
