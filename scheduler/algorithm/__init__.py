"""The scheduling algorithm above the framework (upstream schedule_one.go, package
scheduler): which nodes to ask, in what order, how to score and pick, and opportunistic
batching. The framework runtime below owns how plugins run (the one Filter rule is
framework/filter_runner.py); nothing in scheduler/framework imports this package.

Called by the loop (ProfileAlgorithm, per profile), by explain (schedule_pod without
batching), and later by a group scheduling cycle."""

from scheduler.algorithm.batch import OpportunisticBatch
from scheduler.algorithm.profile_algorithm import ProfileAlgorithm, SchedulePod
from scheduler.algorithm.schedule_one import (
    SchedulingError,
    find_nodes_that_fit,
    num_feasible_nodes_to_find,
    schedule_pod,
)

__all__ = [
    "OpportunisticBatch",
    "ProfileAlgorithm",
    "SchedulePod",
    "SchedulingError",
    "find_nodes_that_fit",
    "num_feasible_nodes_to_find",
    "schedule_pod",
]
