"""explain's dry run: what the scheduler would do for a pod now, writing nothing shared.

The dry run runs the scheduling algorithm for the pod (PreFilter, Filter, Score through
the profile's Framework, with a search state and a cycle state of its own and no
opportunistic batch) and, when no node fits, DefaultPreemption's own `what_if` (the
PostFilter's evaluator, Filter dry runs and PreemptionPolicy rules, recording nothing).
For a gang member the dry run is its group's instead (group_evaluation.py: placement, then
PodGroupPostFilter, two steps).

What it reads and what it writes:

- **its own snapshot**, kept by `Cache.refresh_snapshot`, which reads the cache and writes
  only this snapshot (the loop's `update_snapshot` purges the cache's node tombstones:
  called from here, the loop's snapshot kept a deleted node and pods were bound to it).
  The snapshot is built and refreshed in steps of `STEP_ENTRIES` node entries with the
  event loop given back between steps; it is a second copy of the cluster's nodes and
  pods in memory, kept while explain is used and dropped after `KEEP_IDLE` seconds
  without a dry run;
- the nominator, the framework's plugins, the PDB lister and the policies: read only.
  Two memos that plugins fill while they read (NodeResourcesFit's interned rejection
  Statuses, the volume assume cache dropping an assumption the informer already moved
  past) hold the same answers whoever fills them;
- no metric: PostFilter's counters are PostFilter's, not `what_if`'s.

The event loop is held only by steps: one snapshot step at a time, then the scheduling
algorithm, then the preemption dry run (each of the last two is one synchronous call of
the code the scheduling cycle runs). Their sum is reported (`Timed.busy`) for the gate's
budget.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from scheduler.algorithm import SchedulingError, schedule_pod
from scheduler.cache import Cache, Nominator, Snapshot
from scheduler.explain.gate import Timed
from scheduler.explain.group_evaluation import GroupDryRun, GroupNow
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import FitError
from scheduler.framework.runtime import Framework
from scheduler.framework.search import SearchState
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo
from scheduler.preemption.default_preemption import DefaultPreemption

__all__ = ["STEP_ENTRIES", "DryRunner", "GroupRunFactory", "Now", "Plan"]

log = logging.getLogger(__name__)

_R = TypeVar("_R")

# a gang member's dry run, made on explain's refreshed snapshot
GroupRunFactory = Callable[[Snapshot], GroupDryRun]

# node entries copied into the snapshot per step: about 5 ms of the event loop at the
# 5000-node, 15,000-pod size (a full build is 80-160 ms there)
STEP_ENTRIES = 200
# explain's snapshot is dropped after this many seconds without a dry run
KEEP_IDLE = 600.0


@dataclass(frozen=True, slots=True)
class Plan:
    """What DefaultPreemption would do (its `what_if`)."""

    node: str | None
    victims: tuple[PodInfo, ...]
    pdb_violations: int
    policies: tuple[str, ...]
    message: str
    code: str


@dataclass(frozen=True, slots=True)
class Now:
    """The dry run's answer, immutable (kept a few seconds and shared by callers)."""

    time: float  # wall clock
    result: str  # Schedulable | Unschedulable | Error
    node: str | None
    message: str
    statuses: Mapping[str, Status] | None  # node -> Filter status, when Unschedulable
    preemption: Plan | None  # None: no DefaultPreemption in the profile (or schedulable)
    # a gang member's: its PodGroup tried as the pod-group cycle would (GenericWorkload)
    group: GroupNow | None = None


class _Steps:
    """Times the synchronous steps of one dry run (the event loop is held during each):
    `busy` in CPU time of this thread (the gate's budget: time the process lost to other
    processes is not explain's), `longest` in wall time (how long the loop was held)."""

    def __init__(self) -> None:
        self.busy = 0.0
        self.longest = 0.0
        self.count = 0

    def run(self, step: Callable[..., _R], *args: Any) -> _R:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return step(*args)
        finally:
            self.busy += time.thread_time() - cpu
            self.longest = max(self.longest, time.perf_counter() - wall)
            self.count += 1


class DryRunner:
    def __init__(
        self,
        cache: Cache,
        nominator: Nominator,
        *,
        wall: Callable[[], float] = time.time,
        step_entries: int = STEP_ENTRIES,
        keep_idle: float = KEEP_IDLE,
    ) -> None:
        self._cache = cache
        self._nominator = nominator
        self._wall = wall
        self._step = step_entries
        self._keep_idle = keep_idle
        self._snapshot = Snapshot()
        self._running = False
        self._release: asyncio.TimerHandle | None = None

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    async def evaluate(
        self, fwk: Framework, pod: PodInfo, group: GroupRunFactory | None = None
    ) -> Timed[Now]:
        """One dry run. The gate runs one at a time; this refuses to overlap. With
        `group` (a gang member), the dry run is its group's (group_evaluation.py),
        built on the refreshed snapshot."""
        if self._running:
            raise RuntimeError("explain's dry runs do not overlap (the gate runs one at a time)")
        self._running = True
        if self._release is not None:
            self._release.cancel()
        try:
            return await self._evaluate(fwk, pod, group)
        finally:
            self._running = False
            self._release = asyncio.get_running_loop().call_later(self._keep_idle, self._drop)

    def _drop(self) -> None:
        """Unused for `keep_idle` seconds: give the copy's memory back (the next dry run
        builds it again, in steps)."""
        self._snapshot = Snapshot()
        self._release = None

    async def _evaluate(
        self, fwk: Framework, pod: PodInfo, group: GroupRunFactory | None
    ) -> Timed[Now]:
        steps = _Steps()
        snapshot = self._snapshot
        while True:
            if not steps.run(self._cache.refresh_snapshot, snapshot, self._step):
                break
            await asyncio.sleep(0)  # give the loop back between snapshot steps
        refreshes = steps.count
        # nothing refreshes the snapshot again before this dry run ends (the gate runs
        # one at a time): the two steps below see one state of the cluster; the
        # nominator is read as it is at each step, as the loop reads it
        if group is not None:
            now = await self._group(steps, pod, group(snapshot))
        elif isinstance(found := steps.run(self._schedule, fwk, pod, snapshot), Now):
            now = found
        else:
            await asyncio.sleep(0)
            now = steps.run(self._preempt, fwk, pod, snapshot, *found)
        log.info(
            "explain evaluated pod=%s result=%s cpu_ms=%.1f longest_step_ms=%.1f"
            " snapshot_steps=%d",
            pod.key, now.result, steps.busy * 1000, steps.longest * 1000, refreshes,
        )  # fmt: skip
        return Timed(now, steps.busy)

    async def _group(self, steps: _Steps, pod: PodInfo, run: GroupDryRun) -> Now:
        """The group's dry run in two steps (placement, then PodGroupPostFilter), and the
        member's own answer from it."""
        answer = steps.run(run.before) or steps.run(run.place)
        if answer is None:
            await asyncio.sleep(0)
            answer = steps.run(run.post_filter)
        mine = next((p for p in answer.placements if p.pod.uid == pod.uid), None)
        result, node, message = answer.result, None, answer.message
        if result == "Schedulable":
            if mine is not None and mine.node is not None:
                node, message = mine.node, ""
            else:  # the group is placed without this member: its own reason
                result, message = "Unschedulable", mine.reason if mine is not None else ""
        return Now(self._wall(), result, node, message, answer.statuses, None, answer)

    def _schedule(
        self, fwk: Framework, pod: PodInfo, snapshot: Snapshot
    ) -> Now | tuple[CycleState, FitError, DefaultPreemption]:
        """The scheduling algorithm: the answer, or what the preemption step needs."""
        state = CycleState()
        try:
            result = schedule_pod(fwk, state, pod, snapshot, self._nominator, search=SearchState())
        except SchedulingError as exc:
            return Now(self._wall(), "Error", None, str(exc), None, None)
        if not isinstance(result, FitError):
            return Now(self._wall(), "Schedulable", result.node, "", None, None)
        plugin = next(
            (p for p in fwk.post_filter_plugins if isinstance(p, DefaultPreemption)), None
        )
        if plugin is None:
            statuses = result.diagnosis.node_to_status()
            return Now(self._wall(), "Unschedulable", None, result.message(), statuses, None)
        return state, result, plugin

    def _preempt(
        self,
        fwk: Framework,
        pod: PodInfo,
        snapshot: Snapshot,
        state: CycleState,
        result: FitError,
        plugin: DefaultPreemption,
    ) -> Now:
        wall = self._wall()
        # by name now: the Diagnosis maps slots to names through the snapshot, which
        # the next dry run refreshes
        statuses = result.diagnosis.node_to_status()
        message = result.message()
        evaluation, status = plugin.what_if(state, pod, snapshot, result.diagnosis)
        decision = evaluation.decision if evaluation is not None else None
        # the evaluator's own words (PostFilter prefixes them with "preemption: ")
        why = evaluation.status if evaluation is not None else status
        plan = Plan(
            node=decision.node if decision is not None else None,
            victims=decision.victims if decision is not None else (),
            pdb_violations=decision.num_pdb_violations if decision is not None else 0,
            policies=plugin.policies_for(pod),
            message="" if decision is not None else why.message(),
            code="Success" if why.ok else why.code.name,
        )
        return Now(wall, "Unschedulable", None, message, statuses, plan)
