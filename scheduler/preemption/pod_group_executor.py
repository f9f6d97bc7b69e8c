"""Carrying out a pod-group preemption, off the scheduling loop (upstream's executor for a
podgroup preemptor, k8s.io/kubernetes v1.37.2 pkg/scheduler/framework/preemption/
executor.go, asynchronous as KEP-4832's).

One task per PodGroup: every victim but the last is preempted in parallel (at most 16 at
once), then, if none failed, the last. A victim waiting at Permit is rejected in memory;
any other gets DisruptionTarget (`<scheduler>: preempting to accommodate a higher priority
podgroup`) and a DELETE, through the evictions the single-pod executor shares (one call
per victim across all preemptors). Each victim gets a Preempted event naming the
PodGroup: `Preempted by podgroup <uid> on node cluster` (upstream's candidate for a group
is the whole cluster, named "cluster"). The members of an all-members PodGroup among the
victims go together or not at all, as in the single-pod executor (unit_evictions.py:
dry-run DELETEs first, none refused, then all of them, a torn group repaired in the
background).

The members' own statuses (their nominations) are written by the cycle, as upstream's
failure handler writes them. While the task runs, and after it until the cache shows
every victim leaving, the group is gated (DefaultPreemption's PreEnqueue: `waiting for
the preemption for this pod group to be finished`), so it starts no second preemption.
A failed task re-activates the members at once the first time; when the same group's
tasks keep failing, each further re-activation waits longer (the single-pod executor's
Reactivations, with the pod backoff's values): upstream re-activates at once every time,
which turns a refusal that persists (an admission webhook, RBAC) into a loop of cycles
and refused DELETEs many times a second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scheduler.client.events import NORMAL, ObjectRef, pod_ref
from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.config.names import DEFAULT_PREEMPTION
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.preemption.executor import REJECTED_AT_PERMIT, EventSink, PreemptionHandle
from scheduler.preemption.reactivation import Reactivations
from scheduler.preemption.unit_evictions import Unit, UnitDeletion, UnitEvictions
from scheduler.preemption.victim_evictions import VictimEvictions
from scheduler.supervisor import TaskSet

__all__ = ["PodGroupPreemptions"]

log = logging.getLogger(__name__)

CANDIDATE = "cluster"
MAX_PARALLEL = 16
# how long a finished task's victims keep gating the group when the informer never shows
# them leaving (as the single-pod executor's issued_delete_ttl)
AWAIT_TTL = 120.0


@dataclass(eq=False)
class _GroupPreemption:
    group: PodGroupInfo
    members: tuple[PodInfo, ...]
    victims: tuple[PodInfo, ...]
    handle: PreemptionHandle
    units: tuple[Unit, ...] = ()  # the all-members PodGroups among the victims
    errors: list[str] = field(default_factory=list)


class PodGroupPreemptions:
    def __init__(
        self,
        evictions: VictimEvictions,
        events: EventSink,
        *,
        pod_lookup: Callable[[str], PodInfo | None],
        tasks: TaskSet | None = None,
        clock: Clock = SYSTEM_CLOCK,
        retry_initial: float = 1.0,
        retry_max: float = 10.0,
        units: UnitEvictions | None = None,
    ) -> None:
        self._evictions = evictions
        # victims that are an all-members PodGroup's members go together or not at all
        # (unit_evictions.py, shared with the single-pod executor)
        self._units = units
        self._events = events
        self._pod_lookup = pod_lookup
        self._tasks = tasks if tasks is not None else TaskSet("podgroup-preemptions")
        self._clock = clock
        self._running: dict[str, _GroupPreemption] = {}  # PodGroup uid ->
        self._awaiting: dict[str, tuple[tuple[PodInfo, ...], float]] = {}
        # PodGroup uid -> consecutive failed tasks: when its members go back to activeQ
        self._reactivations = Reactivations(clock, retry_initial, retry_max)

    def is_gated(self, group_uid: str) -> bool:
        if group_uid in self._running:
            return True
        awaited = self._awaiting.get(group_uid)
        if awaited is None:
            return False
        victims, ended = awaited
        if self._clock.now() - ended > AWAIT_TTL or not any(
            self._still_running(v) for v in victims
        ):
            del self._awaiting[group_uid]
            return False
        return True

    def _still_running(self, victim: PodInfo) -> bool:
        current = self._pod_lookup(victim.uid)
        return current is not None and not current.is_terminating

    def start(
        self,
        group: PodGroupInfo,
        members: Sequence[PodInfo],
        victims: Sequence[PodInfo],
        handle: PreemptionHandle,
    ) -> None:
        """Victims already terminating need no call; with none left nothing starts."""
        todo = tuple(v for v in victims if not v.is_terminating)
        if not todo or group.uid in self._running:
            return
        g = _GroupPreemption(group, tuple(members), todo, handle)
        if self._units is not None:
            g.units = self._units.units_of(todo)  # as the decision grouped them just now
        self._reactivations.cancel(group.uid)  # a delayed re-activation is overtaken
        self._reactivations.prune(self._clock.now() - AWAIT_TTL)
        self._running[group.uid] = g
        self._awaiting.pop(group.uid, None)
        self._tasks.spawn(self._run(g), name=f"preempt-podgroup-{group.key}")

    def close(self) -> None:
        """Shutdown: delayed re-activations are dropped (the queue is closed)."""
        self._reactivations.close()

    async def shutdown(self, grace: float) -> int:
        """Shutdown: `close`, then let running tasks finish for `grace` seconds and
        cancel the rest, as the single-pod executor's shutdown: a group's deletions cut
        off at the process's exit would leave an all-members group torn. Returns how
        many were cancelled."""
        self.close()
        return await self._tasks.drain(grace)

    async def _run(self, g: _GroupPreemption) -> None:
        ok = False
        try:
            ok = await self._steps(g)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pod group preemption failed podGroup=%s", g.group.key)
        finally:
            self._running.pop(g.group.uid, None)
            delay = self._reactivations.delay_after(g.group.uid, ok, cancelled=False)
            if ok:
                self._awaiting[g.group.uid] = (g.victims, self._clock.now())
            else:
                log.warning(
                    "pod group preemption failed podGroup=%s retry_in=%.1fs errors=%s",
                    g.group.key,
                    delay,
                    g.errors,
                )
                self._reactivations.schedule(
                    g.group.uid, delay, lambda: g.handle.activate(g.members)
                )

    async def _steps(self, g: _GroupPreemption) -> bool:
        # all-members PodGroups among the victims: every member's DELETE dry-run first;
        # one refused, nothing is written to any victim (unit_evictions.py)
        together: UnitDeletion | None = None
        if g.units and self._units is not None:
            together = await self._units.preflight(
                g.units, g.handle.waiting_pods, g.errors, f"podgroup {g.group.key}"
            )
            if together is None:
                return False
        *first, last = g.victims
        slots = asyncio.Semaphore(MAX_PARALLEL)

        async def one(victim: PodInfo) -> bool:
            async with slots:
                good = await self._preempt(g, victim, g.errors)
                if together is not None:
                    together.record(victim, good)
                return good

        good = all(await asyncio.gather(*(one(v) for v in first)))
        if good:  # upstream leaves the last victim alone when any failed
            good = await self._preempt(g, last, g.errors)
            if together is not None:
                together.record(last, good)
        if together is not None:
            together.settle(lambda victim, errors: self._preempt(g, victim, errors, True))
        return good

    async def _preempt(
        self, g: _GroupPreemption, victim: PodInfo, errors: list[str], quiet: bool = False
    ) -> bool:
        if g.handle.waiting_pods.reject(victim.uid, DEFAULT_PREEMPTION, REJECTED_AT_PERMIT):
            self._event(g, victim, in_memory=True)
            return True
        good = await self._evictions.evict(
            victim, g.members[0], CANDIDATE, errors, preemptor_kind="podgroup", quiet=quiet
        )
        if good:
            self._event(g, victim, in_memory=False)
        return good

    def _event(self, g: _GroupPreemption, victim: PodInfo, *, in_memory: bool) -> None:
        note = f"Preempted by podgroup {g.group.uid} on node {CANDIDATE}"
        if in_memory:
            note += " (in kube-scheduler memory)."
        self._events.event(
            pod_ref(victim.namespace, victim.name, victim.uid, victim.resource_version),
            NORMAL,
            "Preempted",
            "Preempting",
            note,
            controller=g.members[0].scheduler_name,
            related=ObjectRef(
                "PodGroup",
                g.group.namespace,
                g.group.name,
                g.group.uid,
                api_version="scheduling.k8s.io/v1beta1",
                resource_version=g.group.resource_version,
            ),
        )

    @property
    def running(self) -> int:
        return len(self._running)
