"""The victims of an all-members PodGroup are deleted together or not at all
(GenericWorkload; a deliberate departure from upstream).

A PodGroup whose `spec.disruptionMode` is `all` is preempted as one unit: every scheduled
member goes, whether pod-group preemption (pod_group_preemption.py) or a single pod's
(unit_victims.py) chose it. Upstream deletes a unit's members as any victims, in parallel
and without asking first (k8s.io/kubernetes v1.37.2 pkg/scheduler/framework/preemption/
executor.go prepareCandidateAsync: Parallelizer().Until over all victims but the last,
then the last if none failed), so a member whose DELETE an admission webhook refuses
survives its siblings' deletion: a torn group. Here both executors, for the units among
their victims:

1. **preflight**: before any write to a unit's members, each member's DELETE is sent with
   dryRun=All and the uid precondition, fenced as any victim DELETE. A member waiting at
   Permit needs no call (it is rejected in memory, afterwards). NotFound, and a 409 from
   the uid precondition, mean the member is gone already. Any other answer refuses the
   unit: no member of any unit of this preemption gets its DisruptionTarget, its DELETE
   or its Permit rejection, and the executor fails the task as for a refused DELETE (its
   Reactivations backoff retries the preemptor later);
2. **then all of them**: once every unit passed, every member is preempted (the
   executor's own step: a Permit rejection, or DisruptionTarget and DELETE), whatever
   else of the preemption fails;
3. **repair**: a unit torn all the same (a member's real DELETE failed after a sibling
   went: a webhook or RBAC changed in between, or a member left alone as the executor's
   last victim) has its survivors retried in the background, 0.5 s doubling to 30 s,
   until each is gone (its DELETE succeeds or answers NotFound, or the cache shows it
   gone or terminating), while this process holds the lease: a closed fence ends the
   retries, and the next leader decides on what it sees. The tear is logged once per
   unit (warning); every retry is counted (scheduler_preemption_unit_member_retries_total).

Victims that are not members of an all-members unit are not touched here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler.cache.gang_state import GangState
from scheduler.client.errors import ApiError, Conflict, LeaseNotHeld, NotFound
from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.metrics import UnitEvictionMetrics
from scheduler.model.pod import PodInfo
from scheduler.preemption.victim_evictions import FENCED_DELETE, PodWriter
from scheduler.supervisor import TaskSet

__all__ = ["Attempt", "Unit", "UnitDeletion", "UnitEvictions"]

log = logging.getLogger(__name__)

GangLookup = Callable[[str, str], GangState | None]
Attempt = Callable[[PodInfo, list[str]], Awaitable[bool]]
"""The executor's own step for one victim (a Permit rejection, or DisruptionTarget and
DELETE, and its Preempted event), quiet about failures: True when it is (being) gone;
a failure is appended to the list."""


class WaitingLookup(Protocol):
    """framework.WaitingPods, as the preflight reads it."""

    def get(self, uid: str, /) -> object | None: ...


@dataclass(frozen=True, slots=True)
class Unit:
    group: str  # the PodGroup, "namespace/name"
    members: tuple[PodInfo, ...]  # in the victims' order


class UnitDeletion:
    """One preemption's units whose preflight passed: their members are preempted
    whatever else fails (`holds`), each outcome is recorded, and `settle` hands the
    survivors of a torn unit to the background retries."""

    def __init__(self, owner: UnitEvictions, units: Sequence[Unit], who: str) -> None:
        self._owner = owner
        self._units = tuple(units)
        self._who = who
        self._members = {m.uid for u in self._units for m in u.members}
        self._gone: set[str] = set()

    def holds(self, victim: PodInfo) -> bool:
        return victim.uid in self._members

    def record(self, victim: PodInfo, good: bool) -> None:
        if good:
            self._gone.add(victim.uid)

    def settle(self, attempt: Attempt) -> None:
        """A unit some of whose members went and some not (failed, or never tried):
        the others are retried until they are gone too."""
        for unit in self._units:
            survivors = [m for m in unit.members if m.uid not in self._gone]
            if survivors and len(survivors) < len(unit.members):
                self._owner.repair(unit, survivors, attempt, self._who)


class UnitEvictions:
    """Shared by both executors (the retries of one group are one task, whichever
    preemption tore it)."""

    def __init__(
        self,
        writer: PodWriter,
        fence: Callable[[str], bool],
        gang_lookup: GangLookup,
        pod_lookup: Callable[[str], PodInfo | None],
        *,
        metrics: UnitEvictionMetrics | None = None,
        tasks: TaskSet | None = None,
        clock: Clock = SYSTEM_CLOCK,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        retry_initial: float = 0.5,
        retry_max: float = 30.0,
        max_parallel: int = 16,
    ) -> None:
        self._writer = writer
        self._fence = fence
        self._gang_lookup = gang_lookup
        self._pod_lookup = pod_lookup
        self._metrics = metrics if metrics is not None else UnitEvictionMetrics()
        self._tasks = tasks if tasks is not None else TaskSet("unit-retries")
        self._clock = clock
        self._sleep = sleep
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._max_parallel = max_parallel
        # PodGroup "namespace/name" -> survivors still to delete (uid -> pod), while its
        # retry task runs; a second tear of the same group joins the running task
        self._survivors: dict[str, dict[str, PodInfo]] = {}

    # ------------------------------------------------------------------ units

    def units_of(self, victims: Sequence[PodInfo]) -> tuple[Unit, ...]:
        """The all-members units among `victims` (by the cache's PodGroups, as the
        decision grouped them a moment ago), members in the victims' order."""
        groups: dict[str, list[PodInfo]] = {}
        for pod in victims:
            if not pod.pod_group:
                continue
            gang = self._gang_lookup(pod.namespace, pod.pod_group)
            if gang is None or gang.pod_group is None or gang.pod_group.disruption_mode != "all":
                continue
            groups.setdefault(f"{pod.namespace}/{pod.pod_group}", []).append(pod)
        return tuple(Unit(group, tuple(members)) for group, members in groups.items())

    # ------------------------------------------------------------------ 1. preflight

    async def preflight(
        self, units: Sequence[Unit], waiting: WaitingLookup, errors: list[str], who: str
    ) -> UnitDeletion | None:
        """Dry-run DELETEs of every member of every unit (at most `max_parallel` at once).
        None when any is refused (each refusal appended to `errors`): nothing may be
        written to any member then."""
        slots = asyncio.Semaphore(self._max_parallel)

        async def may_go(member: PodInfo) -> bool:
            if waiting.get(member.uid) is not None:
                return True  # rejected in memory, no call
            async with slots:
                return await self._dry_run(member, errors)

        verdicts = await asyncio.gather(
            *(asyncio.gather(*(may_go(m) for m in unit.members)) for unit in units)
        )
        refused = []
        for unit, results in zip(units, verdicts, strict=True):
            passed = all(results)
            self._metrics.preflights.labels(result="passed" if passed else "refused").inc()
            if not passed:
                refused.append(unit.group)
        if refused:
            # the executor logs the failed task with these errors (warning)
            log.info(
                "all-members group may not be deleted whole: none of its members touched "
                "podGroups=%s preemptor=%s",
                ",".join(refused),
                who,
            )
            return None
        return UnitDeletion(self, units, who)

    async def _dry_run(self, member: PodInfo, errors: list[str]) -> bool:
        try:
            if not self._fence(FENCED_DELETE):
                raise LeaseNotHeld(FENCED_DELETE)
            await self._writer.delete_pod(
                member.namespace, member.name, uid=member.uid, dry_run=True
            )
        except (NotFound, Conflict):
            return True  # gone already (a namesake, under a 409, is not ours)
        except ApiError as exc:
            errors.append(f"dry-run delete {member.key}: {exc}")
            return False
        return True

    # ------------------------------------------------------------------ 3. repair

    def repair(self, unit: Unit, survivors: Sequence[PodInfo], attempt: Attempt, who: str) -> None:
        """Retry `survivors` of the torn `unit` in the background until they are gone."""
        pending = self._survivors.get(unit.group)
        if pending is not None:  # already being repaired: the running task takes them
            pending.update((m.uid, m) for m in survivors)
            return
        pending = self._survivors[unit.group] = {m.uid: m for m in survivors}
        log.warning(
            "all-members group torn: a member's DELETE failed after a sibling's; retrying "
            "podGroup=%s survivors=%s preemptor=%s",
            unit.group,
            ",".join(m.key for m in survivors),
            who,
        )
        self._tasks.spawn(
            self._retry(unit.group, pending, attempt), name=f"unit-retry-{unit.group}"
        )

    async def _retry(self, group: str, pending: dict[str, PodInfo], attempt: Attempt) -> None:
        count = self._metrics.member_retries
        delay = self._retry_initial
        started = self._clock.now()
        retries = 0
        try:
            while pending:
                await self._sleep(delay)
                delay = min(delay * 2, self._retry_max)
                if not self._fence(FENCED_DELETE):
                    count.labels(result="abandoned").inc(len(pending))
                    log.warning(
                        "lease not surely held: torn all-members group left to the next "
                        "leader podGroup=%s survivors=%s",
                        group,
                        ",".join(m.key for m in pending.values()),
                    )
                    return
                for uid, member in list(pending.items()):
                    retries += 1
                    current = self._pod_lookup(uid)
                    if current is None or current.is_terminating:
                        count.labels(result="gone").inc()
                        del pending[uid]
                        continue
                    errors: list[str] = []
                    if await attempt(member, errors):
                        count.labels(result="deleted").inc()
                        del pending[uid]
                    else:
                        count.labels(result="failed").inc()
                        log.debug(
                            "torn group member still refused podGroup=%s member=%s errors=%s",
                            group,
                            member.key,
                            "; ".join(errors),
                        )
            log.info(
                "torn all-members group deleted whole podGroup=%s retries=%d seconds=%.1f",
                group,
                retries,
                self._clock.now() - started,
            )
        except asyncio.CancelledError:
            count.labels(result="abandoned").inc(len(pending))
            raise
        finally:
            self._survivors.pop(group, None)

    async def close(self) -> int:
        """Shutdown: the retries stop now (each counts what it leaves as abandoned).
        Returns how many were running."""
        return await self._tasks.drain(0.0)
