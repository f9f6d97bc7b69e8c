"""explain's dry run for a gang member (GenericWorkload): its PodGroup tried now as the
pod-group cycle would try it, on explain's own snapshot.

The members are those the cycle would take if the pod were popped now (group_cycle.py:
the pod and its siblings waiting in activeQ, backoffQ or among the unschedulable pods;
gated, in-flight, deleting and assumed ones are not tried), in upstream's member order.
The simulation is group_algorithm.GroupAlgorithm, the cycle's own code, with three parts
of explain's: its snapshot (every assumption and victim removal undone before a step
returns), a NominationOverlay instead of the nominator, and no Reserve (VolumeBinding's
Reserve writes the shared volume assume cache). Two steps, the event loop given back
between them: the placement, then, when the group does not fit, PodGroupPostFilter
(pod-group preemption's decision; no deletion, no metric).

Not tried: a group whose members GangScheduling's PreEnqueue holds back (the cycle would
never see them: the answer is `Gated` with the plugin's words) and a group that fails
validation (the answer is the cycle's error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.algorithm import SchedulePod, schedule_pod
from scheduler.cache import Snapshot
from scheduler.cache.gang_state import GangState
from scheduler.config import names
from scheduler.explain.group_facts import GroupFacts
from scheduler.explain.nominations import NominationOverlay
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import FitError, ScheduleResult
from scheduler.framework.nominated_pods import NominatedPods
from scheduler.framework.runtime import Framework
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status
from scheduler.group_algorithm import (
    CODE_NAMES,
    GroupAlgorithm,
    GroupStatus,
    Member,
    member_order,
    validate,
    with_post_filter,
)
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PodInfo
from scheduler.queue import QueuedPodInfo

__all__ = [
    "GATED",
    "GroupDryRun",
    "GroupNow",
    "GroupPlan",
    "Placement",
    "cycle_members",
]

GATED = "Gated"
# the queues a sibling is taken from (queue.take_group)
_TAKEN_FROM = frozenset({"active", "backoff", "unschedulable"})


@dataclass(frozen=True, slots=True)
class Placement:
    pod: PodInfo
    node: str | None  # None: not placed
    reason: str  # its own reason when not placed


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """What pod-group preemption (DefaultPreemption's PodGroupPostFilter) would do."""

    code: str  # Success, Unschedulable, UnschedulableAndUnresolvable, Error
    message: str  # its own words (the group's verdict has them with "pod group preemption: ")
    victims: tuple[PodInfo, ...]  # most important first
    nominations: tuple[tuple[PodInfo, str], ...]  # member -> node
    pdb_violations: int
    group_disruptions: int


@dataclass(frozen=True, slots=True)
class GroupNow:
    facts: GroupFacts
    result: str  # Gated | Schedulable | Unschedulable | Error
    message: str  # the group's verdict, as the PodGroup's condition would say it
    reaches_min_count: bool
    placements: tuple[Placement, ...]
    preemption: GroupPlan | None  # None: PodGroupPostFilter did not choose (or not run)
    # the explained pod's own Filter verdicts, when it fitted nowhere
    statuses: Mapping[str, Status] | None = None


def cycle_members(
    pod: PodInfo,
    gang: GangState,
    where: Callable[[str], str | None],
    queued: Callable[[str], QueuedPodInfo[PodInfo] | None],
) -> list[QueuedPodInfo[PodInfo]]:
    """The members the cycle would take with `pod` popped now, in its order. Copies: the
    queue's records are read, never changed."""
    out: list[QueuedPodInfo[PodInfo]] = []
    siblings = sorted(gang.unscheduled_pods(), key=lambda p: p.uid)
    for p in [pod, *(s for s in siblings if s.uid != pod.uid)]:
        if p.uid != pod.uid and where(p.uid) not in _TAKEN_FROM:
            continue
        if p.deletion_timestamp is not None or p.uid in gang.assumed:
            continue
        info = queued(p.uid)
        out.append(
            QueuedPodInfo(p, timestamp=info.timestamp, attempts=info.attempts)
            if info is not None
            else QueuedPodInfo(p, timestamp=0.0)
        )
    out.sort(key=member_order)
    return out


def _schedule(fwk: Framework) -> SchedulePod:
    def run(
        state: CycleState, pod: PodInfo, snapshot: Snapshot, nominator: NominatedPods,
        search: SearchState, /,
    ) -> ScheduleResult | FitError:  # fmt: skip
        # explain takes no opportunistic-batching hint (evaluation.py)
        return schedule_pod(fwk, state, pod, snapshot, nominator, search=search)

    return run


class GroupDryRun:
    """One dry run of `pod`'s group; `place` then, when it says so, `post_filter`."""

    def __init__(
        self,
        fwk: Framework,
        pod: PodInfo,
        facts: GroupFacts,
        gang: GangState,
        members: list[QueuedPodInfo[PodInfo]],
        snapshot: Snapshot,
        nominator: NominatedPods,
        gang_lookup: Callable[[str, str], GangState | None],
    ) -> None:
        self.fwk, self.pod, self.facts, self.gang = fwk, pod, facts, gang
        self.members, self.snapshot = members, snapshot
        self.algo = GroupAlgorithm(
            fwk,
            _schedule(fwk),
            NominationOverlay(nominator),
            gang_lookup,
            reserve=False,
        )
        self.search = SearchState()
        self._tried: list[Member] = []
        self._verdict = GroupStatus(Code.SUCCESS)

    def _answer(
        self, result: str, message: str, preemption: GroupPlan | None = None
    ) -> GroupNow:
        placements = tuple(
            Placement(
                m.info.pod,
                m.node if m.placed else None,
                "" if m.placed else (m.status.message() if m.status is not None else ""),
            )
            for m in self._tried
        )
        placed = sum(1 for p in placements if p.node is not None)
        mine = next((m for m in self._tried if m.info.uid == self.pod.uid), None)
        statuses = (
            mine.fit.diagnosis.node_to_status() if mine is not None and mine.fit else None
        )
        return GroupNow(
            facts=self.facts,
            result=result,
            message=message,
            reaches_min_count=(
                self.facts.pod_group is not None
                and self._verdict.code == Code.SUCCESS
                and self.facts.scheduled + placed >= self.facts.min_count
            ),
            placements=placements,
            preemption=preemption,
            statuses=statuses,
        )

    def before(self) -> GroupNow | None:
        """The answer when the cycle would not run the algorithm (gated, no PodGroup,
        invalid), else None."""
        if self.facts.held:
            return self._answer(GATED, self.facts.held_message)
        group = self.gang.pod_group
        if group is None:
            missing = f'pod group "{self.pod.namespace}/{self.facts.name}" not found'
            return self._answer("Error", missing)
        problem = validate(self.members, group, self.gang)
        return self._answer("Error", problem) if problem else None

    def place(self) -> GroupNow | None:
        """Step 1: the placement, undone. The answer, or None when PodGroupPostFilter
        would run (a plain Unschedulable verdict)."""
        assert self.gang.pod_group is not None
        algo = self.algo
        try:
            self._tried, self._verdict = algo.place(
                self.gang.pod_group, self.gang, self.members, self.snapshot, self.search
            )
        except Exception as exc:  # a plugin bug, worded as the cycle words it
            self._tried = algo.trying
            algo.revert(algo.trying, self.snapshot)
            return self._answer(
                "Error", f"internal error in the pod-group cycle: {type(exc).__name__}: {exc}"
            )
        algo.revert(self._tried, self.snapshot)
        verdict = self._verdict
        if verdict.code == Code.SUCCESS:
            return self._answer("Schedulable", verdict.message())
        if verdict.code != Code.UNSCHEDULABLE:
            return self._answer(
                "Error" if verdict.code == Code.ERROR else "Unschedulable", verdict.message()
            )
        return None

    def post_filter(self) -> GroupNow:
        """Step 2: PodGroupPostFilter's decision (the snapshot restored after)."""
        assert self.gang.pod_group is not None
        plugin = (
            self.fwk.plugin(names.DEFAULT_PREEMPTION)
            if self.fwk.has_plugin(names.DEFAULT_PREEMPTION)
            else None
        )
        services = getattr(plugin, "services", None)

        def pdbs() -> Sequence[PDBInfo]:
            return services.pdbs() if services is not None else ()

        outcome = self.algo.post_filter(
            self.gang.pod_group, self.gang, self.members, self._tried, self.snapshot,
            self.search, pdbs,
        )  # fmt: skip
        verdict = with_post_filter(self._verdict, outcome.code, outcome.said)
        result = outcome.preemption
        plan = None
        if result is not None:
            plan = GroupPlan(
                code=CODE_NAMES.get(result.code, result.code.name),
                message=result.message,
                victims=tuple(result.victims),
                nominations=tuple(
                    (m.pod, result.nominations[m.uid])
                    for m in self.members
                    if m.uid in result.nominations
                ),
                pdb_violations=result.num_pdb_violations,
                group_disruptions=result.num_group_disruptions,
            )
        return self._answer(
            "Error" if verdict.code == Code.ERROR else "Unschedulable", verdict.message(), plan
        )

