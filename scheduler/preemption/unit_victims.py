"""Single-pod preemption's victims as units (GenericWorkload), as k8s.io/kubernetes
v1.37.2 pkg/scheduler chooses them with the gate on:

- framework/preemption/preemption.go GetVictimsOnNode: the node's pods become victims
  through getCrossNodesVictims (types.go), so a pod of a PodGroup whose disruption mode
  is `all` stands for every scheduled member of its group, on any node
  (searchCrossNodesVictimPods), and every other pod for itself (NewPodVictim); a pod
  with a PodGroup has the group's priority (GetPodPriority) and ranks as a group;
- plugins/defaultpreemption/default_preemption.go SelectVictimsOnNode: a unit is a
  potential victim when its priority is below the preemptor's own and it is eligible on
  every node it touches (isPreemptionAllowedAcrossAllVictimNodes); all of them leave,
  the preemptor must then pass Filter; then each unit, most important first
  (util.go MoreImportantVictim, Go's sort.Slice), PDB-violating units first
  (FilterVictimsWithPDBViolation: a unit violates when any of its pods does, counting
  each such pod), is put back whole and kept if the preemptor still passes, else it is
  a victim with all its pods. Only the candidate node's copy changes: a member on
  another node is only told to the PreFilter extensions, with that node's unchanged
  view (RunPreFilterExtensionRemovePod/AddPod), as upstream does.

Beyond upstream: `may_evict` (the victim scope and the PreemptionPolicy rules,
docs/preemption.md) must allow every pod of a unit.

The units, their PDB split and their kinds are pod-group preemption's
(pod_group_preemption.py); only the order's start-time tie differs from its
`more_important` (see _unit_ranks). Pure: the node and the snapshot are only read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scheduler.cache.gang_state import GangState
from scheduler.framework.status import Code, Status
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PodInfo
from scheduler.preemption.evaluator import (
    MSG_NO_VICTIMS,
    DryRun,
    DryRunError,
    FitCheck,
    NodeLike,
    NodeLookup,
)
from scheduler.preemption.go_sort import sort_slice
from scheduler.preemption.pod_group_preemption import (
    VictimUnit,
    group_priority,
    split_units_by_pdb,
    units_of,
)

__all__ = ["GroupAwareVictims"]

GangLookup = Callable[[str, str], GangState | None]


def _unit_ranks(units: Sequence[VictimUnit]) -> dict[int, tuple[int, int, int, float, int]]:
    """id(unit) -> a key whose `<` is util.go MoreImportantVictim: higher priority, then
    groups before pods, then more pods, then the earlier start. A unit none of whose pods
    has a start time started when NewVictim listed it (GetPodStartTime's time.Now()):
    after every unit with a start time and after such units listed before it, as the
    single-pod path's evaluator._importance has it. `units` in listing order."""
    ranks: dict[int, tuple[int, int, int, float, int]] = {}
    for seq, u in enumerate(units, 1):
        start, tie = (u.earliest_start, 0) if u.earliest_start is not None else (math.inf, seq)
        ranks[id(u)] = (-u.priority, -u.kind, -len(u.pods), start, tie)
    return ranks


class GroupAwareVictims:
    """The evaluator's VictimSelector with the GenericWorkload gate on, for one
    evaluation: `gang_lookup` is the cache's PodGroup states, `nodes` the cycle's
    snapshot (the views of a unit's other nodes)."""

    def __init__(self, gang_lookup: GangLookup, nodes: NodeLookup) -> None:
        self.gang_lookup = gang_lookup
        self.nodes = nodes

    def priority(self, pod: PodInfo, /) -> int:
        return group_priority(pod, self.gang_lookup)

    def select(
        self,
        preemptor: PodInfo,
        node: NodeLike,
        pdbs: Sequence[PDBInfo],
        fit: FitCheck,
        may_evict: Callable[[PodInfo], bool],
        /,
    ) -> tuple[list[PodInfo], int, Status]:
        """(victims most important first, every pod of each chosen unit; PDB-violating
        pods; status), as evaluator.select_victims."""
        priority = preemptor.priority
        potential = [
            u
            for u in units_of(node.pods.values(), self.gang_lookup)
            if u.priority < priority and all(may_evict(p) for p in u.pods)
        ]
        if not potential:
            return [], 0, Status.unresolvable(MSG_NO_VICTIMS)
        run = fit(preemptor, node)
        here = node.name
        for unit in potential:
            self._change(run, unit, here, remove=True)
        status = run.filter()
        if not status.ok:
            return [], 0, status
        ranks = _unit_ranks(potential)

        def more_important(a: VictimUnit, b: VictimUnit) -> bool:
            return ranks[id(a)] < ranks[id(b)]

        sort_slice(potential, more_important)
        violating, rest = (
            split_units_by_pdb(potential, pdbs) if pdbs else ([], list(potential))
        )
        chosen: list[VictimUnit] = []
        violations = 0
        for unit, n in [*violating, *((u, 0) for u in rest)]:
            self._change(run, unit, here, remove=False)
            if run.still_fits():
                continue
            self._change(run, unit, here, remove=True)
            chosen.append(unit)
            violations += n
        if violating and rest:
            sort_slice(chosen, more_important)
        return [p for u in chosen for p in u.pods], violations, Status.success()

    def _change(self, run: DryRun, unit: VictimUnit, here: str, *, remove: bool) -> None:
        """Take `unit` out of the dry run (or put it back): its pods on the candidate
        node leave the copy; the others are told to the PreFilter extensions only."""
        for pod in unit.pods:
            if pod.node_name == here:
                st = run.remove_pod(pod) if remove else run.add_pod(pod)
            else:
                view = self.nodes.get(pod.node_name)
                if view is None:
                    # upstream newDomainVictim: the snapshot must hold every node of a unit
                    raise DryRunError(
                        Status(
                            Code.ERROR,
                            (
                                f"failed to get node info for node {pod.node_name!r} "
                                "from snapshot",
                            ),
                        )
                    )
                st = (
                    run.remove_remote_pod(pod, view) if remove else run.add_remote_pod(pod, view)
                )
            if st.code != Code.SUCCESS:
                raise DryRunError(st)
