"""QueuedPodInfo: what the queue knows about one pending pod, and the default ordering.

The queue works on any record with the PodInfo fields it reads (``uid``, ``key``,
``priority``, and for metrics ``scheduler_name``); see :class:`QueueablePod`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar


class QueueablePod(Protocol):
    @property
    def uid(self) -> str: ...

    @property
    def key(self) -> str:
        """The pod's "namespace/name", for logs."""
        ...

    @property
    def priority(self) -> int: ...


P = TypeVar("P", bound=QueueablePod)


@dataclass(slots=True, eq=False)
class QueuedPodInfo(Generic[P]):
    """A pending pod with its queueing history.

    - ``timestamp``: when the pod was added, or last put back after a failed attempt (clock
      seconds). Orders equal priorities and starts the backoff and the 5-minute timer.
    - ``initial_attempt_timestamp``: when the pod first became schedulable in the queue (its
      first entry into activeQ, so time gated by PreEnqueue is excluded, as upstream since
      KEP-3521). Never updated afterwards; pod_scheduling_sli_duration_seconds starts here.
    - ``attempts``: scheduling attempts so far (incremented by pop). Drives backoff.
    - ``unschedulable_plugins``: plugins that rejected the pod in its last attempt (or the
      PreEnqueue plugin that gates it). Only their registered events requeue the pod.
    - ``gated``: rejected by PreEnqueue (scheduling gates, the
      preemption gate); such a pod is kept out of activeQ until its gate opens.
    """

    pod: P
    timestamp: float
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated: bool = False

    @property
    def uid(self) -> str:
        return self.pod.uid

    @property
    def key(self) -> str:
        return self.pod.key


LessFn = Callable[[QueuedPodInfo[P], QueuedPodInfo[P]], bool]


def priority_sort_less(a: QueuedPodInfo[P], b: QueuedPodInfo[P]) -> bool:
    """PrioritySort: higher priority first, then the earlier timestamp."""
    pa, pb = a.pod.priority, b.pod.priority
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


SortKeyFn = Callable[[P, float], tuple[Any, ...]]
"""A QueueSort order stated as a key of (pod, queue timestamp): ``less(a, b)`` exactly when
``key(a) < key(b)``. Lets activeQ compare keys in C (sort_key_heap.py)."""


def priority_sort_key(pod: QueueablePod, timestamp: float) -> tuple[int, float]:
    """The key of :func:`priority_sort_less`: priority descending, then timestamp."""
    return (-pod.priority, timestamp)


def backoff_duration(attempts: int, initial: float, maximum: float) -> float:
    """initial * 2^(attempts-1), capped at maximum; 0 before the first attempt.

    A pod that was never tried (only gated) has nothing to back off from, as upstream.
    """
    if attempts <= 0:
        return 0.0
    duration = initial
    for _ in range(1, attempts):
        if duration >= maximum - duration:
            return maximum
        duration += duration
    return min(duration, maximum)
