"""Extension-point Protocols, Status, CycleState, the runtime (with the one Filter rule),
registry and cluster events. The scheduling algorithm that runs them is
scheduler.algorithm, above this package."""

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis, FitError, ScheduleResult
from scheduler.framework.dry_run import NodeDryRun
from scheduler.framework.filter_runner import FilterRunner
from scheduler.framework.handle import Handle, InMemoryListers
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    BatchFilterResult,
    PostFilterResult,
    PreFilterResult,
)
from scheduler.framework.profile import build_profile
from scheduler.framework.registry import Registry
from scheduler.framework.runtime import Framework, FrameworkError
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status

__all__ = [
    "MAX_NODE_SCORE",
    "BatchFilterResult",
    "Code",
    "CycleState",
    "Diagnosis",
    "FilterRunner",
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
    "SearchState",
    "Status",
    "build_profile",
]
