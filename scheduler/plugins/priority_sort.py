"""PrioritySort (QueueSort): higher priority first, then earlier queue timestamp."""

from __future__ import annotations

from typing import Any

from scheduler.config import names
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    QueuedPod,
    QueueSortPlugin,
)
from scheduler.model.pod import PodInfo


class PrioritySort(QueueSortPlugin):
    name = names.PRIORITY_SORT

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, pod: PodInfo, timestamp: float) -> tuple[Any, ...]:
        """A heap key equivalent to `less`."""
        return (-pod.priority, timestamp)


def new(args: object, handle: Handle) -> PrioritySort:
    return PrioritySort()
