"""The scheduling queue: activeQ, backoffQ, unschedulable and gated pods, in-flight pods.

Public surface; the modules behind it are private to the package.
"""

from scheduler.queue.events import FORCE_ACTIVATE, UNSCHEDULABLE_TIMEOUT, pod_update_event
from scheduler.queue.flush_tasks import QueueClosedError, QueueState
from scheduler.queue.pod_info import (
    LessFn,
    QueueablePod,
    QueuedPodInfo,
    backoff_duration,
    priority_sort_less,
)
from scheduler.queue.scheduling_queue import (
    BACKOFF_FLUSH_INTERVAL,
    DEFAULT_MAX_IN_UNSCHEDULABLE,
    UNSCHEDULABLE_FLUSH_INTERVAL,
    PreEnqueueFn,
    SchedulingQueue,
)
from scheduler.queue.statistics import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, QueueStatistics

__all__ = [
    "ACTIVE",
    "BACKOFF",
    "BACKOFF_FLUSH_INTERVAL",
    "DEFAULT_MAX_IN_UNSCHEDULABLE",
    "FORCE_ACTIVATE",
    "GATED",
    "UNSCHEDULABLE",
    "UNSCHEDULABLE_FLUSH_INTERVAL",
    "UNSCHEDULABLE_TIMEOUT",
    "LessFn",
    "PreEnqueueFn",
    "QueueClosedError",
    "QueueState",
    "QueueStatistics",
    "QueueablePod",
    "QueuedPodInfo",
    "SchedulingQueue",
    "backoff_duration",
    "pod_update_event",
    "priority_sort_less",
]
