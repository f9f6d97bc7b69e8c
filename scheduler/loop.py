"""The scheduling loop and its scheduling cycle (upstream's scheduleOne).

Scheduling cycle, one pod at a time, no awaits on the API:
  pop -> snapshot -> the profile's algorithm (scheduler/algorithm: PreFilter/Filter/Score)
  -> assume -> Reserve -> Permit
  -> hand the pod to its binding task (binding_cycle.py).  A FitError runs PostFilter
  (preemption) and records the failure (scheduling_failure.py): the queue keeps the pod
  as unschedulable, the nominator keeps any nomination, and the PodScheduled=False status
  patch and FailedScheduling event go out as background API calls.

The loop is the nominator's only writer in the scheduling path: PostFilter plugins return
what to nominate (PostFilterResult) and `record_nominations` applies it.

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

from scheduler.algorithm import SchedulePod, SchedulingError
from scheduler.binding_cycle import FENCED_BIND, Assumed, BindingCycles, BindRejected
from scheduler.cache import Cache, CacheError, Nominator, Snapshot
from scheduler.client.connection import WRITES_IN_FLIGHT
from scheduler.client.events import WARNING, EventRecorder, pod_ref
from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import FitError
from scheduler.framework.interfaces import PostFilterResult
from scheduler.framework.scheduling_framework import SchedulingFramework
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting_pods import WaitingPod
from scheduler.group_cycle import GroupCycle
from scheduler.group_status_writer import GroupStatusWriter
from scheduler.metrics import PodGroupMetrics, SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.scheduling_failure import (
    RESULT_ERROR,
    RESULT_UNSCHEDULABLE,
    FailureHandler,
    result_of,
)
from scheduler.status_writer import StatusWriter
from scheduler.supervisor import TaskSet

log = logging.getLogger(__name__)

# a standby's snapshot refresh (SchedulingLoop.keep_snapshot_current): how often, and how
# many changed node entries one step copies before the event loop gets a turn (explain
# builds its snapshot in steps of the same size: 200 entries take 2-10 ms at 5000 nodes)
STANDBY_REFRESH_S = 1.0
STANDBY_REFRESH_STEP = 200


class SchedulingLoop:
    def __init__(
        self,
        *,
        cache: Cache,
        queue: SchedulingQueue[PodInfo],
        nominator: Nominator,
        frameworks: Mapping[str, SchedulingFramework],
        algorithms: Mapping[str, SchedulePod],
        events: EventRecorder,
        status_writer: StatusWriter,
        metrics: SchedulerMetrics,
        max_binds_in_flight: int = WRITES_IN_FLIGHT,
        clock: Clock = SYSTEM_CLOCK,
        current_pod: Callable[[PodInfo], PodInfo | None] | None = None,
        fence: Callable[[str], bool] | None = None,
        binds: TaskSet | None = None,
        pod_group_metrics: PodGroupMetrics | None = None,
        pod_group_conditions: GroupStatusWriter | None = None,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.nominator = nominator
        self.frameworks = frameworks
        # per profile, the scheduling of one pod (algorithm.ProfileAlgorithm)
        self.algorithms = algorithms
        self.metrics = metrics
        self.clock = clock
        self.snapshot: Snapshot = cache.new_snapshot()
        self.search = SearchState()
        self.failures = FailureHandler(
            cache=cache,
            queue=queue,
            events=events,
            status_writer=status_writer,
            metrics=metrics,
            clock=clock,
            # without an informer (tests) the popped pod is taken as current
            current_pod=current_pod or (lambda pod: pod),
        )
        self.binding = BindingCycles(
            self.failures,
            events,
            metrics,
            max_in_flight=max_binds_in_flight,
            fence=fence,
            tasks=binds,
        )
        # GenericWorkload: members of a PodGroup are scheduled together (group_cycle.py)
        self.group_cycle: GroupCycle | None = None
        if pod_group_metrics is not None:
            self.group_cycle = GroupCycle(
                cache=cache, queue=queue, nominator=nominator, frameworks=frameworks,
                algorithms=algorithms, failures=self.failures, binding=self.binding,
                metrics=pod_group_metrics, clock=clock, conditions=pod_group_conditions,
            )  # fmt: skip
        self._stopping = False
        # told of every FitError after PostFilter (explain keeps the last attempt)
        self.on_unschedulable: Callable[[PodInfo, FitError, str | None], None] | None = None
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
                self.failures.requeue_quietly(info)
            # Sync preemption: the cycle's API calls finish before the next pod is popped
            while self._to_settle:
                await asyncio.gather(self._to_settle.pop(), return_exceptions=True)
            # let informers, binders and the server run between cycles
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._stopping = True

    async def keep_snapshot_current(
        self,
        leading: asyncio.Event,
        period: float = STANDBY_REFRESH_S,
        step: int = STANDBY_REFRESH_STEP,
    ) -> None:
        """While this replica stands by for the lease, bring the loop's snapshot up to
        date every `period`, `step` changed node entries at a time with the event loop
        given back between steps; return once `leading` is set.

        Why: the snapshot is made when the loop is, before the informers list anything,
        and only a cycle updates it. A standby that wins the lease would otherwise copy
        every node and its pods in its first cycle (60-110 ms of CPU at 5000 nodes and
        20000 pods, bench.cycle's cluster, in one step that holds the event loop); kept
        current, the first cycle copies what changed in the last `period`. Upstream's
        standby builds nothing before it leads either; this is beyond it.

        Only while the loop does not run: `leading` is checked before every step and the
        steps are synchronous, so once it is set no step touches the snapshot the loop
        now owns. The cache's tombstones are left for the loop's own update to purge
        (Cache.refresh_snapshot writes nothing of the cache)."""
        while not leading.is_set():
            if self.cache.refresh_snapshot(self.snapshot, step):
                await asyncio.sleep(0)  # more to copy: the others' turn, then the next step
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(leading.wait(), period)

    async def drain_binds(self, grace: float) -> None:
        await self.binding.drain(grace)

    @property
    def binds_in_flight(self) -> int:
        return len(self.binding)

    # ------------------------------------------------------------------ scheduling cycle
    def schedule_one(self, info: QueuedPodInfo[PodInfo]) -> None:
        pod = info.pod
        # every popped pod is a cycle, skipped ones included (upstream's queue counts
        # each Pop): opportunistic batching reuses results only in the very next cycle
        self.search.cycle += 1
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is not None and pod.deletion_timestamp is not None:
            # upstream skipPodSchedule (schedule_one.go) tells a deleting pod it is skipped
            log.debug("skip schedule deleting pod=%s", pod.key)
            self.failures.events.event(
                pod_ref(pod.namespace, pod.name, pod.uid, pod.resource_version), WARNING,
                "FailedScheduling", "Scheduling",
                f"skip schedule deleting pod: {pod.namespace}/{pod.name}",
                controller=fwk.profile_name,
            )  # fmt: skip
        if fwk is None or pod.deletion_timestamp is not None or self.cache.is_assumed(pod):
            self.queue.done(pod.uid)
            return
        if pod.pod_group and self.group_cycle is not None:
            self.group_cycle.run(info, self.snapshot, self.search)
            return
        start = self.clock.now()
        state = CycleState()
        progress = _Progress()
        try:
            self._scheduling_cycle(fwk, state, info, start, progress)
        except Exception as exc:
            self._crashed(fwk, state, info, start, progress, exc)

    def _scheduling_cycle(
        self,
        fwk: SchedulingFramework,
        state: CycleState,
        info: QueuedPodInfo[PodInfo],
        start: float,
        progress: _Progress,
    ) -> None:
        pod = info.pod
        self.cache.update_snapshot(self.snapshot)
        try:
            schedule = self.algorithms[fwk.profile_name]
            result = schedule(state, pod, self.snapshot, self.nominator, self.search)
        except SchedulingError as exc:
            self.failures.failed(fwk, info, exc.status, str(exc), start, RESULT_ERROR)
            return
        self.metrics.scheduling_algorithm_duration.observe(self.clock.now() - start)
        if isinstance(result, FitError):
            self._fit_error(fwk, state, info, result, start)
            return

        node = result.node
        try:
            assumed = self.cache.assume_pod(pod, node)
        except CacheError as exc:
            self.failures.failed(fwk, info, Status.from_error(exc), str(exc), start, RESULT_ERROR)
            return
        progress.assumed, progress.node = assumed, node
        # the pod now holds its place for real; a nomination would count it twice
        self.nominator.remove(pod)
        st = fwk.run_reserve(state, assumed, node)
        if not st.ok:
            self.failures.undo(fwk, state, assumed, node)
            self.failures.failed(fwk, info, st, st.message(), start, result_of(st))
            return
        st, timeout = fwk.run_permit(state, assumed, node)
        if not st.ok and st.code != Code.WAIT:
            self.failures.undo(fwk, state, assumed, node)
            self.failures.failed(fwk, info, st, st.message(), start, result_of(st))
            return
        waiting = None
        if st.code == Code.WAIT:
            # timed from now, as upstream's newWaitingPod arms its timers in the cycle
            waiting = WaitingPod(assumed, node, plugin=st.plugin, timeout=timeout)
            fwk.waiting_pods.add(waiting)
        self.binding.start(Assumed(fwk, state, info, assumed, node, start), waiting)
        progress.handed_over = True  # from here on the binding cycle owns the pod

    def _crashed(
        self,
        fwk: SchedulingFramework,
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
                self.failures.undo(fwk, state, progress.assumed, progress.node)
        message = f"internal error in the scheduling cycle: {type(exc).__name__}: {exc}"
        self.failures.failed(fwk, info, Status.from_error(exc), message, start, RESULT_ERROR)

    def _fit_error(
        self,
        fwk: SchedulingFramework,
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
        self.failures.failed(
            fwk,
            info,
            Status.unschedulable(message),
            message,
            start,
            RESULT_UNSCHEDULABLE,
            rejectors=set(fit.diagnosis.unschedulable_plugins),
            nominated=nominated,
            status_by_task=result is not None and result.status_by_task,
        )


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


__all__ = [
    "FENCED_BIND",
    "BindRejected",
    "SchedulingLoop",
    "StatusWriter",
    "record_nominations",
]
