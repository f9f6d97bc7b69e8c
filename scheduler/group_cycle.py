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

The simulation (the members' placement, undone, and pod-group preemption's decision) is
group_algorithm.py, which explain runs too; this module takes the members from the queue
and submits, fails or requeues them.

Then the PodGroup's PodGroupInitiallyScheduled condition says how it went
(group_status_writer.py) and the podgroup attempt metrics count it.

Not yet here (docs/plans/gangs.md): PodGroupPostFilter chooses no victims (preemption
for a whole group); it answers only where no preemption could help.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from scheduler.algorithm import SchedulePod
from scheduler.binding_cycle import Assumed, BindingCycles
from scheduler.cache import Cache, CacheError, Nominator, Snapshot
from scheduler.cache.gang_state import GangState
from scheduler.clock import Clock
from scheduler.config import names
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.scheduling_framework import SchedulingFramework
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting_pods import WaitingPod
from scheduler.group_algorithm import (
    CODE_NAMES,
    DRA_NOTHING_TO_FREE,
    POD_GROUP_UNSCHEDULABLE,
    GroupAlgorithm,
    GroupStatus,
    member_order,
    validate,
    with_post_filter,
)
from scheduler.group_algorithm import Member as _Member
from scheduler.group_status_writer import GroupStatusWriter, WantedCondition
from scheduler.metrics import PodGroupMetrics
from scheduler.model import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.preemption.default_preemption import PreemptionServices
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.scheduling_failure import (
    RESULT_ERROR,
    RESULT_UNSCHEDULABLE,
    FailureHandler,
    result_of,
)

__all__ = [
    "DRA_NOTHING_TO_FREE",
    "POD_GROUP_UNSCHEDULABLE",
    "GroupCycle",
    "GroupStatus",
    "member_order",
    "validate",
]

log = logging.getLogger(__name__)

NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"
NOT_ELIGIBLE = "pod group preemption: not eligible due to preemptionPolicy=Never."
NOT_IMPLEMENTED = (
    "pod group preemption: lower-priority pods exist, but this scheduler does not preempt "
    "for pod groups yet"
)

SCHEDULED = "scheduled"
WAITING_ON_PREEMPTION = "waiting_on_preemption"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"


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
        algo = GroupAlgorithm(
            fwk, self.algorithms[fwk.profile_name], self.nominator, self.cache.gang
        )
        try:
            placed, verdict = algo.place(group, gang, members, snapshot, search)
        except Exception as exc:  # a plugin bug: undo, tell every member, lose nothing
            log.exception("pod group cycle crashed group=%s/%s", group.namespace, group.name)
            with contextlib.suppress(Exception):
                algo.revert(algo.trying, snapshot)
            self._error_all(
                fwk, members,
                f"internal error in the pod-group cycle: {type(exc).__name__}: {exc}", start,
            )  # fmt: skip
            return
        # the algorithm is a simulation: undone whatever its verdict (upstream's
        # runRootSchedulingAlgorithm reverts on return); a placed group is assumed in
        # the cache member by member when it is submitted
        algo.revert(placed, snapshot)
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
                    algo, group, gang, members, placed, snapshot, search
                )
            except Exception as exc:  # a plugin bug in the preemption: the group errs
                log.exception("pod group post filter crashed group=%s", group.key)
                code, nominations = Code.ERROR, None
                said = f"internal error in PodGroupPostFilter: {type(exc).__name__}: {exc}"
            verdict = with_post_filter(verdict, code, said)
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
        algo: GroupAlgorithm,
        group: PodGroupInfo,
        gang: GangState,
        infos: list[QueuedPodInfo[PodInfo]],
        tried: list[_Member],
        snapshot: Snapshot,
        search: SearchState,
    ) -> tuple[Code, str, dict[str, str] | None]:
        """upstream RunPodGroupPostFilterPlugins, decided by the simulation
        (group_algorithm.GroupAlgorithm.post_filter); here its metrics and, when victims
        were chosen, their deletion by a background task (preemption/
        pod_group_executor.py). Returns (code, the reason to append, the members'
        nominations when victims were chosen or a preemption is in flight)."""
        fwk = algo.fwk
        services: PreemptionServices | None = None
        if fwk.has_plugin(names.DEFAULT_PREEMPTION):
            services = getattr(fwk.plugin(names.DEFAULT_PREEMPTION), "services", None)
        outcome = algo.post_filter(
            group, gang, infos, tried, snapshot, search,
            lambda: services.pdbs() if services is not None else (),
        )  # fmt: skip
        result = outcome.preemption
        if result is None:
            return outcome.code, outcome.said, None
        self.metrics.workload_preemption_attempts.labels(result=CODE_NAMES[result.code]).inc()
        if outcome.code != Code.SUCCESS:
            return outcome.code, outcome.said, None
        executor = services.pod_group_preemptions if services is not None else None
        if result.victims and executor is not None:
            plugin = fwk.plugin(names.DEFAULT_PREEMPTION)
            executor.start(group, [i.pod for i in infos], result.victims, plugin.handle)
            self.metrics.workload_preemption_victims.observe(len(result.victims))
        return Code.SUCCESS, outcome.said, result.nominations

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
