"""What happens to a pod whose attempt failed (upstream handleSchedulingFailure).

Shared by the scheduling cycle (a FitError, a crash) and the binding cycle (a rejected
bind, a 409): count the attempt, requeue the pod unless it is gone, tell it with a
FailedScheduling event, and write PodScheduled=False with its nomination, unless a
preemption task writes the pod's status itself.

Which of these happen follows the informer's current copy of the pod, as upstream's
(pkg/scheduler/schedule_one.go handleSchedulingFailure, v1.37.2):
- the attempt is counted always;
- a pod recreated meanwhile (same name, another UID) gets nothing more;
- a pod gone from the informer, or already assigned to a node, is not requeued but still
  gets the event and the status write (a 409 on bind by another binder lands here);
- a pod still pending is requeued, then told.
The event's note is cut as upstream's truncateMessage cuts it (1024 bytes, " ...").
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from scheduler.cache import Cache, CacheError
from scheduler.client.events import EventRecorder, pod_ref
from scheduler.clock import Clock
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.scheduling_framework import SchedulingFramework
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.status_writer import StatusWriter

log = logging.getLogger(__name__)

RESULT_SCHEDULED = "scheduled"
RESULT_UNSCHEDULABLE = "unschedulable"
RESULT_ERROR = "error"
NOTE_LENGTH_LIMIT = 1024
TRUNCATED = " ..."


class FailureHandler:
    def __init__(
        self,
        *,
        cache: Cache,
        queue: SchedulingQueue[PodInfo],
        events: EventRecorder,
        status_writer: StatusWriter,
        metrics: SchedulerMetrics,
        clock: Clock,
        current_pod: Callable[[PodInfo], PodInfo | None],
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.events = events
        self.status_writer = status_writer
        self.metrics = metrics
        self.clock = clock
        # the informer's current copy of the pod (by namespace/name), None when gone:
        # decides whether a failed pod is requeued and told (see the module docstring)
        self.current_pod = current_pod

    def is_pending(self, pod: PodInfo) -> bool:
        """Still this pod (same UID), unassigned, by the informer's view."""
        current = self.current_pod(pod)
        return current is not None and current.uid == pod.uid and not current.node_name

    def undo(
        self, fwk: SchedulingFramework, state: CycleState, assumed: PodInfo, node: str
    ) -> None:
        """Unreserve and forget the assumption."""
        fwk.run_unreserve(state, assumed, node)
        # CacheError: the informer already confirmed the pod somewhere; the cache follows it
        with contextlib.suppress(CacheError):
            self.cache.forget_pod(assumed)

    def failed(
        self,
        fwk: SchedulingFramework,
        info: QueuedPodInfo[PodInfo],
        status: Status,
        message: str,
        start: float,
        result: str,
        *,
        rejectors: set[str] | None = None,
        nominated: str | None = None,
        status_by_task: bool = False,
    ) -> None:
        """Requeue, keep the nomination, tell the pod. `nominated` (already in the
        nominator) goes into the pod's status: a node, "" to clear nominatedNodeName,
        None to leave it."""
        pod = info.pod
        profile = fwk.profile_name
        self.metrics.schedule_attempts.labels(result=result, profile=profile).inc()
        self.metrics.scheduling_attempt_duration.labels(result=result, profile=profile).observe(
            self.clock.now() - start
        )
        current = self.current_pod(pod)
        if current is not None and current.uid != pod.uid:
            # recreated while its attempt ran: upstream skips the requeue and the status
            log.info("pod recreated, failure not reported pod=%s", pod.key)
            self.queue.done(pod.uid)
            return
        if current is None or current.node_name:
            # gone, or assigned (bound by someone else): nothing to requeue, but upstream
            # still sends the event and writes the status
            self.queue.done(pod.uid)
        else:
            plugins = (
                rejectors
                if rejectors is not None
                else ({status.plugin} if status.plugin else set())
            )
            if result == RESULT_ERROR:
                plugins = set()  # an error goes to backoff, whatever the plugin
            self.queue.add_unschedulable_if_not_present(
                info, plugins, self.queue.scheduling_cycle
            )
            self.queue.done(pod.uid)
        reason = "SchedulerError" if result == RESULT_ERROR else "Unschedulable"
        log.info("unschedulable pod=%s reason=%s msg=%s", pod.key, reason, message)
        self.events.event(
            # upstream tells the informer's current copy (its resourceVersion included)
            pod_ref(pod.namespace, pod.name, pod.uid, (current or pod).resource_version),
            "Warning",
            "FailedScheduling",
            "Scheduling",
            truncate_message(message),
            controller=profile,
        )
        # a preemption's own task writes the preemptor's status (nomination included),
        # off the loop; everyone else gets it written here
        if status_by_task:
            self.status_writer.forget(pod.uid)  # the task writes it; remember nothing stale
        else:
            self.status_writer.unschedulable(current or pod, reason, message, nominated)

    def requeue_quietly(self, info: QueuedPodInfo[PodInfo]) -> None:
        """Back to the queue (with backoff) with no event and no status: used when this
        replica must not speak for the pod (the lease is not surely held) and as the
        last resort when even the failure handling crashed."""
        try:
            if self.is_pending(info.pod):
                self.queue.add_unschedulable_if_not_present(
                    info, (), self.queue.scheduling_cycle
                )
        except Exception:
            log.exception("requeue failed pod=%s", info.pod.key)
        finally:
            self.queue.done(info.pod.uid)


def truncate_message(message: str) -> str:
    """upstream truncateMessage (schedule_one.go): a note over the Event limit (1024
    bytes, validation.NoteLengthLimit) keeps its first 1020 bytes and ends in " ..."."""
    raw = message.encode()
    if len(raw) <= NOTE_LENGTH_LIMIT:
        return message
    return raw[: NOTE_LENGTH_LIMIT - len(TRUNCATED)].decode(errors="ignore") + TRUNCATED


def result_of(status: Status) -> str:
    return RESULT_UNSCHEDULABLE if status.is_rejected else RESULT_ERROR
