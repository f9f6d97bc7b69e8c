"""The scheduling cycle and the binding cycle (upstream's scheduleOne).

Scheduling cycle, one pod at a time, no awaits on the API:
  pop -> snapshot -> schedule_pod (PreFilter/Filter/Score) -> assume -> Reserve -> Permit
  -> start the binding task.  A FitError runs PostFilter (preemption) and records the
  failure: the queue keeps the pod as unschedulable, the nominator keeps any nomination,
  and the PodScheduled=False status patch and FailedScheduling event go out as background
  API calls.

Binding cycle, a task per pod, bounded by a semaphore:
  wait at Permit -> PreBind -> Bind (pods/binding) -> PostBind.  Any failure unreserves,
  forgets the assumption and requeues; a 409 (someone else bound it first) forgets the
  assumption and leaves the rest to the informer, which then shows where it really went.

Invariants: a pod is assumed at most once (the cache refuses a second assume); every
assume ends in a bind confirmed by the informer, a forget, or an expiry; queue.done(uid)
is called exactly once per pop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from scheduler.cache import Cache, CacheError, Nominator, Snapshot
from scheduler.client.errors import ApiError, Conflict, LeaseNotHeld
from scheduler.client.events import EventRecorder, pod_ref
from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import FitError
from scheduler.framework.interfaces import PostFilterResult
from scheduler.framework.runtime import Framework
from scheduler.framework.schedule import SchedulingError, SearchState, schedule_pod
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting_pods import WaitingPod
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.status_writer import StatusWriter

log = logging.getLogger(__name__)

RESULT_SCHEDULED = "scheduled"
RESULT_UNSCHEDULABLE = "unschedulable"
RESULT_ERROR = "error"
FENCED_BIND = "create pods/binding"


class BindRejected(Exception):
    """The pod was rejected while waiting at Permit (or the wait timed out)."""


class PreBindFailed(BindRejected):
    """A PreBind plugin failed; its message is upstream's own wording (no prefix)."""


class SchedulingLoop:
    def __init__(
        self,
        *,
        cache: Cache,
        queue: SchedulingQueue[PodInfo],
        nominator: Nominator,
        frameworks: Mapping[str, Framework],
        events: EventRecorder,
        status_writer: StatusWriter,
        metrics: SchedulerMetrics,
        max_binds_in_flight: int = 64,
        clock: Clock = SYSTEM_CLOCK,
        is_pending: Callable[[PodInfo], bool] | None = None,
        fence: Callable[[str], bool] | None = None,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.nominator = nominator
        self.frameworks = frameworks
        self.events = events
        self.status_writer = status_writer
        self.metrics = metrics
        self.clock = clock
        self.snapshot: Snapshot = cache.new_snapshot()
        self.search = SearchState()
        self._bind_slots = asyncio.Semaphore(max_binds_in_flight)
        self._binds: set[asyncio.Task[None]] = set()
        self._stopping = False
        # is the pod (by the informer's view) still pending and ours? guards requeues of
        # pods that were deleted or bound elsewhere while their cycle ran
        self._is_pending = is_pending or (lambda pod: True)
        # leader-election fence (leader.LeaseFence.open): checked right before each bind
        self._fence = fence or (lambda operation: True)
        # told of every FitError after PostFilter (explain keeps the last attempt)
        self.on_unschedulable: Callable[[PodInfo, FitError, str | None], None] | None = None
        self.cycles = 0
        # Sync preemption: what the last cycle's PostFilter asked the loop to await
        self._to_settle: list[Awaitable[object]] = []

    # ------------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Schedule until stop() or the queue closes."""
        while not self._stopping:
            info = await self.queue.pop()
            if info is None:
                return
            try:
                self.schedule_one(info)
            except Exception:  # one pod must never stop the loop, nor be lost
                log.exception("handling a crashed scheduling cycle failed pod=%s", info.pod.key)
                self._requeue_after_crash(info)
            # Sync preemption: the cycle's API calls finish before the next pod is popped
            while self._to_settle:
                await asyncio.gather(self._to_settle.pop(), return_exceptions=True)
            # let informers, binders and the server run between cycles
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._stopping = True

    async def drain_binds(self, grace: float) -> None:
        """Let in-flight binds finish for `grace` seconds, then cancel them (each
        cancelled bind forgets its assumption)."""
        if not self._binds:
            return
        _, pending = await asyncio.wait(set(self._binds), timeout=grace)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    @property
    def binds_in_flight(self) -> int:
        return len(self._binds)

    # ------------------------------------------------------------------ scheduling cycle
    def schedule_one(self, info: QueuedPodInfo[PodInfo]) -> None:
        pod = info.pod
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is None or pod.deletion_timestamp is not None or self.cache.is_assumed(pod):
            self.queue.done(pod.uid)
            return
        self.cycles += 1
        start = self.clock.now()
        state = CycleState()
        progress = _Progress()
        try:
            self._scheduling_cycle(fwk, state, info, start, progress)
        except Exception as exc:
            self._crashed(fwk, state, info, start, progress, exc)

    def _scheduling_cycle(
        self,
        fwk: Framework,
        state: CycleState,
        info: QueuedPodInfo[PodInfo],
        start: float,
        progress: _Progress,
    ) -> None:
        pod = info.pod
        self.cache.update_snapshot(self.snapshot)
        try:
            result = schedule_pod(
                fwk, state, pod, self.snapshot, self.nominator, search=self.search
            )
        except SchedulingError as exc:
            self._failure(fwk, info, exc.status, str(exc), start, RESULT_ERROR)
            return
        algorithm_done = self.clock.now()
        self.metrics.scheduling_algorithm_duration.observe(algorithm_done - start)
        if isinstance(result, FitError):
            self._fit_error(fwk, state, info, result, start)
            return

        node = result.node
        try:
            assumed = self.cache.assume_pod(pod, node)
        except CacheError as exc:
            self._failure(fwk, info, Status.from_error(exc), str(exc), start, RESULT_ERROR)
            return
        progress.assumed, progress.node = assumed, node
        # the pod now holds its place for real; a nomination would count it twice
        self.nominator.remove(pod)
        st = fwk.run_reserve(state, assumed, node)
        if not st.ok:
            self._undo(fwk, state, assumed, node)
            self._failure(fwk, info, st, st.message(), start, _result_of(st))
            return
        st, timeout = fwk.run_permit(state, assumed, node)
        if not st.ok and st.code != Code.WAIT:
            self._undo(fwk, state, assumed, node)
            self._failure(fwk, info, st, st.message(), start, _result_of(st))
            return
        waiting = None
        if st.code == Code.WAIT:
            waiting = WaitingPod(assumed, node)
            fwk.waiting_pods.add(waiting)
        task = asyncio.create_task(
            self._binding_cycle(fwk, state, info, assumed, node, waiting, timeout, start),
            name=f"bind-{pod.key}",
        )
        progress.handed_over = True  # from here on the binding cycle owns the pod
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)
        self.metrics.goroutines.labels(operation="binding").set(len(self._binds))

    def _crashed(
        self,
        fwk: Framework,
        state: CycleState,
        info: QueuedPodInfo[PodInfo],
        start: float,
        progress: _Progress,
        exc: Exception,
    ) -> None:
        """An exception escaped the cycle (a plugin bug, an overflow...). As upstream's
        handleSchedulingFailure with an error status: undo what the cycle did, requeue
        the pod with backoff, tell it with a FailedScheduling event and count the attempt
        as scheduler_schedule_attempts_total{result="error"}. Never dropped."""
        pod = info.pod
        log.error("scheduling cycle crashed pod=%s", pod.key, exc_info=exc)
        if progress.handed_over:
            return  # the binding task owns the pod and will requeue it if it fails
        fwk.waiting_pods.remove(pod.uid)
        if progress.assumed is not None:
            with contextlib.suppress(Exception):
                self._undo(fwk, state, progress.assumed, progress.node)
        message = f"internal error in the scheduling cycle: {type(exc).__name__}: {exc}"
        self._failure(fwk, info, Status.from_error(exc), message, start, RESULT_ERROR)

    def _requeue_after_crash(self, info: QueuedPodInfo[PodInfo]) -> None:
        """Last resort when even the failure handling crashed: back to the queue (with
        backoff) without the event, so the pod is retried rather than forgotten."""
        try:
            self.queue.add_unschedulable_if_not_present(info, (), self.queue.scheduling_cycle)
        except Exception:
            log.exception("requeue after a crashed cycle failed pod=%s", info.pod.key)
        finally:
            self.queue.done(info.pod.uid)

    def _fit_error(
        self,
        fwk: Framework,
        state: CycleState,
        info: QueuedPodInfo[PodInfo],
        fit: FitError,
        start: float,
    ) -> None:
        pod = info.pod
        result: PostFilterResult | None = None
        if fwk.post_filter_plugins:
            result, st = fwk.run_post_filter(state, pod, self.snapshot, fit.diagnosis)
            if st.code == Code.ERROR:
                log.warning("post filter error pod=%s err=%s", pod.key, st.message())
                result = None
            elif not st.ok and result is not None and result.nominated_node_name:
                result = dataclasses.replace(result, nominated_node_name=None)
            if st.reasons:  # upstream: whatever PostFilter said, success included
                fit.diagnosis.post_filter_msg = st.message()
        if result is not None and result.settle is not None:
            self._to_settle.append(result.settle)
        nominated = record_nominations(self.nominator, pod, result)
        message = fit.message()
        if self.on_unschedulable is not None:
            self.on_unschedulable(pod, fit, nominated)
        rejectors = set(fit.diagnosis.unschedulable_plugins)
        self._failure(
            fwk,
            info,
            Status.unschedulable(message),
            message,
            start,
            RESULT_UNSCHEDULABLE,
            rejectors=rejectors,
            nominated=nominated,
            status_by_task=result is not None and result.status_by_task,
        )

    def _undo(self, fwk: Framework, state: CycleState, assumed: PodInfo, node: str) -> None:
        fwk.run_unreserve(state, assumed, node)
        # CacheError: the informer already confirmed the pod somewhere; the cache follows it
        with contextlib.suppress(CacheError):
            self.cache.forget_pod(assumed)

    def _failure(
        self,
        fwk: Framework,
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
        """upstream handleSchedulingFailure: requeue, keep the nomination, tell the pod.
        `nominated` (already in the nominator) goes into the pod's status: a node, ""
        to clear nominatedNodeName, None to leave it."""
        pod = info.pod
        profile = fwk.profile_name
        self.metrics.schedule_attempts.labels(result=result, profile=profile).inc()
        self.metrics.scheduling_attempt_duration.labels(result=result, profile=profile).observe(
            self.clock.now() - start
        )
        if not self._is_pending(pod):
            # deleted or bound elsewhere while the cycle ran: nothing to requeue
            self.queue.done(pod.uid)
            return
        plugins = (
            rejectors if rejectors is not None else ({status.plugin} if status.plugin else set())
        )
        if result == RESULT_ERROR:
            plugins = set()  # an error goes to backoff, whatever the plugin
        self.queue.add_unschedulable_if_not_present(info, plugins, self.queue.scheduling_cycle)
        self.queue.done(pod.uid)
        reason = "SchedulerError" if result == RESULT_ERROR else "Unschedulable"
        log.info("unschedulable pod=%s reason=%s msg=%s", pod.key, reason, message)
        self.events.event(
            pod_ref(pod.namespace, pod.name, pod.uid),
            "Warning",
            "FailedScheduling",
            "Scheduling",
            message,
        )
        # a preemption's own task writes the preemptor's status (nomination included),
        # off the loop; everyone else gets it written here
        if status_by_task:
            self.status_writer.forget(pod.uid)  # the task writes it; remember nothing stale
        else:
            self.status_writer.unschedulable(pod, reason, message, nominated)

    # ------------------------------------------------------------------ binding cycle
    async def _binding_cycle(
        self,
        fwk: Framework,
        state: CycleState,
        info: QueuedPodInfo[PodInfo],
        assumed: PodInfo,
        node: str,
        waiting: WaitingPod | None,
        permit_timeout: float,
        start: float,
    ) -> None:
        pod = info.pod
        profile = fwk.profile_name
        bound = False
        try:
            async with self._bind_slots:
                if waiting is not None:
                    try:
                        st = await asyncio.wait_for(
                            asyncio.shield(waiting.verdict), permit_timeout
                        )
                    except TimeoutError:
                        st = Status.unschedulable("rejected due to timeout after waiting at permit")
                    finally:
                        fwk.waiting_pods.remove(pod.uid)
                    if not st.ok:
                        raise BindRejected(st.message())
                st = await fwk.run_pre_bind(state, assumed, node)
                if not st.ok:
                    raise PreBindFailed(st.message())
                if not self._fence(FENCED_BIND):
                    self._fenced(fwk, state, info, assumed, node)
                    return
                bind_start = self.clock.now()
                st = await fwk.run_bind(state, assumed, node)
                self.metrics.binding_duration.labels(result="ok" if st.ok else "error").observe(
                    self.clock.now() - bind_start
                )
                if not st.ok:
                    if isinstance(st.error, LeaseNotHeld):  # the dispatcher's last check
                        self._fenced(fwk, state, info, assumed, node)
                        return
                    if isinstance(st.error, Conflict):
                        # 409: bound by someone else in between (the informer will tell us
                        # where), or being deleted (the informer will remove it); either
                        # way nothing to requeue
                        log.info(
                            "bind conflict pod=%s node=%s: %s",
                            pod.key,
                            node,
                            _conflict_cause(st.error),
                        )
                        self._undo(fwk, state, assumed, node)
                        self.queue.done(pod.uid)
                        return
                    raise BindRejected(st.message())
                bound = True
                self.cache.finish_binding(assumed)
            fwk.run_post_bind(state, assumed, node)
            now = self.clock.now()
            self.metrics.schedule_attempts.labels(result=RESULT_SCHEDULED, profile=profile).inc()
            self.metrics.scheduling_attempt_duration.labels(
                result=RESULT_SCHEDULED, profile=profile
            ).observe(now - start)
            attempts = max(info.attempts, 1)
            self.metrics.pod_scheduling_attempts.observe(attempts)
            first = info.initial_attempt_timestamp or info.timestamp
            self.metrics.pod_scheduling_sli_duration.labels(
                attempts=str(min(attempts, 16))
            ).observe(now - first)
            log.info("bound pod=%s node=%s", pod.key, node)
            self.events.event(
                pod_ref(pod.namespace, pod.name, pod.uid),
                "Normal",
                "Scheduled",
                "Binding",
                f"Successfully assigned {pod.namespace}/{pod.name} to {node}",
            )
            self.queue.done(pod.uid)
        except asyncio.CancelledError:
            if not bound:
                self._undo(fwk, state, assumed, node)
                self.queue.done(pod.uid)
            raise
        except (BindRejected, ApiError) as exc:
            self._undo(fwk, state, assumed, node)
            # the room it held is free again: others may fit now
            self.queue.assigned_pod_deleted(assumed)
            self._failure(
                fwk,
                info,
                Status(Code.ERROR, (str(exc),)),
                str(exc) if isinstance(exc, PreBindFailed) else f"binding rejected: {exc}",
                start,
                RESULT_ERROR,
            )
        except Exception as exc:
            log.exception("binding cycle crashed pod=%s", pod.key)
            self._undo(fwk, state, assumed, node)
            self._failure(
                fwk, info, Status.from_error(exc), f"binding failed: {exc}", start, RESULT_ERROR
            )
        finally:
            self.metrics.goroutines.labels(operation="binding").set(len(self._binds) - 1)

    def _fenced(
        self,
        fwk: Framework,
        state: CycleState,
        info: QueuedPodInfo[PodInfo],
        assumed: PodInfo,
        node: str,
    ) -> None:
        """The lease is not surely held: the bind is not sent. The pod is forgotten and
        requeued quietly (no event, no status: this replica is stepping down and the
        next leader schedules it); the fence counted it and nudged the elector."""
        pod = info.pod
        log.info("lease not surely held, bind not sent pod=%s node=%s", pod.key, node)
        self._undo(fwk, state, assumed, node)
        if self._is_pending(pod):
            self.queue.add_unschedulable_if_not_present(info, (), self.queue.scheduling_cycle)
        self.queue.done(pod.uid)


def record_nominations(
    nominator: Nominator, pod: PodInfo, result: PostFilterResult | None
) -> str | None:
    """Apply what PostFilter asked for to the nominator, which only the scheduling loop
    writes (besides the informers' view of nominatedNodeName). The nomination goes in
    before the next pod is popped, so pods of lower or equal priority cannot take the
    room a preemption frees. The lower-priority nominations it displaced are dropped at
    once (its task clears them in the API). Returns the pod's nomination for its status:
    a node, "" to clear nominatedNodeName (only when the API holds one; otherwise the
    next informer update would bring it back), or None to leave it."""
    if result is None:
        return None
    for other in result.cleared:
        nominator.remove(other)
    node = result.nominated_node_name
    if node is None:
        return None
    if node == "":
        nominator.remove(pod)
        return "" if pod.nominated_node_name else None
    nominator.add(pod, node)
    return node


@dataclass
class _Progress:
    """How far a scheduling cycle got, so a crash can be undone."""

    assumed: PodInfo | None = None
    node: str = ""
    handed_over: bool = False


def _conflict_cause(exc: Conflict) -> str:
    """The API server's two 409s on pods/binding (pkg/registry/core/pod/storage
    setPodNodeAndMetadata): the pod is being deleted, or it is already assigned."""
    if "is being deleted" in exc.message:
        return "pod is being deleted"
    if "already assigned" in exc.message:
        return "already bound"
    return f"conflict: {exc.message}"


def _result_of(status: Status) -> str:
    return RESULT_UNSCHEDULABLE if status.is_rejected else RESULT_ERROR


__all__ = ["BindRejected", "SchedulingLoop", "StatusWriter", "record_nominations"]
