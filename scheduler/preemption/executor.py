"""The preemption executor: turns a Decision into API calls, off the scheduling loop.

One task per preemption (KEP-4832's "goroutine"), steps in the contract's order:

1. clear nominatedNodeName of the lower-priority pods nominated to the node (status
   patch to null); a failure is noted and the task goes on;
2. patch the preemptor's status: PodScheduled=False (Unschedulable) and
   nominatedNodeName=<node> (upstream does this in the loop unless its async-API-calls
   gate is on; here always in the task);
3. preempt every victim but the last in parallel, at most `max_parallel_victims` at once
   (victims already terminating are left out, and are never the last, as upstream):
   a victim waiting at Permit is rejected in memory; any other gets the DisruptionTarget
   condition (only if not present) and a DELETE (uid precondition, default grace).
   NotFound counts as success. Each preempted victim gets a Preempted event.
   GenericWorkload: the members of an all-members PodGroup among the victims go
   together or not at all (unit_evictions.py): each member's DELETE is dry-run first,
   one refused and no victim is written to (the task fails); passed, every member is
   preempted even after another victim failed, and a member that still fails once a
   sibling went is retried in the background;
4. if any of those failed, the last victim is left alone; otherwise it is recorded as
   this preemptor's last victim (the PreEnqueue gate watches it) and preempted;
5. finish: the preemptor leaves "preempting", metrics get the real result and the real
   duration (upstream records 'success' and ~0 s because its deferred calls capture the
   values too early);
6. on error the preemptor is requeued at once, its nomination kept; if the same
   preemptor's tasks keep failing, each further re-activation waits longer (settings
   retry_initial/retry_max, the pod backoff), so a persistent refusal is no hot loop;
7. the preemptor is always re-activated when the task ends (k/k #141694: upstream waits
   for victim delete events, which may never come when the last victim was already gone).
   After a success the PreEnqueue gate still holds it until the cache shows every
   victim it preempted terminating or gone (`is_gated`; upstream watches the last one
   only): the DELETE's answer comes before the informer's update, and a retry in
   between would see a victim running and decide a second preemption.

When a preemptor comes back is answered in one place, `is_gated`, a read over this
executor's state and the cache: DefaultPreemption's PreEnqueue and queueing hints only
ask it, and only the executor's own steps change that state.

Victims already terminating get no call. A victim whose DELETE another preemptor has in
flight is not deleted again: the second task waits for the first call's outcome; one
whose DELETE already succeeded is skipped (tracked by uid for `issued_delete_ttl`, until
the informer shows the deletionTimestamp). Whatever the victims, the preemptor is gated
until its own status patch (step 2) is written: a retry that bound it first would turn
that nominatedNodeName patch into a 422 ("may not be set on pods that are already bound
to a node") and a failed preemption.

Sync mode runs the same task; DefaultPreemption hands it to the loop, which awaits it
before the next pod.

The executor reaches the scheduling queue and the pods waiting at Permit only through
the framework handle of the preemption it runs (`start(decision, message, handle)`), as
upstream's executor goes through its framework handle.

All bookkeeping is touched only from the event loop thread; nothing here blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.client.errors import ApiError, LeaseNotHeld, NotFound
from scheduler.client.events import NORMAL, ObjectRef, pod_ref
from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.config.names import DEFAULT_PREEMPTION
from scheduler.framework.waiting_pods import WaitingPods
from scheduler.metrics import SchedulerMetrics
from scheduler.model.pod import (
    PodInfo,
)
from scheduler.preemption.evaluator import Decision
from scheduler.preemption.reactivation import Reactivations
from scheduler.preemption.unit_evictions import Unit, UnitDeletion, UnitEvictions
from scheduler.preemption.victim_evictions import (
    FENCED_PATCH,
    PodWriter,
    VictimEvictions,
)
from scheduler.supervisor import TaskSet
from scheduler.timestamps import rfc3339

__all__ = [
    "RESULT_ERROR",
    "RESULT_SUCCESS",
    "EventSink",
    "ExecutorSettings",
    "PodWriter",
    "PreemptionExecutor",
]

log = logging.getLogger(__name__)

RESULT_SUCCESS = "success"
RESULT_ERROR = "error"
OPERATION = "preemption"
REJECTED_AT_PERMIT = "preempted"


class EventSink(Protocol):
    """client.events.EventRecorder's caller side."""

    def event(
        self,
        regarding: ObjectRef,
        type: str,
        reason: str,
        action: str,
        note: str,
        *,
        controller: str | None = None,
        related: ObjectRef | None = None,
    ) -> None: ...


class PreemptionHandle(Protocol):
    """What a preemption task needs of its framework handle (framework.Handle is one):
    activate(pods) moves pods to activeQ now; waiting_pods lets it reject a victim held
    at Permit in memory (no API call)."""

    @property
    def waiting_pods(self) -> WaitingPods: ...
    def activate(self, pods: Iterable[PodInfo]) -> None: ...


def _still_running(pod: PodInfo | None) -> bool:
    return pod is not None and not pod.is_terminating


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class ExecutorSettings:
    max_parallel_victims: int = 16
    """victims preempted at once by one task (upstream: the parallelism, 16)."""
    issued_delete_ttl: float = 120.0
    """seconds a successful DELETE is remembered by uid, so a concurrent preemptor does
    not delete the same victim again before the informer shows its deletionTimestamp."""
    retry_initial: float = 1.0
    retry_max: float = 10.0
    """A failed task re-activates its preemptor at once; after consecutive failures of
    the same preemptor the re-activation waits retry_initial * 2^(n-2) seconds (n >= 2),
    at most retry_max: a refusal that persists (an admission webhook, RBAC) must not turn
    into a retry loop hammering the API server. The app sets the pod backoff values."""


@dataclass(slots=True, eq=False)
class _Preemption:
    decision: Decision
    message: str
    gated: bool
    handle: PreemptionHandle
    last_victim: PodInfo | None = None
    # the all-members PodGroups among the victims (GenericWorkload): deleted together
    units: tuple[Unit, ...] = ()
    # the preemptor's own status patch (step 2) is on its way: its bind must not overtake
    # it (a nominatedNodeName patch on a bound pod is a 422)
    status_pending: bool = True
    task: asyncio.Task[bool] | None = None
    errors: list[str] = field(default_factory=list)


class PreemptionExecutor:
    """Shared by every profile of the process, so victim bookkeeping spans all
    preemptors."""

    def __init__(
        self,
        writer: PodWriter,
        events: EventSink,
        *,
        pod_lookup: Callable[[str], PodInfo | None],
        metrics: SchedulerMetrics | None = None,
        settings: ExecutorSettings | None = None,
        clock: Clock = SYSTEM_CLOCK,
        wall: Callable[[], dt.datetime] = _utcnow,
        fence: Callable[[str], bool] | None = None,
        tasks: TaskSet | None = None,
        units: UnitEvictions | None = None,
    ) -> None:
        self._writer = writer
        # GenericWorkload: victims that are an all-members PodGroup's members go together
        # or not at all (unit_evictions.py); None: every victim for itself
        self._units = units
        # leader-election fence (leader.LeaseFence.open): checked right before each
        # status patch and victim DELETE; closed, the call is not made (LeaseNotHeld,
        # handled as that call's failure: the task fails, the preemptor is requeued)
        self._fence = fence or (lambda operation: True)
        self._events = events
        # uid -> the pod as the cache shows it now (None: gone): the gate's eyes
        self._pod_lookup = pod_lookup
        self._metrics = metrics
        self.settings = settings or ExecutorSettings()
        if self.settings.max_parallel_victims < 1:
            raise ValueError("max_parallel_victims must be >= 1")
        self._clock = clock
        self._wall = wall
        self._running: dict[str, _Preemption] = {}  # preemptor uid -> its preemption
        self._tasks = tasks if tasks is not None else TaskSet("preemptions")
        self._evictions = self.evictions = VictimEvictions(
            # through the attribute, so a fence swapped in later (tests) applies too
            writer,
            lambda op: self._fence(op),
            clock,
            wall,
            self.settings.issued_delete_ttl,
        )
        # preemptor uid -> (victims it preempted, when its task ended): a successful
        # task's preemptor stays gated until the cache shows every one of them leaving
        self._awaiting: dict[str, tuple[tuple[PodInfo, ...], float]] = {}
        # preemptor uid -> (consecutive failed tasks, when the last one ended)
        self._reactivations = Reactivations(
            clock, self.settings.retry_initial, self.settings.retry_max
        )
        self._closed = False

    # ------------------------------------------------------------------ reads

    def is_running(self, uid: str) -> bool:
        """A preemption task for this preemptor has not finished (it writes the
        preemptor's status, so the loop must not)."""
        return uid in self._running

    def is_gated(self, uid: str) -> bool:
        """The one answer to "may this preemptor be tried again now?": DefaultPreemption's
        PreEnqueue and its queueing hints only ask this. Gated while its task runs and
        its own status patch is on its way, or it has victims to preempt and the victim
        recorded last (step 4) is not recorded yet or still shows running in the cache;
        after a successful task, while a victim it preempted still shows running (for at
        most `issued_delete_ttl`: an informer that never tells must not hold it forever).
        A read: the executor's state changes only in its own steps (start, the task,
        finish)."""
        p = self._running.get(uid)
        if p is not None:
            if p.status_pending:
                return True
            if not p.gated:
                return False
            return p.last_victim is None or self._still_running(p.last_victim)
        return self._first_outstanding(uid) is not None

    def last_victim(self, uid: str) -> PodInfo | None:
        """The victim the gate watches: while the task runs, the one recorded in step 4
        once the others were preempted; after a successful task, the first victim it
        preempted that the cache still shows running."""
        p = self._running.get(uid)
        if p is not None:
            return p.last_victim
        return self._first_outstanding(uid)

    def _first_outstanding(self, uid: str) -> PodInfo | None:
        awaited = self._awaiting.get(uid)
        if awaited is None:
            return None
        victims, ended = awaited
        if ended < self._clock.now() - self.settings.issued_delete_ttl:
            return None
        return next((v for v in victims if self._still_running(v)), None)

    def _still_running(self, victim: PodInfo) -> bool:
        return _still_running(self._pod_lookup(victim.uid))

    def delete_issued(self, uid: str) -> bool:
        """A DELETE for this victim is in flight or succeeded recently."""
        return self._evictions.issued(uid)

    def needs_call(self, victim: PodInfo) -> bool:
        """Whether preempting this victim takes an API call (or waiting on one): not when
        it is terminating already, or its DELETE already succeeded."""
        return not victim.is_terminating and not self._evictions.succeeded(victim.uid)

    # ------------------------------------------------------------------ async mode

    def start(
        self, decision: Decision, message: str, handle: PreemptionHandle
    ) -> asyncio.Task[bool]:
        """Start the background task for `decision` (needs a running event loop).
        `message` goes into the preemptor's PodScheduled condition; `handle` is the
        preemptor's framework handle. The task's result is True on success; it never
        raises (but is cancelled by shutdown)."""
        if self._closed:
            raise RuntimeError("PreemptionExecutor is shut down")
        uid = decision.preemptor.uid
        if uid in self._running:
            raise RuntimeError(f"a preemption for {decision.preemptor.key} is already running")
        self._prune()
        self._awaiting.pop(uid, None)
        self._reactivations.cancel(uid)
        gated = any(self.needs_call(v) for v in decision.victims)
        p = _Preemption(decision, message, gated, handle)
        if self._units is not None:
            # grouped by the cache's PodGroups now, as the decision just grouped them
            p.units = self._units.units_of([v for v in decision.victims if not v.is_terminating])
        self._running[uid] = p
        task = self._tasks.spawn(self._background(p), name=f"preempt-{decision.preemptor.key}")
        p.task = task
        self._set_goroutines()
        return task

    async def _background(self, p: _Preemption) -> bool:
        start = self._clock.now()
        result = RESULT_ERROR
        cancelled = False
        try:
            ok = await self._steps(p)
            result = RESULT_SUCCESS if ok else RESULT_ERROR
            return ok
        except asyncio.CancelledError:
            log.info("preemption cancelled preemptor=%s", p.decision.preemptor.key)
            cancelled = True
            raise
        except Exception:  # a bug must not strand the preemptor: fall through to finish
            log.exception("preemption task crashed preemptor=%s", p.decision.preemptor.key)
            return False
        finally:
            self._finish(p, result, self._clock.now() - start, cancelled)

    def _finish(self, p: _Preemption, result: str, elapsed: float, cancelled: bool) -> None:
        decision = p.decision
        preemptor = decision.preemptor
        if self._running.get(preemptor.uid) is p:
            del self._running[preemptor.uid]
        self._prune()
        self._await_last_victim(p, result)
        self._set_goroutines()
        if self._metrics is not None:
            self._metrics.preemption_goroutines_execution.labels(result=result).inc()
            self._metrics.preemption_goroutines_duration.labels(result=result).observe(elapsed)
        delay = self._reactivations.delay_after(preemptor.uid, result == RESULT_SUCCESS, cancelled)
        if result == RESULT_ERROR:
            log.warning(
                "preemption failed, requeueing preemptor=%s node=%s retry_in=%.1fs errors=%s",
                preemptor.key,
                decision.node,
                delay,
                "; ".join(p.errors) or "cancelled",
            )
        else:
            log.info(
                "preemption finished preemptor=%s node=%s victims=%d seconds=%.3f",
                preemptor.key,
                decision.node,
                len(decision.victims),
                elapsed,
            )
        # steps 6 and 7: requeue on error (at once, unless it keeps failing), re-activate
        # always (the nomination stays in the nominator either way)
        self._reactivations.schedule(preemptor.uid, delay, lambda: self._activate(p))

    def _activate(self, p: _Preemption) -> None:
        preemptor = p.decision.preemptor
        try:
            p.handle.activate([preemptor])
        except Exception:
            log.exception("activating the preemptor failed preemptor=%s", preemptor.key)

    def _await_last_victim(self, p: _Preemption, result: str) -> None:
        # success with victims that took a call: the answers to their DELETEs came
        # before the informer shows the deletionTimestamps. The final activation must
        # not retry the preemptor against a cache that still shows a victim running
        # (it would decide a second preemption): the gate holds it until every victim
        # is seen leaving. Upstream watches the last victim only, trusting that the
        # others' deletions were written first; that fails when a victim's DELETE was
        # issued earlier by another preemptor (skipped here), so all are watched. On
        # error the preemptor is requeued at once (step 6).
        if result != RESULT_SUCCESS or p.last_victim is None:
            return
        victims = tuple(v for v in p.decision.victims if not v.is_terminating)
        if victims:
            self._awaiting[p.decision.preemptor.uid] = (victims, self._clock.now())

    def _set_goroutines(self) -> None:
        if self._metrics is not None:
            self._metrics.goroutines.labels(operation=OPERATION).set(len(self._running))

    # ------------------------------------------------------------------ the steps

    async def _steps(self, p: _Preemption) -> bool:
        d = p.decision
        preemptor = d.preemptor
        log.info(
            "preempting preemptor=%s node=%s victims=%d",
            preemptor.key,
            d.node,
            len(d.victims),
        )
        ok = True
        # 1. lower-priority nominations on the node no longer hold
        cleared: list[PodInfo] = []
        for pod in d.lower_priority_nominated:
            try:
                self._check_fence(FENCED_PATCH)
                await self._writer.patch_pod_status(
                    pod.namespace, pod.name, {"status": {"nominatedNodeName": None}}
                )
                cleared.append(pod)
            except NotFound:
                pass
            except ApiError as exc:
                ok = False
                p.errors.append(f"clear nomination of {pod.key}: {exc}")
                log.warning(
                    "clearing nomination failed pod=%s node=%s err=%s", pod.key, d.node, exc
                )
        if cleared:
            # our queue ignores status-only updates: let them look for another node now
            with contextlib.suppress(Exception):
                p.handle.activate(cleared)

        # 2. the preemptor's status, with its nomination
        try:
            self._check_fence(FENCED_PATCH)
            await self._writer.patch_pod_status(
                preemptor.namespace, preemptor.name, self._preemptor_patch(p)
            )
        except NotFound:
            p.errors.append(f"preemptor {preemptor.key} is gone")
            log.info("preemptor gone, not preempting preemptor=%s", preemptor.key)
            return False
        except ApiError as exc:
            ok = False
            p.errors.append(f"preemptor status: {exc}")
            log.warning("preemptor status patch failed preemptor=%s err=%s", preemptor.key, exc)
        finally:
            p.status_pending = False

        # victims already terminating get no call, and are never the "last" one the
        # gate watches (as upstream): their deletion was written before ours, so seeing
        # them leave says nothing about the victims this task deletes
        victims = [v for v in d.victims if not v.is_terminating]
        if not victims:
            return ok

        # all-members PodGroups among them: every member's DELETE dry-run first; one
        # refused, nothing is written to any victim (unit_evictions.py)
        together: UnitDeletion | None = None
        if p.units and self._units is not None:
            together = await self._units.preflight(
                p.units, p.handle.waiting_pods, p.errors, preemptor.key
            )
            if together is None:
                return False

        # 3. all victims but the last, in parallel (bounded)
        *first, last = victims
        slots = asyncio.Semaphore(self.settings.max_parallel_victims)
        failed = False

        async def one(victim: PodInfo) -> bool:
            nonlocal failed
            async with slots:
                # as upstream's cancelled context: do not start more calls, except for
                # the members of a unit that passed its preflight (all of them go)
                if failed and not (together is not None and together.holds(victim)):
                    return False
                good = await self._preempt_victim(p, victim, p.errors)
                if together is not None:
                    together.record(victim, good)
                if not good:
                    failed = True
                return good

        results = await asyncio.gather(*(one(v) for v in first))
        good = all(results)
        if good:
            # 4. record, then preempt, the last victim
            p.last_victim = last
            good = await self._preempt_victim(p, last, p.errors)
            if together is not None:
                together.record(last, good)
        # else 4. the last victim is left alone (but for a torn unit's repair)
        if together is not None:
            together.settle(lambda victim, errors: self._preempt_victim(p, victim, errors, True))
        return good and ok

    def _preemptor_patch(self, p: _Preemption) -> dict[str, Any]:
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "lastTransitionTime": rfc3339(self._wall()),
        }
        if p.message:
            condition["message"] = p.message
        return {"status": {"conditions": [condition], "nominatedNodeName": p.decision.node}}

    async def _preempt_victim(
        self, p: _Preemption, victim: PodInfo, errors: list[str], quiet: bool = False
    ) -> bool:
        """One victim, by the rules above. True when it is (being) gone; a failure is
        appended to `errors` (logged at debug level when `quiet`: a torn unit's retry)."""
        d = p.decision
        if victim.is_terminating:
            log.debug(
                "victim already terminating, no call victim=%s preemptor=%s",
                victim.key,
                d.preemptor.key,
            )
            return True
        if p.handle.waiting_pods.reject(victim.uid, DEFAULT_PREEMPTION, REJECTED_AT_PERMIT):
            log.info(
                "rejected waiting pod preemptor=%s victim=%s node=%s",
                d.preemptor.key,
                victim.key,
                d.node,
            )
            self._preempted_event(d, victim, in_memory=True)
            return True
        good = await self._evictions.evict(victim, d.preemptor, d.node, errors, quiet=quiet)
        if good:
            self._preempted_event(d, victim, in_memory=False)
        return good

    def _check_fence(self, operation: str) -> None:
        if not self._fence(operation):
            raise LeaseNotHeld(operation)

    def _preempted_event(self, d: Decision, victim: PodInfo, *, in_memory: bool) -> None:
        pre = d.preemptor
        # upstream's words (framework/preemption/executor.go NewExecutor's PreemptPod):
        # the preemptor by its kind and UID, and a suffix for a victim stopped at Permit
        note = f"Preempted by pod {pre.uid} on node {d.node}"
        if in_memory:
            note += " (in kube-scheduler memory)."
        self._events.event(
            pod_ref(victim.namespace, victim.name, victim.uid, victim.resource_version),
            NORMAL,
            "Preempted",
            "Preempting",
            note,
            # upstream sends it through the preemptor's profile's recorder, with the
            # preemptor as the related object (framework/preemption/executor.go)
            controller=pre.scheduler_name,
            related=pod_ref(pre.namespace, pre.name, pre.uid, pre.resource_version),
        )

    def _prune(self) -> None:
        """Forget what no longer gates anyone (called from the executor's own steps):
        issued DELETEs past their ttl, failure counts past it, and finished tasks'
        victim lists whose victims all left or whose ttl ran out (a preemptor deleted
        while awaiting them, or an informer that never told)."""
        self._evictions.prune()
        horizon = self._clock.now() - self.settings.issued_delete_ttl
        self._reactivations.prune(horizon)
        for uid in [u for u in self._awaiting if self._first_outstanding(u) is None]:
            del self._awaiting[uid]

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self, grace: float) -> int:
        """Take no new preemptions; let running tasks finish for `grace` seconds, then
        cancel the rest (each still finishes: leaves "preempting", records metrics,
        re-activates its preemptor). Returns how many were cancelled."""
        self._closed = True
        self._reactivations.close()
        return await self._tasks.drain(grace)
