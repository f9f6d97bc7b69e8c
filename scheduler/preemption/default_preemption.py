"""DefaultPreemption: PostFilter (preemption), PreEnqueue (the preemption gate) and the
cluster events that re-check gated preemptors (KEP-4832, asynchronous preemption).

PostFilter runs in the scheduling cycle and makes no API call: the evaluator picks a
node and victims on the cycle's snapshot (Filter through the framework's NodeDryRun)
and the executor starts the background task. The plugin writes no nomination itself: its
PostFilterResult names the node (and the lower-priority nominations that no longer
hold), and the scheduling loop, the nominator's only writer, records them before the
next pod, so pods of lower or equal priority scheduled next cannot take the space. The
preemptor is not bound in this cycle: it goes back to the queue with its nomination.

PreEnqueue keeps the preemptor out of activeQ while its task runs, so it is not retried
and cannot preempt the same victims twice; the gate opens once the task has recorded
its last victim and that victim is gone from the cache or terminating (or when the task
ends: the executor then activates the preemptor, always).

Mode Sync: the same decision and the same task; the result hands the task to the loop
as `settle`, so the API calls are waited for before the next pod (side-by-side numbers).

The plugin needs, besides its args and the framework handle, a `PreemptionServices`
(shared by all profiles): the executor, the schedulerNames of this process's profiles
(victim scope), a pod lookup in the cache, and the PDB lister. Register it with
`registry.register(names.DEFAULT_PREEMPTION, default_preemption.factory(services))`.
It lives in the preemption package, beside the evaluator and the executor it drives,
so imports point down (plugins and framework below, never up).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.config.args import MODE_SYNC, DefaultPreemptionArgs
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis, FitError
from scheduler.framework.dry_run import DryRunPlan
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.metrics import SchedulerMetrics
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PodInfo
from scheduler.plugins.helpers import QUEUE, SKIP, event
from scheduler.preemption.evaluator import (
    Decision,
    DryRun,
    Evaluation,
    Evaluator,
    FitCheck,
    NodeLike,
)
from scheduler.preemption.executor import PreemptionExecutor
from scheduler.preemption.pod_group_executor import PodGroupPreemptions
from scheduler.preemption.policy_evaluator import new_evaluator
from scheduler.preemption.unit_victims import GroupAwareVictims
from scheduler.preemption.victim_policy import VictimPolicy, recording_nothing

__all__ = ["MSG_WAITING", "DefaultPreemption", "PreemptionServices", "factory"]

log = logging.getLogger(__name__)

MSG_WAITING = "waiting for the preemption for this pod to be finished"
MSG_WAITING_GROUP = "waiting for the preemption for this pod group to be finished"

# uid -> the pod as the cache has it now (None when gone); Cache.get_pod is one
PodLookup = Callable[[str], PodInfo | None]
PDBLister = Callable[[], Sequence[PDBInfo]]


def _no_pdbs() -> Sequence[PDBInfo]:
    return ()


def _first(n: int) -> int:
    return 0


@dataclass
class PreemptionServices:
    """What every profile's DefaultPreemption shares."""

    executor: PreemptionExecutor
    own_schedulers: frozenset[str]
    """schedulerNames of this process's profiles (victimScope OwnProfiles)."""
    pod_lookup: PodLookup
    pdbs: PDBLister = _no_pdbs
    metrics: SchedulerMetrics | None = None
    rand: Callable[[int], int] = field(default=random.randrange)
    victim_policy: VictimPolicy | None = None
    """Operator PreemptionPolicies (scheduler.policy.PolicyStore), if enabled."""
    pod_group_preemptions: PodGroupPreemptions | None = None
    """GenericWorkload: the preemptions for whole pod groups (pod_group_executor.py)."""
    generic_workload: bool = False
    """The GenericWorkload gate: single-pod preemption then takes victims as units
    (unit_victims.py), an all-members PodGroup whole, with PodGroup priorities."""


def _prefixed(status: Status, plugin: str) -> Status:
    """upstream DefaultPreemption.PostFilter: every non-empty message of the evaluator
    becomes "preemption: <message>" (the code is kept)."""
    message = status.message()
    reasons = (f"preemption: {message}",) if message else status.reasons
    return Status(status.code, reasons, status.plugin or plugin, status.error)


class DefaultPreemption(PreEnqueuePlugin, PostFilterPlugin, EnqueueExtensions):
    name = names.DEFAULT_PREEMPTION

    def __init__(
        self, args: DefaultPreemptionArgs, handle: Handle, services: PreemptionServices
    ) -> None:
        self.args = args
        self.handle = handle
        self.services = services
        self.executor = services.executor
        self.evaluator = new_evaluator(
            args, services.own_schedulers, rand=services.rand, policy=services.victim_policy
        )
        # what_if's (explain): the same rules, recording nothing; the sampling starts at
        # the first candidate so that the same question gets the same answer
        quiet = recording_nothing(services.victim_policy) if services.victim_policy else None
        self.dry_run_evaluator = new_evaluator(
            args, services.own_schedulers, rand=_first, policy=quiet
        )
        self.sync = args.mode == MODE_SYNC

    # ------------------------------------------------------------------ PostFilter

    def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        metrics = self.services.metrics
        if metrics is not None:
            metrics.preemption_attempts.inc()
        if self.executor.is_running(pod.uid):
            # normally gated; reachable only through a forced activation mid-task. The
            # task writes the pod's status.
            return PostFilterResult(status_by_task=True), Status.unschedulable(
                MSG_WAITING, plugin=self.name
            )
        evaluation = self._evaluate(self.evaluator, state, pod, snapshot, diagnosis)
        decision = evaluation.decision
        if decision is None:
            status = _prefixed(evaluation.status, self.name)
            if evaluation.clear_nomination:
                # upstream: a result with an empty node clears nominatedNodeName
                return PostFilterResult(""), status
            return None, status

        if metrics is not None:
            metrics.preemption_victims.observe(len(decision.victims))
        placed = self._placed(decision)
        diagnosis.post_filter_msg = placed.message()
        message = FitError(pod, snapshot.num_nodes, diagnosis).message()
        log.info(
            "preemption decided preemptor=%s node=%s victims=%d pdb_violations=%d mode=%s",
            pod.key,
            decision.node,
            len(decision.victims),
            decision.num_pdb_violations,
            self.args.mode,
        )
        task = self.executor.start(decision, message, self.handle)
        result = PostFilterResult(
            decision.node,
            cleared=tuple(decision.lower_priority_nominated),
            status_by_task=True,
            settle=task if self.sync else None,
        )
        return result, placed

    def what_if(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[Evaluation | None, Status]:
        """What PostFilter would decide for `pod` now, without doing any of it (explain):
        the same evaluator algorithm, Filter dry runs and PreemptionPolicy rules, through
        the dry-run evaluator whose policy records nothing (no cooldown memory, no
        counters). No nomination, no task, no metric. Returns the evaluation (None when
        a preemption task of this pod is running: PostFilter would wait for it) and the
        Status PostFilter would return. `state` must hold this pod's PreFilter results
        and may not be the loop's (dry runs copy what they change)."""
        if self.executor.is_running(pod.uid):
            return None, Status.unschedulable(MSG_WAITING, plugin=self.name)
        evaluation = self._evaluate(self.dry_run_evaluator, state, pod, snapshot, diagnosis)
        if evaluation.decision is None:
            return evaluation, _prefixed(evaluation.status, self.name)
        return evaluation, self._placed(evaluation.decision)

    def _placed(self, decision: Decision) -> Status:
        """upstream Preempt's success message; the pod's PodScheduled message carries it"""
        return _prefixed(
            Status(
                Code.SUCCESS,
                (
                    f"found a potential placement for pod on node {decision.node}, "
                    f"preempting {len(decision.victims)} victims",
                ),
            ),
            self.name,
        )

    def policies_for(self, pod: PodInfo) -> tuple[str, ...]:
        """The names of the PreemptionPolicies that apply to `pod` as a preemptor."""
        policy = self.services.victim_policy
        rules = policy.rules_for(pod) if policy is not None else None
        return tuple(rules.policies) if rules is not None else ()

    def _evaluate(
        self,
        evaluator: Evaluator,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        diagnosis: Diagnosis,
    ) -> Evaluation:
        """The evaluation both PostFilter and what_if run."""
        nominator = self.handle.nominator
        nominated = nominator.nominated_node(pod) or pod.nominated_node_name
        # upstream GetVictimsOnNode: with GenericWorkload, victims by units
        # (framework/preemption/preemption.go); without, each pod alone, its own priority
        units = (
            GroupAwareVictims(self.handle.gang_lookup, snapshot)
            if self.services.generic_workload
            else None
        )
        return evaluator.evaluate(
            pod,
            diagnosis.node_to_status(),
            snapshot,
            nominator,
            self.services.pdbs(),
            self._fit(state),
            nominated_node=nominated,
            num_all_nodes=snapshot.num_nodes,
            units=units,
        )

    def _fit(self, state: CycleState) -> FitCheck:
        runner = self.handle.filter_runner
        nominator = self.handle.nominator
        if runner is None:
            raise RuntimeError("DefaultPreemption needs the handle of a Framework")

        # one plan for every node dry-run for the pod this cycle (framework/dry_run.py)
        plan: DryRunPlan | None = None

        def open_dry_run(pod: PodInfo, node: NodeLike, /) -> DryRun:
            nonlocal plan
            if not isinstance(node, NodeView):
                raise TypeError(f"expected a NodeView from the snapshot, got {type(node)!r}")
            if plan is None or plan.pod is not pod:
                plan = DryRunPlan(runner, state, pod, nominator)
            return plan.open(node)

        return open_dry_run

    # ------------------------------------------------------------------ PreEnqueue

    def _gated(self, pod: PodInfo) -> str:
        """Why the pod must wait for a preemption in flight ("" when it need not): a
        PodGroup member for its group's (a missing PodGroup gates nothing), any other
        pod for its own (upstream default_preemption.go PreEnqueue)."""
        if pod.pod_group:
            group_preemptions = self.services.pod_group_preemptions
            gang = self.handle.gang_lookup(pod.namespace, pod.pod_group)
            if (
                group_preemptions is not None
                and gang is not None
                and gang.pod_group is not None
                and group_preemptions.is_gated(gang.pod_group.uid)
            ):
                return MSG_WAITING_GROUP
            return ""
        return MSG_WAITING if self.executor.is_gated(pod.uid) else ""

    def pre_enqueue(self, pod: PodInfo) -> Status:
        """The gate: closed while the executor says the preemptor must wait
        (PreemptionExecutor.is_gated, the one answer; this only asks)."""
        why = self._gated(pod)
        if not why:
            return Status.success()
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (why,), self.name)

    # ------------------------------------------------------------------ events

    def _gate_opened(self, pod: Any, old: Any, new: Any) -> Any:
        """A pod this plugin's gate held comes back when an assigned pod's change (a
        victim deleted, or given its deletionTimestamp) has opened the gate: the
        informer updates the cache before the hints run, so the executor's answer
        already sees the change."""
        return SKIP if self._gated(pod) else QUEUE

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Gated preemptors are re-checked when an assigned pod is deleted or updated
        (a victim getting its deletionTimestamp is an update)."""
        return [
            event(EventResource.ASSIGNED_POD, ActionType.DELETE, self._gate_opened),
            event(
                EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_GENERATED, self._gate_opened
            ),
        ]


def factory(services: PreemptionServices) -> Callable[[Any, Handle], DefaultPreemption]:
    """The registry factory: (args, handle) -> DefaultPreemption sharing `services`."""

    def new(args: Any, handle: Handle) -> DefaultPreemption:
        if args is None:
            args = DefaultPreemptionArgs()
        if not isinstance(args, DefaultPreemptionArgs):
            raise TypeError(f"DefaultPreemption takes DefaultPreemptionArgs, got {type(args)!r}")
        return DefaultPreemption(args, handle, services)

    return new
