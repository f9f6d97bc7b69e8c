"""The pod-group scheduling cycle (GenericWorkload): the members of one PodGroup placed as
one unit, all or nothing, as k8s.io/kubernetes v1.37.2 pkg/scheduler/
schedule_one_podgroup.go does.

One cycle, no awaits:
  the popped member and its queued siblings (queue.take_group) -> validate (one
  schedulerName, the group's priority, one preemption policy) -> one snapshot ->
  placement feasibility (GangScheduling) -> each member in upstream's order: the profile's
  algorithm, then assume + Reserve, then feasibility again (stop once minCount can no
  longer be met) -> the group's verdict:
  - success (minCount members assumed or bound, at least one placed now): each placed
    member goes through Permit (the quorum is already assumed, so GangScheduling lets it
    through and releases any sibling still waiting) to its binding task; members that
    fit nowhere are told their own FitError and retried at once;
  - rejected: every assumption of this cycle is undone last-in first-out (Unreserve,
    forget, the old nomination back), so nothing of the group binds; members are told in
    upstream's words and requeued through backoff.
Where upstream assumes in the snapshot and again in the cache, this cycle assumes in the
cache once and refreshes the snapshot (one node row per member): nothing else runs
during the cycle, so no other reader can see the tentative assumptions, and Reserve
runs once per placed member instead of twice.

Then the PodGroup's PodGroupInitiallyScheduled condition says how it went
(group_status_writer.py) and the podgroup attempt metrics count it.

Not yet here (docs/plans/gangs.md): PodGroupPostFilter chooses no victims (preemption
for a whole group); it answers only where no preemption could help.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scheduler.algorithm import SchedulePod, SchedulingError
from scheduler.binding_cycle import Assumed, BindingCycles
from scheduler.cache import Cache, CacheError, Nominator, Snapshot
from scheduler.cache.gang_state import GangState
from scheduler.clock import Clock
from scheduler.config import names
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import FitError
from scheduler.framework.scheduling_framework import SchedulingFramework
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting_pods import WaitingPod
from scheduler.group_status_writer import GroupStatusWriter, WantedCondition
from scheduler.metrics import PodGroupMetrics
from scheduler.model import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.plugins.gang_scheduling import placement_feasible
from scheduler.preemption.default_preemption import PreemptionServices
from scheduler.preemption.pod_group_preemption import (
    Assignment,
    GroupPreemption,
    Simulation,
    preempt_for_group,
)
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.scheduling_failure import (
    RESULT_ERROR,
    RESULT_UNSCHEDULABLE,
    FailureHandler,
    result_of,
)

log = logging.getLogger(__name__)

# schedule_one_podgroup.go errPodGroupUnschedulable: a status carrying it says this first
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"
NOT_ELIGIBLE = "pod group preemption: not eligible due to preemptionPolicy=Never."
NOT_IMPLEMENTED = (
    "pod group preemption: lower-priority pods exist, but this scheduler does not preempt "
    "for pod groups yet"
)

# DynamicResources' PodGroupPostFilter when it freed nothing (no member has claims)
DRA_NOTHING_TO_FREE = "deallocation and deletion of ResourceClaims completed"

# upstream's status code names (kube-scheduler framework interface.go), metric labels
_CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
}

SCHEDULED = "scheduled"
WAITING_ON_PREEMPTION = "waiting_on_preemption"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"


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
class _Member:
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


def member_order(info: QueuedPodInfo[PodInfo]) -> tuple[int, int, float, str]:
    """Upstream's PodGroupMemberPodsOrderingFunc (framework/types.go): priority high
    first, then more attempts, then older, then by name."""
    return (-info.pod.priority, -info.attempts, info.timestamp, info.pod.name)


def validate(
    members: list[QueuedPodInfo[PodInfo]], group: PodGroupInfo, gang: GangState
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


class GroupCycle:
    def __init__(
        self,
        *,
        cache: Cache,
        queue: SchedulingQueue[PodInfo],
        nominator: Nominator,
        frameworks: Mapping[str, SchedulingFramework],
        algorithms: Mapping[str, SchedulePod],
        failures: FailureHandler,
        binding: BindingCycles,
        metrics: PodGroupMetrics,
        clock: Clock,
        conditions: GroupStatusWriter | None = None,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.nominator = nominator
        self.frameworks = frameworks
        self.algorithms = algorithms
        self.failures = failures
        self.binding = binding
        self.metrics = metrics
        self.clock = clock
        self._trying: list[_Member] = []  # the members of the attempt in progress
        # the PodGroupInitiallyScheduled writes (none in tests that do not look)
        self.conditions = conditions

    def run(
        self,
        first: QueuedPodInfo[PodInfo],
        snapshot: Snapshot,
        search: SearchState,
    ) -> None:
        """Schedule the PodGroup of `first` (just popped). Every member taken is handed
        back to the queue (done, requeued or bound) before this returns."""
        start = self.clock.now()
        taken = [first, *self.queue.take_group(first)]
        members: list[QueuedPodInfo[PodInfo]] = []
        for info in taken:
            # upstream skipPodGroupPodSchedule: deleting or already assumed members
            if info.pod.deletion_timestamp is not None or self.cache.is_assumed(info.pod):
                self.queue.done(info.uid)
            else:
                members.append(info)
        if not members:
            return
        members.sort(key=member_order)
        pod = first.pod
        gang = self.cache.gang(pod.namespace, pod.pod_group)
        fwk = self.frameworks.get(members[0].pod.scheduler_name)
        if gang is None or gang.pod_group is None or fwk is None:
            # the PodGroup went away after PreEnqueue let the members in: back to the
            # queue, whose PreEnqueue holds them until it is back
            problem = (
                f"profile not found for scheduler name {members[0].pod.scheduler_name!r}"
                if fwk is None
                else f'pod group "{pod.namespace}/{pod.pod_group}" not found'
            )
            self._error_all(fwk, members, problem, start)
            return
        group = gang.pod_group
        problem = validate(members, group, gang)
        if problem:
            self._error_all(fwk, members, problem, start)
            self._condition(group, "False", "SchedulerError", problem)
            return
        self.cache.update_snapshot(snapshot)
        search.cycle += 1
        self._trying = []
        try:
            placed, verdict = self._algorithm(fwk, group, gang, members, snapshot, search)
        except Exception as exc:  # a plugin bug: undo, tell every member, lose nothing
            log.exception("pod group cycle crashed group=%s/%s", group.namespace, group.name)
            with contextlib.suppress(Exception):
                self._revert(fwk, self._trying, snapshot)
            self._error_all(
                fwk, members,
                f"internal error in the pod-group cycle: {type(exc).__name__}: {exc}", start,
            )  # fmt: skip
            return
        # the algorithm is a simulation: undone whatever its verdict (upstream's
        # runRootSchedulingAlgorithm reverts on return); a placed group is assumed in
        # the cache member by member when it is submitted
        self._revert(fwk, placed, snapshot)
        self.metrics.algorithm_duration.observe(self.clock.now() - start)
        if verdict.code == Code.SUCCESS:
            self._submit_success(fwk, placed, start)
            self._condition(group, "True", "Scheduled", verdict.message())
            self._record(fwk, SCHEDULED, start)
            return
        nominations: dict[str, str] | None = None
        if verdict.code == Code.UNSCHEDULABLE:
            # upstream runs PodGroupPostFilter on a plain Unschedulable only; an error
            # replaces the verdict, anything else is appended as one more reason
            try:
                code, said, nominations = self._pod_group_post_filter(
                    fwk, group, gang, members, placed, snapshot, search
                )
            except Exception as exc:  # a plugin bug in the preemption: the group errs
                log.exception("pod group post filter crashed group=%s", group.key)
                code, nominations = Code.ERROR, None
                said = f"internal error in PodGroupPostFilter: {type(exc).__name__}: {exc}"
            if code == Code.ERROR:
                verdict = GroupStatus(Code.ERROR, [said])
            else:
                verdict.reasons.append(said)
        self._submit_failure(fwk, placed, verdict, start, nominations)
        if verdict.code == Code.ERROR:
            self._condition(group, "False", "SchedulerError", verdict.message())
        else:
            self._condition(group, "False", "Unschedulable", verdict.message())
        if verdict.code == Code.ERROR:
            result = ERROR
        elif nominations is not None:
            result = WAITING_ON_PREEMPTION
        else:
            result = UNSCHEDULABLE
        self._record(fwk, result, start)

    def _condition(self, group: PodGroupInfo, status: str, reason: str, message: str) -> None:
        if self.conditions is not None:
            self.conditions.want(group, WantedCondition(status, reason, message))

    # ------------------------------------------------------------------ the algorithm
    def _algorithm(
        self,
        fwk: SchedulingFramework,
        group: PodGroupInfo,
        gang: GangState,
        infos: list[QueuedPodInfo[PodInfo]],
        snapshot: Snapshot,
        search: SearchState,
    ) -> tuple[list[_Member], GroupStatus]:
        """podGroupSchedulingDefaultAlgorithm: each member in order, assumed where it
        fits; the group verdict. Members after an early stop get a copy of the verdict
        as it was then."""
        members = [_Member(info) for info in infos]
        self._trying = members
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
        schedule = self.algorithms[fwk.profile_name]
        for i, m in enumerate(members):
            pod = m.info.pod
            # a fresh cycle for opportunistic batching per member: a result kept from the
            # previous member is never reused (its node may be the one just assumed)
            search.cycle += 2
            try:
                result = schedule(m.state, pod, snapshot, self.nominator, search)
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
                placed = self._assume_and_reserve(fwk, m, result.node, snapshot)
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
    def _fill_untried(rest: list[_Member], verdict: GroupStatus) -> None:
        for m in rest:
            m.status = GroupStatus(verdict.code, list(verdict.reasons))

    def _assume_and_reserve(
        self, fwk: SchedulingFramework, m: _Member, node: str, snapshot: Snapshot
    ) -> bool:
        """upstream assumeAndReserve in a group cycle: assumed in the snapshot (the next
        members see it), Reserve, the nomination dropped (it would count twice)."""
        pod = m.info.pod
        assumed = dataclasses.replace(pod, node_name=node)
        snapshot.add_pod(assumed, node)
        m.old_nomination = self.nominator.nominated_node(pod)
        self.nominator.remove(pod)
        m.assumed, m.node = assumed, node
        st = fwk.run_reserve(m.state, assumed, node)
        if not st.ok:
            self._unassume(fwk, m, snapshot)
            m.status = GroupStatus(st.code, list(st.reasons))
            return False
        return True

    def _unassume(self, fwk: SchedulingFramework, m: _Member, snapshot: Snapshot) -> None:
        assert m.assumed is not None
        fwk.run_unreserve(m.state, m.assumed, m.node)
        snapshot.remove_pod(m.assumed, m.node)
        if m.old_nomination:
            self.nominator.add(m.info.pod, m.old_nomination)
        m.assumed = None

    def _revert(
        self,
        fwk: SchedulingFramework,
        members: list[_Member],
        snapshot: Snapshot,
        *,
        restore: bool = True,
    ) -> None:
        """Undo the simulation, last member first (upstream's revertFns): Unreserve,
        forget in the snapshot, the old nomination back. The members keep the node the
        algorithm found (`node`) for the submit."""
        for m in reversed(members):
            if m.assumed is not None:
                fwk.run_unreserve(m.state, m.assumed, m.node)
                if not restore:
                    snapshot.remove_pod(m.assumed, m.node)
                if m.old_nomination:
                    self.nominator.add(m.info.pod, m.old_nomination)
                m.placed = True
                m.assumed = None
        if restore:
            snapshot.restore_mutations()

    def _undo(
        self, fwk: SchedulingFramework, state: CycleState, assumed: PodInfo, node: str
    ) -> None:
        """A cache assumption of the submit undone (Reserve or Permit refused it)."""
        fwk.run_unreserve(state, assumed, node)
        with contextlib.suppress(CacheError):
            self.cache.forget_pod(assumed)

    # ------------------------------------------------------------------ PodGroupPostFilter
    def _pod_group_post_filter(
        self,
        fwk: SchedulingFramework,
        group: PodGroupInfo,
        gang: GangState,
        infos: list[QueuedPodInfo[PodInfo]],
        tried: list[_Member],
        snapshot: Snapshot,
        search: SearchState,
    ) -> tuple[Code, str, dict[str, str] | None]:
        """upstream RunPodGroupPostFilterPlugins (framework/runtime/framework.go) over the
        default profile's two PodGroupPostFilter plugins, in order: an error stops with
        `error in "<plugin>" PodGroupPostFilter plugins: <message>`, a success or an
        UnschedulableAndUnresolvable answer stands alone, Unschedulable reasons add up.
        Returns (code, the reason to append, the members' nominations when victims were
        chosen or a preemption is in flight).

        1. DynamicResources is in upstream's default profile (DRA is GA) though not in
           this scheduler, which takes no pod with claims. For such pods its
           PodGroupPostFilter (plugins/dynamicresources/dynamicresources.go) reads the
           state its PreFilter left in the group's cycle: none when no member reached
           its PreFilter this attempt (the placement check failed first, or an earlier
           PreFilter plugin rejected every member outright), which is an error ("not
           found", the cycle state's ErrNotFound); else it has nothing to free.
        2. DefaultPreemption: pod-group preemption (preemption/pod_group_preemption.py),
           its messages prefixed `pod group preemption: `; victims are preempted by a
           background task (preemption/pod_group_executor.py)."""
        if not any(m.pre_filtered for m in tried):
            return (
                Code.ERROR,
                'error in "DynamicResources" PodGroupPostFilter plugins: not found',
                None,
            )
        reasons = [DRA_NOTHING_TO_FREE]
        if not fwk.has_plugin(names.DEFAULT_PREEMPTION):
            return Code.UNSCHEDULABLE, ", ".join(reasons), None
        plugin = fwk.plugin(names.DEFAULT_PREEMPTION)
        services: PreemptionServices | None = getattr(plugin, "services", None)
        members = [i.pod for i in infos]
        try:
            result = self._preempt(fwk, group, gang, infos, members, snapshot, search, services)
        finally:
            snapshot.restore_mutations()
        self.metrics.workload_preemption_attempts.labels(result=_CODE_NAMES[result.code]).inc()
        said = f"pod group preemption: {result.message}" if result.message else ""
        if result.code == Code.ERROR:
            return (
                Code.ERROR,
                f'error in "{names.DEFAULT_PREEMPTION}" PodGroupPostFilter plugins: {said}',
                None,
            )
        if result.code == Code.SUCCESS:
            executor = services.pod_group_preemptions if services is not None else None
            if result.victims and executor is not None:
                executor.start(group, members, result.victims, plugin.handle)  # type: ignore[attr-defined]
                self.metrics.workload_preemption_victims.observe(len(result.victims))
            return Code.SUCCESS, said, result.nominations
        if result.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return result.code, said, None
        reasons.append(said)
        return Code.UNSCHEDULABLE, ", ".join(reasons), None

    def _preempt(
        self,
        fwk: SchedulingFramework,
        group: PodGroupInfo,
        gang: GangState,
        infos: list[QueuedPodInfo[PodInfo]],
        members: list[PodInfo],
        snapshot: Snapshot,
        search: SearchState,
        services: PreemptionServices | None,
    ) -> GroupPreemption:
        def rerun() -> tuple[list[Assignment], Code, str]:
            # the group algorithm again, fresh cycle states, on the snapshot without the
            # victims; its members' placement undone, the victims' removal kept
            tried, verdict = self._algorithm(fwk, group, gang, infos, snapshot, search)
            placed = [Assignment(m.info.pod, m.node, m.state) for m in tried if m.assumed]
            self._revert(fwk, tried, snapshot, restore=False)
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
            fwk.run_reserve(state, pod, node)

        sim = Simulation(
            run_algorithm=rerun,
            add_pod=add_pod,
            remove_pod=remove_pod,
            passes_filter=passes,
            reserve=reserve,
            unreserve=fwk.run_unreserve,
        )
        pdbs = services.pdbs() if services is not None else ()
        return preempt_for_group(
            members,
            group.priority,
            any(p.preemption_policy == "Never" for p in members),
            snapshot,
            self.cache.gang,
            pdbs,
            sim,
            may_evict=_victim_filter(fwk.plugin(names.DEFAULT_PREEMPTION), members[0]),
        )

    # ------------------------------------------------------------------ submitting
    def _submit_success(
        self, fwk: SchedulingFramework, members: list[_Member], start: float
    ) -> None:
        for m in members:
            info = m.info
            if not m.placed:
                # fits nowhere (or its Reserve failed) while the group is placed: its own
                # reason, and straight back to activeQ (upstream keeps the group's
                # timestamp so leftovers retry at once)
                own = m.status or GroupStatus(Code.UNSCHEDULABLE, [])
                self.queue.retry_at_once(info.uid)
                self._failed(fwk, m, own, start, nominated=None)
                continue
            try:
                self._prepare_for_binding(fwk, m, start)
            except Exception:  # one member's crash must not strand its siblings
                log.exception("submitting a pod group member crashed pod=%s", info.pod.key)
                fwk.waiting_pods.remove(info.uid)
                assumed = self.cache.get_pod(info.uid)
                if assumed is not None and self.cache.is_assumed(assumed):
                    with contextlib.suppress(Exception):
                        self._undo(fwk, m.state, assumed, m.node)
                self.failures.requeue_quietly(info)

    def _prepare_for_binding(self, fwk: SchedulingFramework, m: _Member, start: float) -> None:
        """upstream prepareForBindingCycle: assume in the cache, Reserve (again, as
        upstream), Permit; then the binding task. A member that waits at Permit is let
        go by the member that completes minCount, later in this same loop."""
        info, pod, node = m.info, m.info.pod, m.node
        try:
            assumed = self.cache.assume_pod(pod, node)
        except CacheError as exc:
            st = Status.from_error(exc)
            self.failures.failed(
                fwk, info, st, str(exc), start, RESULT_ERROR, nominated=self._clear(pod)
            )
            return
        self.nominator.remove(pod)
        st = fwk.run_reserve(m.state, assumed, node)
        if st.ok:
            st, timeout = fwk.run_permit(m.state, assumed, node)
        if not st.ok and st.code != Code.WAIT:
            self._undo(fwk, m.state, assumed, node)
            self.failures.failed(
                fwk, info, st, st.message(), start, result_of(st), nominated=self._clear(pod)
            )
            return
        waiting = None
        if st.code == Code.WAIT:
            waiting = WaitingPod(assumed, node, plugin=st.plugin, timeout=timeout)
            fwk.waiting_pods.add(waiting)
        self.binding.start(Assumed(fwk, m.state, info, assumed, node, start), waiting)

    def _submit_failure(
        self,
        fwk: SchedulingFramework,
        members: list[_Member],
        verdict: GroupStatus,
        start: float,
        nominations: dict[str, str] | None = None,
    ) -> None:
        for m in members:
            pod = m.info.pod
            if nominations is not None:
                # waiting on preemption: the group's verdict as is for those that fitted,
                # their own for the others, and every member nominated where the
                # preemption placed it (upstream applyPodGroupPostFilterResult)
                own = verdict if m.placed else (m.status or verdict)
                node = nominations.get(pod.uid)
                if node is not None:
                    self.nominator.add(pod, node)
                self._failed(fwk, m, own, start, nominated=node)
                continue
            if verdict.code == Code.ERROR:
                own = m.status if m.status is not None and m.status.code == Code.ERROR else verdict
                self._failed(fwk, m, own, start, nominated=self._clear(pod))
            elif m.placed:
                # it fitted on its own: the group's reason, and its nomination cleared
                st = GroupStatus(Code.UNSCHEDULABLE, [POD_GROUP_UNSCHEDULABLE, verdict.message()])
                self._failed(fwk, m, st, start, nominated=self._clear(pod))
            else:
                # its own FitError (no per-pod PostFilter in a group cycle) or the group's
                # verdict as it stood when the cycle stopped; its nomination is left alone
                own = m.status or GroupStatus(verdict.code, list(verdict.reasons))
                self._failed(fwk, m, own, start, nominated=None)

    def _failed(
        self,
        fwk: SchedulingFramework,
        m: _Member,
        st: GroupStatus,
        start: float,
        *,
        nominated: str | None,
    ) -> None:
        result = RESULT_ERROR if st.code == Code.ERROR else RESULT_UNSCHEDULABLE
        rejectors = set(m.fit.diagnosis.unschedulable_plugins) if m.fit is not None else set()
        status = Status(st.code, tuple(st.reasons))
        self.failures.failed(
            fwk, m.info, status, st.message(), start, result,
            rejectors=rejectors, nominated=nominated,
        )  # fmt: skip

    def _clear(self, pod: PodInfo) -> str | None:
        """upstream clearNominatedNode: drop the nomination; clear the API's copy if any."""
        self.nominator.remove(pod)
        return "" if pod.nominated_node_name else None

    def _error_all(
        self,
        fwk: SchedulingFramework | None,
        members: list[QueuedPodInfo[PodInfo]],
        problem: str,
        start: float,
    ) -> None:
        """handlePodGroupFailureBeforeScheduling: every member fails with the error."""
        log.warning("pod group cycle failed before scheduling: %s", problem)
        for info in members:
            f = fwk or self.frameworks.get(info.pod.scheduler_name)
            if f is None:
                self.queue.done(info.uid)
                continue
            self.failures.failed(
                f, info, Status(Code.ERROR, (problem,)), problem, start, RESULT_ERROR,
                nominated=self._clear(info.pod),
            )  # fmt: skip
        if fwk is not None:
            self._record(fwk, ERROR, start)

    def _record(self, fwk: SchedulingFramework, result: str, start: float) -> None:
        profile = fwk.profile_name
        self.metrics.schedule_attempts.labels(result=result, profile=profile).inc()
        self.metrics.attempt_duration.labels(result=result, profile=profile).observe(
            self.clock.now() - start
        )
