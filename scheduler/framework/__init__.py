"""Extension-point Protocols, Status, CycleState, runtime, registry, cluster events and
the scheduling algorithm (schedule_pod)."""

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis, FitError, ScheduleResult
from scheduler.framework.handle import Handle, InMemoryListers
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    BatchFilterResult,
    PostFilterResult,
    PreFilterResult,
)
from scheduler.framework.profile import profile_for
from scheduler.framework.registry import Registry
from scheduler.framework.runtime import Framework, FrameworkError
from scheduler.framework.schedule import (
    NodeDryRun,
    SchedulingError,
    num_feasible_nodes_to_find,
    schedule_pod,
)
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status

__all__ = [
    "MAX_NODE_SCORE",
    "BatchFilterResult",
    "Code",
    "CycleState",
    "Diagnosis",
    "FitError",
    "Framework",
    "FrameworkError",
    "Handle",
    "InMemoryListers",
    "NodeDryRun",
    "PostFilterResult",
    "PreFilterResult",
    "Registry",
    "ScheduleResult",
    "SchedulingError",
    "SearchState",
    "Status",
    "num_feasible_nodes_to_find",
    "profile_for",
    "schedule_pod",
]
