"""The pod-group algorithm as a simulation (GenericWorkload): where each member of a
PodGroup would go when the group is tried as one unit, and what pod-group preemption
would choose when it does not fit, as k8s.io/kubernetes v1.37.2 pkg/scheduler/
schedule_one_podgroup.go (podGroupSchedulingDefaultAlgorithm) and framework/preemption/
podgrouppreemption.go decide it.

It writes nothing of its own: everything it changes goes through its parts and is undone
before it returns or by `revert`:
- the snapshot it is given: members assumed with Snapshot.add_pod, preemption's victims
  removed; `revert` (or `Snapshot.restore_mutations`) takes every change back;
- the nominations it is given (`Nominations`): a member's nomination is dropped while
  it is assumed (it would count twice) and put back when it is undone; the cycle passes
  the scheduler's nominator, explain a copy-on-write view of it;
- Reserve/Unreserve of the profile, when `reserve` is on (the cycle's); explain runs
  none (VolumeBinding's Reserve writes the shared volume assume cache).
Both the pod-group cycle (group_cycle.py, which then submits or fails the members, counts
the metrics and starts the victims' deletions) and explain's dry run of a group
(explain/group_evaluation.py) run it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.algorithm import SchedulePod, SchedulingError
from scheduler.cache import Snapshot
from scheduler.cache.gang_state import GangState
from scheduler.config import names
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import FitError
from scheduler.framework.nominated_pods import NominatedPods
from scheduler.framework.scheduling_framework import SchedulingFramework
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status
from scheduler.model import PodInfo
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.plugins.gang_scheduling import placement_feasible
from scheduler.preemption.pod_group_preemption import (
    Assignment,
    GroupPreemption,
    Simulation,
    preempt_for_group,
)
from scheduler.queue import QueuedPodInfo

__all__ = [
    "CODE_NAMES",
    "DRA_NOTHING_TO_FREE",
    "POD_GROUP_UNSCHEDULABLE",
    "GroupAlgorithm",
    "GroupStatus",
    "Member",
    "Nominations",
    "PostFilterOutcome",
    "member_order",
    "validate",
    "with_post_filter",
]

# schedule_one_podgroup.go errPodGroupUnschedulable: a status carrying it says this first
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"

# DynamicResources' PodGroupPostFilter when it freed nothing (no member has claims)
DRA_NOTHING_TO_FREE = "deallocation and deletion of ResourceClaims completed"


# upstream's status code names (kube-scheduler framework interface.go), metric labels
CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
}


class Nominations(NominatedPods, Protocol):
    """The nominator as the simulation uses it: read by the algorithm, a member's entry
    dropped while it is assumed and put back after."""

    def add(self, pod: PodInfo, node_name: str | None = None) -> None: ...
    def remove(self, pod: PodInfo) -> None: ...


@dataclass
class GroupStatus:
    """Upstream's Status as the cycle builds it: a code and reasons, the first of which is
    the wrapped error's text when it carries one (errPodGroupUnschedulable)."""

    code: Code
    reasons: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, st: Status, *, pod_group_error: bool = False) -> GroupStatus:
        reasons = list(st.reasons)
        if pod_group_error:
            reasons.insert(0, POD_GROUP_UNSCHEDULABLE)
        return cls(st.code, reasons)

    def message(self) -> str:
        return ", ".join(self.reasons)

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


@dataclass
class Member:
    info: QueuedPodInfo[PodInfo]
    state: CycleState = field(default_factory=CycleState)
    node: str = ""  # where the algorithm placed it ("" when it was not)
    assumed: PodInfo | None = None
    old_nomination: str | None = None
    fit: FitError | None = None
    status: GroupStatus | None = None  # its own verdict, when not placed
    # every PreFilter plugin ran for it this attempt (none rejected it outright)
    pre_filtered: bool = False
    # the algorithm placed it on `node` (kept once the simulation is undone)
    placed: bool = False


@dataclass(frozen=True, slots=True)
class PostFilterOutcome:
    """RunPodGroupPostFilterPlugins' answer: its code, the reason the group's verdict
    takes (or the error replacing it), and pod-group preemption's decision when it ran."""

    code: Code
    said: str
    preemption: GroupPreemption | None = None


def with_post_filter(verdict: GroupStatus, code: Code, said: str) -> GroupStatus:
    """The group's verdict after PodGroupPostFilter (run on a plain Unschedulable only):
    an error replaces it, anything else is appended as one more reason
    (schedule_one_podgroup.go)."""
    if code == Code.ERROR:
        return GroupStatus(Code.ERROR, [said])
    verdict.reasons.append(said)
    return verdict


def member_order(info: QueuedPodInfo[PodInfo]) -> tuple[int, int, float, str]:
    """Upstream's PodGroupMemberPodsOrderingFunc (framework/types.go): priority high
    first, then more attempts, then older, then by name."""
    return (-info.pod.priority, -info.attempts, info.timestamp, info.pod.name)


def validate(
    members: Sequence[QueuedPodInfo[PodInfo]], group: PodGroupInfo, gang: GangState
) -> str:
    """schedule_one_podgroup.go validatePodGroup (PodGroupPreemptionPolicy off): "" when
    valid, else upstream's error text. Scheduled members are held to the same rules."""
    scheduler_name = members[0].pod.scheduler_name
    policy = ""
    for pod in [m.pod for m in members] + gang.scheduled_pods():
        if pod.scheduler_name != scheduler_name:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName "
                f'set, got: "{pod.scheduler_name}" and "{scheduler_name}"'
            )
        if pod.priority != group.priority:
            return (
                "all pods in a single pod group should have the same priority as the pod "
                f"group's priority, got {pod.priority} and {group.priority}"
            )
        if not policy:
            policy = pod.preemption_policy
        elif pod.preemption_policy != policy:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {pod.preemption_policy} and {policy}"
            )
    return ""


def _victim_filter(plugin: object, first: PodInfo) -> Callable[[PodInfo], bool]:
    """DefaultPreemption's victim scope (victimScope, beyond upstream) and, when
    PreemptionPolicy objects are on, the rules that match the group (by its first
    member, whose priority class the members share)."""
    evaluator = getattr(plugin, "evaluator", None)
    in_scope: Callable[[PodInfo], bool] = getattr(evaluator, "may_evict", lambda pod: True)
    policy = getattr(evaluator, "policy", None)
    rules = policy.rules_for(first) if policy is not None else None
    if rules is None:
        return in_scope
    return lambda pod: in_scope(pod) and rules.refusal(pod) is None


class GroupAlgorithm:
    """One group attempt's simulation over `fwk`'s profile. `schedule`: the profile's
    algorithm for one pod; `gang_lookup`: the cache's gang states (read only)."""

    def __init__(
        self,
        fwk: SchedulingFramework,
        schedule: SchedulePod,
        nominator: Nominations,
        gang_lookup: Callable[[str, str], GangState | None],
        *,
        reserve: bool = True,
    ) -> None:
        self.fwk = fwk
        self.schedule = schedule
        self.nominator = nominator
        self.gang_lookup = gang_lookup
        self.reserve = reserve
        self.trying: list[Member] = []  # the members of the run in progress

    # ------------------------------------------------------------------ the algorithm
    def place(
        self,
        group: PodGroupInfo,
        gang: GangState,
        infos: list[QueuedPodInfo[PodInfo]],
        snapshot: Snapshot,
        search: SearchState,
    ) -> tuple[list[Member], GroupStatus]:
        """podGroupSchedulingDefaultAlgorithm: each member in order, assumed where it
        fits; the group verdict. Members after an early stop get a copy of the verdict
        as it was then. The members placed stay assumed in the snapshot until `revert`."""
        fwk = self.fwk
        members = [Member(info) for info in infos]
        self.trying = members
        gated = fwk.has_plugin(names.GANG_SCHEDULING)
        scheduled, remaining = gang.scheduled_count, len(members)

        def feasible() -> Status:
            # without GangScheduling in the profile there is no placement check
            return placement_feasible(group, scheduled, remaining) if gated else Status.success()

        st = feasible()
        if st.code == Code.UNSCHEDULABLE:
            verdict = GroupStatus.of(st, pod_group_error=True)
            for m in members:
                m.status = GroupStatus(verdict.code, list(verdict.reasons))
            return members, verdict
        verdict = GroupStatus.of(st)
        any_placed = False
        for i, m in enumerate(members):
            pod = m.info.pod
            # a fresh cycle for opportunistic batching per member: a result kept from the
            # previous member is never reused (its node may be the one just assumed)
            search.cycle += 2
            try:
                result = self.schedule(m.state, pod, snapshot, self.nominator, search)
            except SchedulingError as exc:
                m.status = GroupStatus(Code.ERROR, [str(exc)])
                verdict = GroupStatus(
                    Code.ERROR, [f"failed to schedule other pod from a pod group: {exc}"]
                )
                self._fill_untried(members[i + 1 :], verdict)
                break
            # upstream stops PreFilter at an UnschedulableAndUnresolvable verdict, which a
            # FitError reports as its PreFilter message
            m.pre_filtered = not isinstance(result, FitError) or not result.diagnosis.pre_filter_msg
            if isinstance(result, FitError):
                m.fit = result
                m.status = GroupStatus(Code.UNSCHEDULABLE, [result.message()])
            else:
                placed = self._assume_and_reserve(m, result.node, snapshot)
                if placed:
                    scheduled += 1
                    any_placed = True
            remaining -= 1
            st = feasible()
            verdict = GroupStatus.of(st)
            if st.code == Code.UNSCHEDULABLE:
                self._fill_untried(members[i + 1 :], verdict)
                break
        if verdict.code == Code.WAIT:
            verdict = GroupStatus(Code.UNSCHEDULABLE, [POD_GROUP_UNSCHEDULABLE, *verdict.reasons])
        if verdict.code == Code.SUCCESS and not any_placed:
            # upstream: a success must place at least one member
            verdict = GroupStatus(Code.UNSCHEDULABLE, [POD_GROUP_UNSCHEDULABLE])
        return members, verdict

    @staticmethod
    def _fill_untried(rest: list[Member], verdict: GroupStatus) -> None:
        for m in rest:
            m.status = GroupStatus(verdict.code, list(verdict.reasons))

    def _assume_and_reserve(self, m: Member, node: str, snapshot: Snapshot) -> bool:
        """upstream assumeAndReserve in a group cycle: assumed in the snapshot (the next
        members see it), Reserve, the nomination dropped (it would count twice)."""
        pod = m.info.pod
        assumed = dataclasses.replace(pod, node_name=node)
        snapshot.add_pod(assumed, node)
        m.old_nomination = self.nominator.nominated_node(pod)
        self.nominator.remove(pod)
        m.assumed, m.node = assumed, node
        st = self.fwk.run_reserve(m.state, assumed, node) if self.reserve else Status.success()
        if not st.ok:
            self._unassume(m, snapshot)
            m.status = GroupStatus(st.code, list(st.reasons))
            return False
        return True

    def _unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if self.reserve:
            self.fwk.run_unreserve(state, pod, node)

    def _unassume(self, m: Member, snapshot: Snapshot) -> None:
        assert m.assumed is not None
        self._unreserve(m.state, m.assumed, m.node)
        snapshot.remove_pod(m.assumed, m.node)
        if m.old_nomination:
            self.nominator.add(m.info.pod, m.old_nomination)
        m.assumed = None

    def revert(self, members: list[Member], snapshot: Snapshot, *, restore: bool = True) -> None:
        """Undo the simulation, last member first (upstream's revertFns): Unreserve,
        forget in the snapshot, the old nomination back. The members keep the node the
        algorithm found (`node`) for the submit."""
        for m in reversed(members):
            if m.assumed is not None:
                self._unreserve(m.state, m.assumed, m.node)
                if not restore:
                    snapshot.remove_pod(m.assumed, m.node)
                if m.old_nomination:
                    self.nominator.add(m.info.pod, m.old_nomination)
                m.placed = True
                m.assumed = None
        if restore:
            snapshot.restore_mutations()

    # ------------------------------------------------------------------ PodGroupPostFilter
    def post_filter(
        self,
        group: PodGroupInfo,
        gang: GangState,
        infos: list[QueuedPodInfo[PodInfo]],
        tried: list[Member],
        snapshot: Snapshot,
        search: SearchState,
        pdbs: Callable[[], Sequence[PDBInfo]],
    ) -> PostFilterOutcome:
        """upstream RunPodGroupPostFilterPlugins (framework/runtime/framework.go) over the
        default profile's two PodGroupPostFilter plugins, in order: an error stops with
        `error in "<plugin>" PodGroupPostFilter plugins: <message>`, a success or an
        UnschedulableAndUnresolvable answer stands alone, Unschedulable reasons add up.
        Decides only: the caller counts the metrics and starts the deletions. The
        snapshot is restored before this returns.

        1. DynamicResources is in upstream's default profile (DRA is GA) though not in
           this scheduler, which takes no pod with claims. For such pods its
           PodGroupPostFilter (plugins/dynamicresources/dynamicresources.go) reads the
           state its PreFilter left in the group's cycle: none when no member reached
           its PreFilter this attempt (the placement check failed first, or an earlier
           PreFilter plugin rejected every member outright), which is an error ("not
           found", the cycle state's ErrNotFound); else it has nothing to free.
        2. DefaultPreemption: pod-group preemption (preemption/pod_group_preemption.py),
           its messages prefixed `pod group preemption: `."""
        if not any(m.pre_filtered for m in tried):
            return PostFilterOutcome(
                Code.ERROR, 'error in "DynamicResources" PodGroupPostFilter plugins: not found'
            )
        reasons = [DRA_NOTHING_TO_FREE]
        if not self.fwk.has_plugin(names.DEFAULT_PREEMPTION):
            return PostFilterOutcome(Code.UNSCHEDULABLE, ", ".join(reasons))
        try:
            result = self.preempt(group, gang, infos, snapshot, search, pdbs)
        finally:
            snapshot.restore_mutations()
        said = f"pod group preemption: {result.message}" if result.message else ""
        if result.code == Code.ERROR:
            return PostFilterOutcome(
                Code.ERROR,
                f'error in "{names.DEFAULT_PREEMPTION}" PodGroupPostFilter plugins: {said}',
                result,
            )
        if result.code in (Code.SUCCESS, Code.UNSCHEDULABLE_AND_UNRESOLVABLE):
            return PostFilterOutcome(result.code, said, result)
        reasons.append(said)
        return PostFilterOutcome(Code.UNSCHEDULABLE, ", ".join(reasons), result)

    def preempt(
        self,
        group: PodGroupInfo,
        gang: GangState,
        infos: list[QueuedPodInfo[PodInfo]],
        snapshot: Snapshot,
        search: SearchState,
        pdbs: Callable[[], Sequence[PDBInfo]],
    ) -> GroupPreemption:
        """pod_group_preemption.preempt_for_group with this simulation; the victims'
        removal is left in the snapshot (the caller restores it)."""
        fwk = self.fwk
        members = [i.pod for i in infos]

        def rerun() -> tuple[list[Assignment], Code, str]:
            # the group algorithm again, fresh cycle states, on the snapshot without the
            # victims; its members' placement undone, the victims' removal kept
            tried, verdict = self.place(group, gang, infos, snapshot, search)
            placed = [Assignment(m.info.pod, m.node, m.state) for m in tried if m.assumed]
            self.revert(tried, snapshot, restore=False)
            return placed, verdict.code, verdict.message()

        runner = fwk.filter_runner

        def add_pod(state: CycleState, pod: PodInfo, added: PodInfo, node: str) -> bool:
            view = snapshot.get(node)
            return view is not None and runner.add_pod(state, pod, added, view).ok

        def remove_pod(state: CycleState, pod: PodInfo, removed: PodInfo, node: str) -> bool:
            view = snapshot.get(node)
            return view is not None and runner.remove_pod(state, pod, removed, view).ok

        def passes(state: CycleState, pod: PodInfo, node: str) -> bool:
            view = snapshot.get(node)
            return view is not None and runner.run_with_nominated_pods(
                state, pod, view, self.nominator
            ).ok

        def reserve(state: CycleState, pod: PodInfo, node: str) -> None:
            if self.reserve:
                fwk.run_reserve(state, pod, node)

        sim = Simulation(
            run_algorithm=rerun,
            add_pod=add_pod,
            remove_pod=remove_pod,
            passes_filter=passes,
            reserve=reserve,
            unreserve=self._unreserve,
            extended=runner.extended,
        )
        return preempt_for_group(
            members,
            group.priority,
            any(p.preemption_policy == "Never" for p in members),
            snapshot,
            self.gang_lookup,
            pdbs(),
            sim,
            may_evict=_victim_filter(fwk.plugin(names.DEFAULT_PREEMPTION), members[0]),
        )
