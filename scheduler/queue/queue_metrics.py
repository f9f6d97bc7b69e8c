"""The queue's metrics: scheduler_queue_incoming_pods_total, scheduler_pending_pods (read
from the queues when scraped) and scheduler_unschedulable_pods (per rejector plugin and
profile, decremented exactly as it was incremented)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.metrics import SchedulerMetrics
from scheduler.queue.pod_info import QueuedPodInfo


class QueueMetrics:
    """Records nothing when the queue has no metrics."""

    def __init__(self, metrics: SchedulerMetrics | None) -> None:
        self._metrics = metrics
        # uid -> (profile, plugins) counted in unschedulable_pods
        self._counted: dict[str, tuple[str, frozenset[str]]] = {}

    def bind_pending_pods(self, sizes: Mapping[str, Callable[[], int]]) -> None:
        """scheduler_pending_pods{queue} reads each queue's size when scraped."""
        if self._metrics is None:
            return
        for queue, size in sizes.items():
            self._metrics.pending_pods.labels(queue=queue).set_function(size)

    def incoming(self, queue: str, label: str) -> None:
        if self._metrics is not None:
            self._metrics.queue_incoming_pods.labels(queue=queue, event=label).inc()

    def count_unschedulable(self, info: QueuedPodInfo[Any]) -> None:
        self.uncount_unschedulable(info.uid)
        plugins = frozenset(info.unschedulable_plugins)
        if self._metrics is None or not plugins:
            return
        profile = str(getattr(info.pod, "scheduler_name", ""))
        for plugin in plugins:
            self._metrics.unschedulable_pods.labels(plugin=plugin, profile=profile).inc()
        self._counted[info.uid] = (profile, plugins)

    def uncount_unschedulable(self, uid: str) -> None:
        counted = self._counted.pop(uid, None)
        if counted is None or self._metrics is None:
            return
        profile, plugins = counted
        for plugin in plugins:
            self._metrics.unschedulable_pods.labels(plugin=plugin, profile=profile).dec()
