"""The in-tree plugin registry (everything in scheduler/plugins).

Each entry names the plugin's class, whose Protocol bases say which extension points it
serves (framework.interfaces.extension_points_of). DefaultPreemption lives in
scheduler.preemption; scheduler.catalog merges it on top.
"""

from __future__ import annotations

from scheduler.config import names
from scheduler.framework.registry import Registration, Registry
from scheduler.plugins import (
    default_binder,
    dynamic_resources,
    gang_scheduling,
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
            names.PRIORITY_SORT: Registration(priority_sort.PrioritySort, priority_sort.new),
            names.GANG_SCHEDULING: Registration(
                gang_scheduling.GangScheduling, gang_scheduling.new
            ),
            names.SCHEDULING_GATES: Registration(
                scheduling_gates.SchedulingGates, scheduling_gates.new
            ),
            names.NODE_UNSCHEDULABLE: Registration(
                node_unschedulable.NodeUnschedulable, node_unschedulable.new
            ),
            names.NODE_NAME: Registration(node_name.NodeName, node_name.new),
            names.TAINT_TOLERATION: Registration(
                taint_toleration.TaintToleration, taint_toleration.new
            ),
            names.NODE_AFFINITY: Registration(node_affinity.NodeAffinity, node_affinity.new),
            names.NODE_PORTS: Registration(node_ports.NodePorts, node_ports.new),
            names.NODE_RESOURCES_FIT: Registration(
                node_resources_fit.NodeResourcesFit, node_resources_fit.new
            ),
            names.NODE_RESOURCES_BALANCED_ALLOCATION: Registration(
                node_resources_balanced_allocation.NodeResourcesBalancedAllocation,
                node_resources_balanced_allocation.new,
            ),
            names.IMAGE_LOCALITY: Registration(image_locality.ImageLocality, image_locality.new),
            names.INTER_POD_AFFINITY: Registration(
                inter_pod_affinity.InterPodAffinity, inter_pod_affinity.new
            ),
            names.POD_TOPOLOGY_SPREAD: Registration(
                pod_topology_spread.PodTopologySpread, pod_topology_spread.new
            ),
            names.VOLUME_RESTRICTIONS: Registration(
                volume_restrictions.VolumeRestrictions, volume_restrictions.new
            ),
            names.NODE_VOLUME_LIMITS: Registration(
                node_volume_limits.NodeVolumeLimits, node_volume_limits.new
            ),
            names.VOLUME_BINDING: Registration(volume_binding.VolumeBinding, volume_binding.new),
            names.VOLUME_ZONE: Registration(volume_zone.VolumeZone, volume_zone.new),
            names.DEFAULT_BINDER: Registration(default_binder.DefaultBinder, default_binder.new),
            names.DYNAMIC_RESOURCES: Registration(
                dynamic_resources.DynamicResources, dynamic_resources.new
            ),
        }
    )
