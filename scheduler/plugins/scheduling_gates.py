"""SchedulingGates (PreEnqueue): a pod with spec.schedulingGates stays gated."""

from __future__ import annotations

from typing import Any

from scheduler.config import names
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    PreEnqueuePlugin,
)
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo
from scheduler.plugins.helpers import QUEUE, SKIP, event


def _gates_removed(pod: PodInfo, old: Any, new: Any) -> Any:
    if isinstance(new, PodInfo) and new.uid == pod.uid and not new.scheduling_gates:
        return QUEUE
    return SKIP


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = names.SCHEDULING_GATES

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.scheduling_gates:
            return Status.success()
        return Status.unresolvable(
            f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]", plugin=self.name
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(
                EventResource.UNSCHEDULED_POD,
                ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
                _gates_removed,
            )
        ]


def new(args: object, handle: Handle) -> SchedulingGates:
    return SchedulingGates()
