"""The binding cycle: a task per pod, bounded by a semaphore (upstream bindingCycle).

  wait at Permit -> PreBind -> Bind (pods/binding) -> PostBind.

Any failure unreserves, forgets the assumption and goes to the failure handler, with
the nomination cleared (upstream handleBindingCycleError, clearNominatedNode): a
rejection while waiting at Permit as Unschedulable (its plugin the rejector), anything
later as an error with backoff. A 409 on the bind (someone else bound it first, or it is
being deleted) is such an error too, as upstream's: counted as result="error", told with
FailedScheduling and PodScheduled=False, and requeued unless the informer shows the pod
assigned or gone; only a pod recreated meanwhile gets nothing (scheduling_failure.py).
Right before the bind the lease fence is checked: a replica that may have lost its lease
sends nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.client.connection import WRITES_IN_FLIGHT
from scheduler.client.errors import ApiError, Conflict, LeaseNotHeld
from scheduler.client.events import EventRecorder, pod_ref
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import fit_error_message
from scheduler.framework.scheduling_framework import SchedulingFramework
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting_pods import WaitingPod
from scheduler.metrics import LabelledChildren, SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.queue import QueuedPodInfo
from scheduler.queue.events import ASSIGNED_POD_DELETE
from scheduler.scheduling_failure import (
    RESULT_ERROR,
    RESULT_SCHEDULED,
    RESULT_UNSCHEDULABLE,
    FailureHandler,
)
from scheduler.supervisor import TaskSet

log = logging.getLogger(__name__)

FENCED_BIND = "create pods/binding"
# upstream's clearNominatedNode: every binding-cycle failure clears nominatedNodeName
CLEAR_NOMINATION = ""


class BindRejected(Exception):
    """The pod was rejected while waiting at Permit (or the wait timed out)."""


class PreBindFailed(BindRejected):
    """A PreBind plugin failed; its message is upstream's own wording (no prefix)."""


class PermitRejected(BindRejected):
    """Rejected (Unschedulable) while waiting at Permit: by a plugin, by preemption
    taking the pod as a victim, or by the wait timing out."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


@dataclass(frozen=True, slots=True)
class Assumed:
    """A pod the scheduling cycle assumed on `node`, handed to its binding task."""

    fwk: SchedulingFramework
    state: CycleState
    info: QueuedPodInfo[PodInfo]
    pod: PodInfo  # the assumed copy (nodeName set), as the cache holds it
    node: str
    start: float  # when the attempt began (the attempt metrics' clock)

    def undo_with(self, failures: FailureHandler) -> None:
        failures.undo(self.fwk, self.state, self.pod, self.node)


class BindingCycles:
    def __init__(
        self,
        failures: FailureHandler,
        events: EventRecorder,
        metrics: SchedulerMetrics,
        *,
        max_in_flight: int = WRITES_IN_FLIGHT,
        fence: Callable[[str], bool] | None = None,
        tasks: TaskSet | None = None,
    ) -> None:
        self._failures = failures
        self._cache = failures.cache
        self._queue = failures.queue
        self._clock = failures.clock
        self._events = events
        self._metrics = metrics
        # children looked up once each (metrics.LabelledChildren: labels() per bind was
        # several percent of the CPU in issue 12's profile)
        self._goroutines = LabelledChildren(metrics.goroutines)
        self._binding_duration = LabelledChildren(metrics.binding_duration)
        self._attempts_scheduled = LabelledChildren(metrics.schedule_attempts)
        self._attempt_duration_scheduled = LabelledChildren(metrics.scheduling_attempt_duration)
        self._sli_duration = LabelledChildren(metrics.pod_scheduling_sli_duration)
        self._slots = asyncio.Semaphore(max_in_flight)
        # leader-election fence (leader.LeaseFence.open): checked right before each bind
        self._fence = fence or (lambda operation: True)
        self._tasks = tasks if tasks is not None else TaskSet("binds")

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, a: Assumed, waiting: WaitingPod | None) -> None:
        """Hand the assumed pod to its binding task (it owns the pod from here on)."""
        self._tasks.spawn(self._run(a, waiting), name=f"bind-{a.info.pod.key}")
        self._goroutines("binding").set(len(self._tasks))

    async def drain(self, grace: float) -> None:
        """Let in-flight binds finish for `grace` seconds, then cancel them (each
        cancelled bind forgets its assumption)."""
        await self._tasks.drain(grace)

    async def _run(self, a: Assumed, waiting: WaitingPod | None) -> None:
        fwk, state, assumed, node = a.fwk, a.state, a.pod, a.node
        pod = a.info.pod
        bound = False
        try:
            async with self._slots:
                if waiting is not None:
                    await self._wait_at_permit(fwk, waiting)
                st = await fwk.run_pre_bind(state, assumed, node)
                if not st.ok:
                    if isinstance(st.error, LeaseNotHeld):  # VolumeBinding's PV/PVC writes
                        self._fenced(a)
                        return
                    raise PreBindFailed(st.message())
                if not self._fence(FENCED_BIND):
                    self._fenced(a)
                    return
                bind_start = self._clock.now()
                st = await fwk.run_bind(state, assumed, node)
                self._binding_duration("ok" if st.ok else "error").observe(
                    self._clock.now() - bind_start
                )
                if not st.ok:
                    if isinstance(st.error, LeaseNotHeld):  # the dispatcher's last check
                        self._fenced(a)
                        return
                    if isinstance(st.error, Conflict):
                        # 409: bound by someone else in between, or being deleted; handled
                        # as any bind error below (upstream makes no exception for it)
                        log.info(
                            "bind conflict pod=%s node=%s: %s",
                            pod.key,
                            node,
                            _conflict_cause(st.error),
                        )
                    raise BindRejected(st.message())
                bound = True
                self._cache.finish_binding(assumed)
            fwk.run_post_bind(state, assumed, node)
            self._bound(a)
        except asyncio.CancelledError:
            if not bound:
                a.undo_with(self._failures)
                self._queue.done(pod.uid)
            raise
        except PermitRejected as exc:
            self._permit_rejected(a, exc.status)
        except (BindRejected, ApiError) as exc:
            a.undo_with(self._failures)
            # the room it held is free again: others may fit now
            self._queue.assigned_pod_deleted(assumed)
            self._failures.failed(
                fwk,
                a.info,
                Status(Code.ERROR, (str(exc),)),
                # PreBind and Bind failures carry upstream's own wording ("running ...
                # plugin"); an API error raised past the plugins says what it is
                str(exc) if isinstance(exc, BindRejected) else f"binding rejected: {exc}",
                a.start,
                RESULT_ERROR,
                nominated=CLEAR_NOMINATION,
            )
        except Exception as exc:
            log.exception("binding cycle crashed pod=%s", pod.key)
            a.undo_with(self._failures)
            self._queue.assigned_pod_deleted(assumed)  # as for any failed bind
            self._failures.failed(
                fwk, a.info, Status.from_error(exc), f"binding failed: {exc}", a.start,
                RESULT_ERROR, nominated=CLEAR_NOMINATION,
            )  # fmt: skip
        finally:
            self._goroutines("binding").set(len(self._tasks) - 1)

    async def _wait_at_permit(self, fwk: SchedulingFramework, waiting: WaitingPod) -> None:
        """Until the verdict: allowed, rejected (by a plugin, by preemption), or timed out
        (the WaitingPod's own timer rejects it in its plugin's name)."""
        try:
            st = await asyncio.shield(waiting.verdict)
        finally:
            fwk.waiting_pods.remove(waiting.pod.uid)
        if st.is_rejected:
            raise PermitRejected(st)
        if not st.ok:
            raise BindRejected(st.message())

    def _permit_rejected(self, a: Assumed, rejection: Status) -> None:
        """upstream bindingCycle turns a rejection at WaitOnPermit into a FitError on the
        one node the pod was assumed on, so the pod is Unschedulable with the plugin as
        its rejector, as if Permit had said no in the scheduling cycle; its message is
        that FitError's ("0/1 nodes are available: 1 <reason>."). handleBindingCycleError
        then tells the other pods the room is free, after the requeue and not the pod
        itself (pkg/scheduler/schedule_one.go)."""
        a.undo_with(self._failures)
        message = fit_error_message(1, Counter(rejection.reasons))
        self._failures.failed(
            a.fwk,
            a.info,
            Status(rejection.code, (message,), rejection.plugin),
            message,
            a.start,
            RESULT_UNSCHEDULABLE,
            rejectors={rejection.plugin} if rejection.plugin else set(),
            nominated=CLEAR_NOMINATION,
        )
        self._queue.move_all_to_active_or_backoff(
            ASSIGNED_POD_DELETE, a.pod, None, pre_check=lambda pod: pod.uid != a.pod.uid
        )

    def _bound(self, a: Assumed) -> None:
        info, node, start = a.info, a.node, a.start
        pod = info.pod
        profile = a.fwk.profile_name
        now = self._clock.now()
        m = self._metrics
        self._attempts_scheduled(RESULT_SCHEDULED, profile).inc()
        self._attempt_duration_scheduled(RESULT_SCHEDULED, profile).observe(now - start)
        attempts = max(info.attempts, 1)
        m.pod_scheduling_attempts.observe(attempts)
        first = info.initial_attempt_timestamp or info.timestamp
        self._sli_duration(str(min(attempts, 16))).observe(now - first)
        # upstream logs a successful bind at V(2), off by default; at INFO this line
        # was 8% of the process's CPU in the 3000-pod profile (docs/performance.md)
        log.debug("bound pod=%s node=%s", pod.key, node)
        self._events.event(
            pod_ref(pod.namespace, pod.name, pod.uid, pod.resource_version),
            "Normal",
            "Scheduled",
            "Binding",
            f"Successfully assigned {pod.namespace}/{pod.name} to {node}",
            controller=profile,
        )
        self._queue.done(pod.uid)

    def _fenced(self, a: Assumed) -> None:
        """The lease is not surely held: the bind is not sent. The pod is forgotten and
        requeued quietly (no event, no status: this replica is stepping down and the
        next leader schedules it); the fence counted it and nudged the elector."""
        log.info("lease not surely held, bind not sent pod=%s node=%s", a.info.pod.key, a.node)
        a.undo_with(self._failures)
        self._failures.requeue_quietly(a.info)


def _conflict_cause(exc: Conflict) -> str:
    """The API server's two 409s on pods/binding (pkg/registry/core/pod/storage
    setPodNodeAndMetadata): the pod is being deleted, or it is already assigned."""
    if "is being deleted" in exc.message:
        return "pod is being deleted"
    if "already assigned" in exc.message:
        return "already bound"
    return f"conflict: {exc.message}"
