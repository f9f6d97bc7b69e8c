"""The preemption evaluator: which node to free, and which pods to evict there.

Pure and synchronous: no API calls, no awaiting, no mutation of what it is given. It runs
in the scheduling cycle (PostFilter) on the cycle's snapshot, as upstream's
framework/preemption Evaluator (KEP-4832 keeps this part in the cycle):

1. eligibility: ``preemptionPolicy: Never`` never preempts; a pod nominated to a node
   where a lower-priority pod is terminating *because of preemption* waits for that
   space, unless the nominated node is now UnschedulableAndUnresolvable;
2. candidate nodes: only those whose Filter status was UNSCHEDULABLE;
3. sampling: from a random offset, in wrap-around order, until at least one candidate
   violating no PDB exists and max(pct% of candidates, absolute) were found (capped);
4. per node, a dry run (:func:`select_victims`): remove every lower-priority pod the
   victim scope allows, check the preemptor fits, then reprieve greedily, PDB-violating
   pods first, most important first;
5. :func:`pick_one_node`: upstream's criteria, in upstream's order.

The "does the pod fit on node N without these pods" question goes through a
:class:`FitCheck`, which opens a :class:`DryRun` (a private copy of the node:
remove_pod(s), add_pod, filter, and still_fits for the reprieve steps). The algorithm is
tested against an in-memory resource fit (tests/unit/helpers/preemption_fakes.py) and against
the full Filter at every step (tests/unit/framework/test_dry_run.py), and runs in
production on the framework's NodeDryRun (framework/dry_run.py),
which also applies the nominated-pods two-pass rule (pods nominated to N with priority >=
the preemptor's are counted).

Invariant: victims are always ordered most important first (higher priority, then
earlier start), so the last victim is the least important; the executor deletes it last.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.config.args import SCOPE_ALL, DefaultPreemptionArgs
from scheduler.framework.diagnosis import fit_error_message, status_histogram
from scheduler.framework.nominated_pods import NominatedPods
from scheduler.framework.status import Code, Status
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PREEMPT_NEVER, PodInfo
from scheduler.preemption.go_sort import sort_slice

__all__ = [
    "Candidate",
    "Decision",
    "DryRun",
    "DryRunError",
    "Evaluation",
    "Evaluator",
    "FitCheck",
    "NodeLike",
    "NodeLookup",
    "NominatedPods",
    "VictimSelector",
    "calculate_num_candidates",
    "eligible_to_preempt",
    "importance_key",
    "pick_one_node",
    "select_victims",
    "split_by_pdb",
]

log = logging.getLogger(__name__)

# upstream v1.37.2 wording (defaultpreemption/default_preemption.go and
# framework/preemption/preemption.go); DefaultPreemption prefixes "preemption: ".
MSG_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING = "not eligible due to a terminating pod on the nominated node."
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
# the status of every node preemption did not dry-run, when no candidate was found
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"

# upstream adds MaxInt32+1 to each priority before summing, so every term is >= 0 and a
# node with more negative-priority victims is not preferred for its smaller sum.
_PRIORITY_OFFSET = 2**31


# ---------------------------------------------------------------- the inputs


class NodeLike(Protocol):
    """A node of the snapshot with the pods on it (the cache's NodeView is one)."""

    @property
    def name(self) -> str: ...

    @property
    def pods(self) -> Mapping[str, PodInfo]:
        """uid -> pod, every pod counted on the node (assumed and terminating too)."""
        ...


class NodeLookup(Protocol):
    """The cycle's snapshot (cache.Snapshot), or a dict of name -> node in tests."""

    def get(self, node_name: str, /) -> NodeLike | None: ...


class DryRun(Protocol):
    """A private copy of one node's state for "what if" questions (the framework's
    NodeDryRun is one). remove_pod/add_pod change the copy (and keep PreFilter state in
    step); filter() runs Filter for the preemptor on it, counting pods nominated to the
    node with priority >= the preemptor's (and, when it added any, also passing without
    them: upstream RunFilterPluginsWithNominatedPods)."""

    def remove_pod(self, pod: PodInfo, /) -> Status: ...

    def remove_pods(self, pods: Sequence[PodInfo], /) -> Status:
        """remove_pod of each, in order; the first non-SUCCESS Status ends it."""
        ...

    def add_pod(self, pod: PodInfo, /) -> Status: ...

    def filter(self) -> Status: ...

    def still_fits(self) -> bool:
        """After filter() passed on this copy: does the pod pass Filter again (SUCCESS
        only, as upstream's reprieve test), given the pods added/removed since? An
        implementation may re-run only what those changes can affect."""
        ...

    def remove_remote_pod(self, pod: PodInfo, node: NodeLike, /) -> Status:
        """`pod`, on another node `node`, leaves with a victim unit (GenericWorkload): only
        the PreFilter extensions are told (upstream SelectVictimsOnNode runs
        RunPreFilterExtensionRemovePod with the remote NodeInfo and never changes it)."""
        ...

    def add_remote_pod(self, pod: PodInfo, node: NodeLike, /) -> Status:
        """The reverse of remove_remote_pod (a unit reprieved)."""
        ...


class VictimSelector(Protocol):
    """How victims are chosen on one node when they are not single pods: with the
    GenericWorkload gate (unit_victims.GroupAwareVictims), a pod of a PodGroup whose
    disruption mode is `all` is taken with every scheduled member of its group."""

    def select(
        self,
        preemptor: PodInfo,
        node: NodeLike,
        pdbs: Sequence[PDBInfo],
        fit: FitCheck,
        may_evict: Callable[[PodInfo], bool],
        /,
    ) -> tuple[list[PodInfo], int, Status]:
        """As select_victims."""
        ...

    def priority(self, pod: PodInfo, /) -> int:
        """`pod`'s priority as a victim (its PodGroup's when it has one)."""
        ...


class FitCheck(Protocol):
    """Opens a DryRun of `node` for `pod`. Must not modify `node` itself."""

    def __call__(self, pod: PodInfo, node: NodeLike, /) -> DryRun: ...


# ---------------------------------------------------------------- the outputs


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]  # most important first
    num_pdb_violations: int
    by_units: bool = False
    """The victims were chosen as units (GenericWorkload, unit_victims.py): most
    important first by the units' priorities, which may be their PodGroups'."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What the cycle decided; the executor turns it into API calls."""

    preemptor: PodInfo
    node: str
    victims: tuple[PodInfo, ...]  # most important first; the last is deleted last
    num_pdb_violations: int
    lower_priority_nominated: tuple[PodInfo, ...]
    """Pods nominated to `node` with lower priority: their nominations are cleared."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The evaluator's answer.

    - ``decision`` set: preempt (status SUCCESS).
    - ``decision`` None: ``status`` says why (UNSCHEDULABLE, or ERROR when a dry run
      failed internally and nothing else was found). ``clear_nomination`` is True when
      preemption was tried and no node can help: the preemptor's nomination must go
      (upstream's PostFilterResult with an empty nominated node). When the pod was not
      eligible it is False: the nomination is kept.
    """

    status: Status
    decision: Decision | None = None
    clear_nomination: bool = False
    candidates: tuple[Candidate, ...] = ()
    node_statuses: Mapping[str, Status] = field(default_factory=dict)
    nodes_checked: int = 0


# ---------------------------------------------------------------- the steps


def importance_key(pod: PodInfo) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then earlier start time. A pod
    without a start time counts as started now, i.e. last (upstream GetPodStartTime)."""
    start = pod.start_time if pod.start_time is not None else math.inf
    return (-pod.priority, start)


def _importance(pods: Sequence[PodInfo]) -> dict[str, tuple[int, float, int]]:
    """uid -> a key whose `<` is upstream's MoreImportantVictim for single pods
    (framework/preemption/util.go): higher priority, then the earlier start. A victim
    without a start time gets time.Now() when GetVictimsOnNode creates it (NewVictim,
    framework/preemption/types.go), once per pod in the node's pod order: it started
    after every pod that has a start time, and after such pods listed before it, so
    those never tie. `pods` must be in the node's order."""
    keys: dict[str, tuple[int, float, int]] = {}
    for seq, pod in enumerate(pods, 1):
        start = pod.start_time
        keys[pod.uid] = (
            (-pod.priority, start, 0) if start is not None else (-pod.priority, math.inf, seq)
        )
    return keys


def terminating_by_preemption(pod: PodInfo) -> bool:
    return pod.is_terminating and pod.preempted_by_scheduler


def eligible_to_preempt(
    pod: PodInfo,
    nominated_node: str,
    nodes: NodeLookup,
    diagnosis: Mapping[str, Status],
    absent_code: Code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    victim_priority: Callable[[PodInfo], int] | None = None,
) -> tuple[bool, str]:
    """Upstream PodEligibleToPreemptOthers. `nominated_node` is the pod's current
    nomination ("" for none); a node missing from `diagnosis` has `absent_code`.
    `victim_priority`: a terminating pod's priority as a victim (GenericWorkload: its
    PodGroup's, as NewPodVictim with the PodGroup lister); default its own."""
    if pod.preemption_policy == PREEMPT_NEVER:
        return False, MSG_NEVER
    if not nominated_node:
        return True, ""
    status = diagnosis.get(nominated_node)
    code = status.code if status is not None else absent_code
    if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        return True, ""  # the space it waits for cannot help any more: preempt again
    node = nodes.get(nominated_node)
    if node is not None:
        for other in node.pods.values():
            prio = other.priority if victim_priority is None else victim_priority(other)
            if prio < pod.priority and terminating_by_preemption(other):
                return False, MSG_TERMINATING
    return True, ""


def calculate_num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """max(num_nodes * percentage / 100 (integer division), absolute), capped at num_nodes."""
    n = num_nodes * percentage // 100
    n = max(n, absolute)
    return min(n, num_nodes)


def split_by_pdb(
    pods: Sequence[PodInfo], pdbs: Sequence[PDBInfo]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non_violating), each keeping the order of `pods`.

    Upstream FilterVictimsWithPDBViolation (framework/preemption/util.go): walks `pods`
    in order spending each matching PDB's disruptionsAllowed, in the PDBs' order; a pod
    whose removal takes a budget below zero is violating, and the PDBs after that one
    are not spent for it (podIsViolating returns at once). A pod already listed in a
    PDB's disruptedPods was counted by the API server and spends nothing of that PDB.
    """
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if not pdb.matches(pod) or pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
                    break
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


def select_victims(
    preemptor: PodInfo,
    node: NodeLike,
    pdbs: Sequence[PDBInfo],
    fit: FitCheck,
    may_evict: Callable[[PodInfo], bool],
) -> tuple[list[PodInfo], int, Status]:
    """Upstream SelectVictimsOnNode (plugins/defaultpreemption/default_preemption.go):
    (victims most important first, PDB violations, status). The node is a candidate
    only when the status is SUCCESS and victims exist.

    Ties on priority and start time end as upstream's: the possible victims are listed
    in the node's pod order (GetVictimsOnNode walks NodeInfo.Pods; cache/node_view.py
    keeps that order) and sorted with Go's sort.Slice (go_sort), which is not stable
    beyond 12 pods; the reprieve then walks that order, and the victims are sorted
    again the same way when both PDB groups had pods.
    """
    priority = preemptor.priority
    potential = [p for p in node.pods.values() if p.priority < priority and may_evict(p)]
    if not potential:
        return [], 0, Status.unresolvable(MSG_NO_VICTIMS)
    run = fit(preemptor, node)
    # The per-step checks are inlined (no helper call per pod): this loop runs for
    # every sampled node (10% of a large cluster), once per lower-priority pod.
    success = Code.SUCCESS
    st = run.remove_pods(potential)
    if st.code != success:
        raise DryRunError(st)
    status = run.filter()
    if status.code != success:
        # Not even removing every lower-priority pod helps. (Pod affinity to one of the
        # victims is not considered, as upstream, for cost.)
        return [], 0, status
    rank = _importance(potential)

    def more_important(a: PodInfo, b: PodInfo) -> bool:
        return rank[a.uid] < rank[b.uid]

    sort_slice(potential, more_important)
    violating, non_violating = split_by_pdb(potential, pdbs) if pdbs else ([], potential)
    victims: list[PodInfo] = []
    num_violations = 0
    # Reprieve greedily, PDB-violating pods first, each group most important first: put
    # the pod back; if the preemptor no longer fits, take it out again as a victim.
    for group, violates in ((violating, True), (non_violating, False)):
        for pod in group:
            st = run.add_pod(pod)
            if st.code != success:
                raise DryRunError(st)
            if run.still_fits():
                continue
            st = run.remove_pod(pod)
            if st.code != success:
                raise DryRunError(st)
            victims.append(pod)
            if violates:
                num_violations += 1
    if violating and non_violating:
        sort_slice(victims, more_important)
    return victims, num_violations, Status.success()


class DryRunError(RuntimeError):
    """A PreFilter extension failed while the dry run added or removed a pod."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message() or "dry run failed")
        self.status = status


def _criteria(c: Candidate) -> tuple[int, int, int, int, float]:
    """Upstream pickOneNodeForPreemption's criteria for one candidate, each higher is
    better, in upstream's order: fewest PDB violations; lowest priority of its most
    important victim; smallest sum of victim priorities (each offset by MaxInt32+1);
    fewest victims; latest earliest start among its highest-priority victims (upstream
    GetEarliestPodStartTime; a missing start time counts as now, i.e. latest).

    Every criterion reads the pods' own priorities (corev1helpers.PodPriority), never a
    PodGroup's, and counts every victim, a unit's members on other nodes too. The
    "most important victim" is the first one (upstream reads Pods[0]): without units
    the victims are sorted by their own priority, so it has the highest; with units
    (sorted by the unit's priority) it may not, while the start-time criterion still
    takes the highest own priority over all of them. Without units any order of the
    victims gives the same criteria (the highest own priority is read)."""
    victims = c.victims
    if not victims:
        raise ValueError(f"preemption candidate {c.node!r} has no victims")
    top = victims[0].priority
    total = 0
    earliest = math.inf
    for v in victims:  # one pass, whatever the victims' order
        p = v.priority
        total += p + _PRIORITY_OFFSET
        start = v.start_time if v.start_time is not None else math.inf
        if p > top:
            top, earliest = p, start
        elif p == top and start < earliest:
            earliest = start
    first = victims[0].priority if c.by_units else top
    return (-c.num_pdb_violations, -first, -total, -len(victims), earliest)


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate | None:
    """Upstream pickOneNodeForPreemption (framework/preemption/preemption.go): the
    candidates best on the first criterion, among them those best on the next, and so
    on (see _criteria); then the first in `candidates` order. Keeping the best on each
    criterion in turn is keeping the lexicographic maximum of the criteria tuples, and
    max() returns the first maximal one."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    return max(candidates, key=_criteria)


def _not_helpful(num_all_nodes: int, dry_run_statuses: Mapping[str, Status]) -> str:
    """upstream evaluate() when no candidate was found: a FitError over the dry-run
    statuses, every other node "Preemption is not helpful for scheduling"."""
    explicit = {n: st for n, st in dry_run_statuses.items() if not st.ok}
    absent = Status.unresolvable(MSG_NOT_HELPFUL)
    return fit_error_message(num_all_nodes, status_histogram(num_all_nodes, explicit, absent))


# ---------------------------------------------------------------- the evaluator


class Evaluator:
    """One per DefaultPreemption plugin (per profile). `own_schedulers` are the
    schedulerNames of this process's profiles: with victimScope OwnProfiles (the
    default) only their pods may be evicted (k/k #130429). `rand(n)` gives the sampling
    offset in [0, n)."""

    def __init__(
        self,
        args: DefaultPreemptionArgs,
        own_schedulers: Collection[str],
        *,
        rand: Callable[[int], int] = random.randrange,
    ) -> None:
        self.args = args
        self.own_schedulers = frozenset(own_schedulers)
        self._all_victims = args.victim_scope == SCOPE_ALL
        self._rand = rand

    def may_evict(self, pod: PodInfo) -> bool:
        """The victim scope; priority is checked separately."""
        return self._all_victims or pod.scheduler_name in self.own_schedulers

    def node_refusal(self, victims: Sequence[PodInfo]) -> Status | None:
        """A hook: a Status when a node's victims are refused as a whole (a cap on their
        number), making the node no candidate. None here: nothing is refused."""
        return None

    def evaluate(
        self,
        preemptor: PodInfo,
        diagnosis: Mapping[str, Status],
        nodes: NodeLookup,
        nominator: NominatedPods,
        pdbs: Sequence[PDBInfo],
        fit: FitCheck,
        *,
        nominated_node: str = "",
        num_all_nodes: int | None = None,
        units: VictimSelector | None = None,
    ) -> Evaluation:
        """Decide a preemption for `preemptor`, which failed Filter with `diagnosis`
        (node name -> status, in Filter order) on the snapshot `nodes` of
        `num_all_nodes` nodes (default: len(diagnosis)). `units` (GenericWorkload)
        chooses each node's victims by units and gives a victim's priority; None: one
        pod is one victim, of its own priority."""
        if num_all_nodes is None:
            num_all_nodes = len(diagnosis)
        ok, why = eligible_to_preempt(
            preemptor,
            nominated_node,
            nodes,
            diagnosis,
            victim_priority=units.priority if units is not None else None,
        )
        if not ok:
            log.debug("preemption not eligible pod=%s reason=%s", preemptor.key, why)
            return Evaluation(Status.unschedulable(why))

        # upstream nodesWherePreemptionMightHelp: the nodes Filter found UNSCHEDULABLE
        # (this runs over every node of the cluster: comprehensions, no loop body)
        unschedulable = Code.UNSCHEDULABLE
        potential: list[NodeLike] = [
            node
            for node in map(
                nodes.get, [name for name, st in diagnosis.items() if st.code == unschedulable]
            )
            if node is not None
        ]
        if not potential:
            log.debug("preemption will not help on any node pod=%s", preemptor.key)
            return Evaluation(
                Status.unschedulable(_not_helpful(num_all_nodes, {})), clear_nomination=True
            )

        n = len(potential)
        offset = self._rand(n)
        wanted = calculate_num_candidates(
            n, self.args.min_candidate_nodes_percentage, self.args.min_candidate_nodes_absolute
        )
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        errors: list[Status] = []
        checked = 0
        success = Status.success()
        debug = log.isEnabledFor(logging.DEBUG)
        may_evict = self.may_evict
        select = units.select if units is not None else select_victims
        for i in range(n):
            node = potential[(offset + i) % n]
            name = node.name
            checked += 1
            try:
                victims, violations, status = select(preemptor, node, pdbs, fit, may_evict)
                refusal = self.node_refusal(victims) if status.ok else None
                if refusal is not None:  # an operator policy (preemption.policy_evaluator)
                    victims, violations, status = [], 0, refusal
            except DryRunError as exc:
                victims, violations, status = [], 0, Status(Code.ERROR, (str(exc),))
            except Exception as exc:  # a broken plugin on one node must not end the search
                log.exception("preemption dry run failed pod=%s node=%s", preemptor.key, name)
                status = Status.from_error(exc)
                victims, violations = [], 0
            if status.ok and not victims:
                status = Status.from_error(
                    RuntimeError(f"expected at least one victim pod on node {name!r}")
                )
            if not status.ok:
                statuses[name] = status
                if status.code == Code.ERROR:
                    errors.append(status)
                if debug:
                    log.debug(
                        "node is no preemption candidate pod=%s node=%s reason=%s",
                        preemptor.key,
                        name,
                        status.message(),
                    )
                continue
            statuses[name] = success
            if debug:  # read by the differential oracle (tests/differential/processes.py)
                log.debug(
                    "preemption candidate pod=%s node=%s victims=%s pdb_violations=%d",
                    preemptor.key,
                    name,
                    ",".join(v.key for v in victims),
                    violations,
                )
            cand = Candidate(name, tuple(victims), violations, by_units=units is not None)
            (violating if violations else non_violating).append(cand)
            if non_violating and len(non_violating) + len(violating) >= wanted:
                break

        candidates = tuple(non_violating + violating)
        if not candidates:
            if errors:
                return Evaluation(errors[0], node_statuses=statuses, nodes_checked=checked)
            return Evaluation(
                Status.unschedulable(_not_helpful(num_all_nodes, statuses)),
                clear_nomination=True,
                node_statuses=statuses,
                nodes_checked=checked,
            )
        best = pick_one_node(candidates)
        assert best is not None
        lower = tuple(
            p
            for p in nominator.nominated_pods_for_node(best.node)
            if p.priority < preemptor.priority and p.uid != preemptor.uid
        )
        decision = Decision(
            preemptor=preemptor,
            node=best.node,
            victims=best.victims,
            num_pdb_violations=best.num_pdb_violations,
            lower_priority_nominated=lower,
        )
        return Evaluation(
            Status.success(),
            decision=decision,
            candidates=candidates,
            node_statuses=statuses,
            nodes_checked=checked,
        )
