"""Every plugin's typed arguments (kubescheduler.config.k8s.io/v1 *Args), each field with
upstream's default. Reading and validating them from a file is scheduler.config.args."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.model.pod_affinity import PreferredSchedulingTerm
from scheduler.model.pod_spread import SpreadConstraint
from scheduler.model.selectors import NodeSelector

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

MODE_ASYNC = "Async"
MODE_SYNC = "Sync"
SCOPE_OWN_PROFILES = "OwnProfiles"
SCOPE_ALL = "All"

DEFAULTING_SYSTEM = "System"
DEFAULTING_LIST = "List"


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int = 1


@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    utilization: int  # percent, 0..100
    score: int  # 0..10 (MaxCustomPriorityScore)


def default_resources() -> tuple[ResourceSpec, ...]:
    return (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = field(default_factory=default_resources)
    shape: tuple[UtilizationShapePoint, ...] = ()  # requestedToCapacityRatio.shape


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)


@dataclass(frozen=True, slots=True)
class NodeResourcesBalancedAllocationArgs:
    resources: tuple[ResourceSpec, ...] = field(default_factory=default_resources)


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    added_required: NodeSelector | None = None
    added_preferred: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    default_constraints: tuple[SpreadConstraint, ...] = ()
    defaulting_type: str = DEFAULTING_SYSTEM


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    bind_timeout_seconds: int = 600
    # StorageCapacityScoring (beta, on in 1.37): SetDefaults_VolumeBindingArgs' default
    # shape prefers the emptiest volume (utilization 0 -> 10, 100 -> 0)
    shape: tuple[UtilizationShapePoint, ...] = (
        UtilizationShapePoint(0, 10),
        UtilizationShapePoint(100, 0),
    )


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    mode: str = MODE_ASYNC  # this project: Async (default) | Sync
    victim_scope: str = SCOPE_OWN_PROFILES  # this project: OwnProfiles (default) | All


PluginArgs = (
    NodeResourcesFitArgs
    | NodeResourcesBalancedAllocationArgs
    | InterPodAffinityArgs
    | NodeAffinityArgs
    | PodTopologySpreadArgs
    | VolumeBindingArgs
    | DefaultPreemptionArgs
)
