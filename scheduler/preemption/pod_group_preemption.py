"""Pod-group preemption's decision (DefaultPreemption's PodGroupPostFilter), as
k8s.io/kubernetes v1.37.2 pkg/scheduler/framework/preemption/podgrouppreemption.go,
types.go and util.go decide it. Pure: it reads and simulates on the cycle's snapshot
(every change undone by the caller's Snapshot.restore_mutations) and returns what to do;
the executor (pod_group_executor.py) does it.

For a group that did not fit, over the whole cluster (upstream's "cluster" domain):
1. a group whose members' policy is Never preempts nothing;
2. a preemption already in flight (a lower-priority pod terminating by preemption on a
   node a member is nominated to) starts no new one: the members keep their nominations;
3. victim units: every pod on a node is one, except the members of a PodGroup whose
   disruption mode is `all`, which are one unit together (all its scheduled members,
   wherever they run); a unit's priority is its PodGroup's when the pod has one;
4. units below the group's priority are the potential victims (none: nothing to do);
5. all of them leave the snapshot and the group algorithm runs again; if the group still
   does not fit, that is the answer;
6. else every unit, most important first (priority, then groups over pods, then more
   pods, then earliest start; Go's sort.Slice, go_sort.py), PDB-violating ones first, is
   tried back: its pods return (PreFilter AddPod for every placed member), and if every
   member still passes Filter on its node (members placed so far counted, Reserve run)
   the unit is spared, else it is removed again and stays a victim. A unit that cannot
   change any member's verdict is spared without the check (see `reprieve`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from scheduler.cache.gang_state import GangState
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import (
    CONDITION_DISRUPTION_TARGET,
    REASON_PREEMPTION_BY_SCHEDULER,
    PodInfo,
)
from scheduler.model.pod_group import PodGroupInfo
from scheduler.preemption import go_sort

__all__ = [
    "Assignment",
    "GroupPreemption",
    "VictimUnit",
    "more_important",
    "preempt_for_group",
    "split_units_by_pdb",
    "units_of",
    "victim_units",
]

NOT_ELIGIBLE = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"

POD = 1
POD_GROUP = 2


@dataclass(frozen=True, slots=True)
class VictimUnit:
    pods: tuple[PodInfo, ...]
    priority: int
    kind: int  # POD_GROUP (a pod with a schedulingGroup, or an all-members group) or POD
    earliest_start: float | None


@dataclass(slots=True)
class Assignment:
    """A member placed by the algorithm's run without the victims: its node and the cycle
    state it was scheduled with (the members before it assumed)."""

    pod: PodInfo
    node: str
    state: CycleState


@dataclass
class GroupPreemption:
    code: Code
    message: str = ""
    victims: list[PodInfo] = field(default_factory=list)  # most important first
    nominations: dict[str, str] = field(default_factory=dict)  # member uid -> node
    num_pdb_violations: int = 0
    num_group_disruptions: int = 0


def more_important(a: VictimUnit, b: VictimUnit) -> bool:
    """util.go MoreImportantVictim. A missing start time is never earlier (Go's
    (*metav1.Time).Before on nil)."""
    if a.priority != b.priority:
        return a.priority > b.priority
    if a.kind != b.kind:
        return a.kind > b.kind
    if len(a.pods) != len(b.pods):
        return len(a.pods) > len(b.pods)
    if a.earliest_start is None or b.earliest_start is None:
        return False
    return a.earliest_start < b.earliest_start


def _earliest(pods: Sequence[PodInfo]) -> float | None:
    out: float | None = None
    for p in pods:
        if p.start_time is not None and (out is None or p.start_time < out):
            out = p.start_time
    return out


def group_priority(pod: PodInfo, gang_lookup: Callable[[str, str], GangState | None]) -> int:
    """util.go GetPodPriority: the pod's PodGroup's priority when it has one."""
    if pod.pod_group:
        gang = gang_lookup(pod.namespace, pod.pod_group)
        if gang is not None and gang.pod_group is not None:
            return gang.pod_group.priority
    return pod.priority


def victim_units(
    snapshot: Snapshot, gang_lookup: Callable[[str, str], GangState | None]
) -> list[VictimUnit]:
    """types.go getCrossNodesVictims: nodes in the snapshot's order, each node's pods in
    its order; an all-members group is one unit of its scheduled members."""
    seen: set[str] = set()
    units: list[VictimUnit] = []
    for slot in snapshot.node_order():
        view = snapshot.views[int(slot)]
        if view is None or view.node is None:
            continue
        units.extend(units_of(view.pods.values(), gang_lookup, seen))
    return units


def units_of(
    pods: Iterable[PodInfo],
    gang_lookup: Callable[[str, str], GangState | None],
    seen: set[str] | None = None,
) -> list[VictimUnit]:
    """The victim units of `pods` (one node's, in its order), as types.go
    getCrossNodesVictims makes them: a member of a PodGroup whose disruption mode is `all`
    stands for all the group's scheduled members wherever they run (searchCrossNodesVictimPods,
    the pod alone when the group has none), every other pod for itself (NewPodVictim). The
    priority is the PodGroup's when the pod has one (GetPodPriority). `seen` (unit keys)
    is shared across calls so that a group spanning nodes is listed once."""
    if seen is None:
        seen = set()
    units: list[VictimUnit] = []
    for pod in pods:
        gang = gang_lookup(pod.namespace, pod.pod_group) if pod.pod_group else None
        group: PodGroupInfo | None = gang.pod_group if gang is not None else None
        if gang is not None and group is not None and group.disruption_mode == "all":
            key = f"group/{pod.namespace}/{pod.pod_group}"
            if key in seen:
                continue
            seen.add(key)
            members = tuple(gang.scheduled_pods()) or (pod,)
            units.append(VictimUnit(members, group.priority, POD_GROUP, _earliest(members)))
            continue
        key = f"pod/{pod.namespace}/{pod.name}"
        if key in seen:
            continue
        seen.add(key)
        kind = POD_GROUP if pod.pod_group else POD
        priority = group.priority if group is not None else pod.priority
        units.append(VictimUnit((pod,), priority, kind, _earliest((pod,))))
    return units


def _by_node(units: Iterable[VictimUnit]) -> dict[str, list[PodInfo]]:
    out: dict[str, list[PodInfo]] = {}
    for unit in units:
        for pod in unit.pods:
            out.setdefault(pod.node_name, []).append(pod)
    return out


def _terminating_by_preemption(pod: PodInfo) -> bool:
    if pod.deletion_timestamp is None:
        return False
    for c in pod.conditions:
        if c.type == CONDITION_DISRUPTION_TARGET:
            return c.status == "True" and c.reason == REASON_PREEMPTION_BY_SCHEDULER
    return False


def split_units_by_pdb(
    units: Sequence[VictimUnit], pdbs: Sequence[PDBInfo]
) -> tuple[list[tuple[VictimUnit, int]], list[VictimUnit]]:
    """util.go FilterVictimsWithPDBViolation over units: (violating with how many of
    their pods violate, non-violating), each in the given order."""
    allowed = [pdb.disruptions_allowed for pdb in pdbs]

    def violates(pod: PodInfo) -> bool:
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            if not pdb.matches(pod) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating: list[tuple[VictimUnit, int]] = []
    rest: list[VictimUnit] = []
    for unit in units:
        n = sum(1 for p in unit.pods if violates(p))
        if n:
            violating.append((unit, n))
        else:
            rest.append(unit)
    return violating, rest


class Simulation:
    """What the decision needs of the cycle, as callables: the algorithm run again on
    the snapshot (its assignments and verdict), the profile's PreFilter extensions and
    Filter with nominated pods, and Reserve/Unreserve. `extended(state)`: a PreFilter
    extension is active in that member's cycle state, so a pod added or removed on any
    node may change the member's Filter verdict."""

    def __init__(
        self,
        *,
        run_algorithm: Callable[[], tuple[list[Assignment], Code, str]],
        add_pod: Callable[[CycleState, PodInfo, PodInfo, str], bool],
        remove_pod: Callable[[CycleState, PodInfo, PodInfo, str], bool],
        passes_filter: Callable[[CycleState, PodInfo, str], bool],
        reserve: Callable[[CycleState, PodInfo, str], None],
        unreserve: Callable[[CycleState, PodInfo, str], None],
        extended: Callable[[CycleState], bool] = lambda state: True,
    ) -> None:
        self.run_algorithm = run_algorithm
        self.extended = extended
        self.add_pod = add_pod
        self.remove_pod = remove_pod
        self.passes_filter = passes_filter
        self.reserve = reserve
        self.unreserve = unreserve


def preempt_for_group(
    members: Sequence[PodInfo],
    priority: int,
    never: bool,
    snapshot: Snapshot,
    gang_lookup: Callable[[str, str], GangState | None],
    pdbs: Sequence[PDBInfo],
    sim: Simulation,
    may_evict: Callable[[PodInfo], bool] = lambda pod: True,
) -> GroupPreemption:
    """`may_evict`: this scheduler's victim scope and PreemptionPolicy rules (beyond
    upstream, docs/preemption.md); a unit is a potential victim only if all its pods
    may be evicted (an all-members group is taken whole or not at all)."""
    if never:
        return GroupPreemption(Code.UNSCHEDULABLE, NOT_ELIGIBLE)
    # the in-flight rule (podgrouppreemption.go isOngoingPreemption)
    nominated = {m.nominated_node_name for m in members if m.nominated_node_name}
    for node in sorted(nominated):
        view = snapshot.get(node)
        if view is None:
            continue
        for p in view.pods.values():
            if group_priority(p, gang_lookup) < priority and _terminating_by_preemption(p):
                return GroupPreemption(
                    Code.SUCCESS,
                    ONGOING,
                    nominations={m.uid: m.nominated_node_name for m in members},
                )
    potential = [
        u
        for u in victim_units(snapshot, gang_lookup)
        if u.priority < priority and all(may_evict(p) for p in u.pods)
    ]
    if not potential:
        return GroupPreemption(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)
    for node, pods in _by_node(potential).items():
        snapshot.remove_pods(pods, node)
    assignments, code, message = sim.run_algorithm()
    if code != Code.SUCCESS:
        return GroupPreemption(code, message)
    go_sort.sort_slice(potential, more_important)
    violating, rest = split_units_by_pdb(potential, pdbs)
    placed = [a for a in assignments if a.node]
    # each placed member as the snapshot counts it (node_name set), built once: a
    # reprieve adds every member back for each unit tried, and a PodInfo copy per add
    # was most of the decision's time with thousands of units
    on_node = [dataclasses.replace(a.pod, node_name=a.node) for a in placed]
    # A unit none of whose pods is on a member's node, while no member's cycle state has
    # an active PreFilter extension, cannot change any member's Filter verdict (a
    # member's Filter reads only its own node and its own cycle state), and no other
    # unit's reprieve can change whether it is spared. Every reprieve starts from a
    # state in which all members pass (the algorithm's run, then each reprieve kept or
    # undone), so upstream's check spares each such unit whenever it is tried: they go
    # back at once, one write per node, and only the others are tried in order. With
    # 50000 one-pod units and a handful of members' nodes this is nearly every unit.
    member_nodes = {a.node for a in placed}
    spared: set[int] = set()
    if not any(sim.extended(a.state) for a in placed):
        detached = [u for u in potential if all(p.node_name not in member_nodes for p in u.pods)]
        spared = {id(u) for u in detached}
        for node, pods in _by_node(detached).items():
            snapshot.add_pods(pods, node)

    def reprieve(unit: VictimUnit) -> bool:
        for pod in unit.pods:
            snapshot.add_pod(pod, pod.node_name)
            for a in placed:
                sim.add_pod(a.state, a.pod, pod, pod.node_name)
        reserved: list[Assignment] = []
        fits = True
        for a, counted in zip(placed, on_node, strict=True):
            if not sim.passes_filter(a.state, a.pod, a.node):
                fits = False
                break
            snapshot.add_pod(counted, a.node)
            sim.reserve(a.state, a.pod, a.node)
            reserved.append(a)
        for a in reversed(reserved):
            sim.unreserve(a.state, a.pod, a.node)
            snapshot.remove_pod(a.pod, a.node)
        if not fits:
            for pod in unit.pods:
                snapshot.remove_pod(pod, pod.node_name)
                for a in placed:
                    sim.remove_pod(a.state, a.pod, pod, pod.node_name)
        return fits

    chosen: list[VictimUnit] = []
    violations = 0
    for unit, n in violating:
        if id(unit) not in spared and not reprieve(unit):
            chosen.append(unit)
            violations += n
    for unit in rest:
        if id(unit) not in spared and not reprieve(unit):
            chosen.append(unit)
    go_sort.sort_slice(chosen, more_important)
    victims = [p for u in chosen for p in u.pods]
    return GroupPreemption(
        Code.SUCCESS,
        f"found a placement for podgroup, preempting {len(victims)} victims",
        victims=victims,
        nominations={a.pod.uid: a.node for a in placed},
        num_pdb_violations=violations,
        num_group_disruptions=sum(1 for u in chosen if u.kind == POD_GROUP),
    )
