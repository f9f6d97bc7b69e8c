"""schedule_pod: one pod, one snapshot -> a node or a FitError (upstream schedulePod).

1. PreFilter (may reject the pod outright or narrow the candidate nodes).
2. If the pod carries a nominatedNodeName that still passes Filter, take it (when it
   does not, its rejecting plugin joins the "didn't satisfy plugin(s)" list, as upstream).
   Opportunistic batching's hint (batch.py: the previous cycle's next-best node, for a
   pod with the same signature) is tried the same way.
3. Filter: batch plugins over every candidate at once (NodeTable columns), then the
   nominated-pods rule on nodes holding nominations of priority >= the pod's, then
   per-node plugins on the still-feasible nodes in rotated order (the snapshot's node
   order, upstream's zone-interleaved node tree) until one feasible node more than
   needed is found (percentageOfNodesToScore; adaptive as upstream; 1 without score
   plugins): upstream's search run with one worker (find_nodes_that_fit). A rejected
   node's recorded Status is upstream's: that of the FIRST failing
   plugin in profile order (batch rejections are re-checked with the per-node plugins
   the profile places earlier; nodes with nominations are re-run whole).
4. PreScore / Score / NormalizeScore, weighted sum (every node 1 without score plugins);
   highest total wins, ties at random. At DEBUG, one "final score" line per node.

The search starts where the previous cycle stopped (`SearchState.next_start`, moved on
by the nodes processed, as upstream's nextStartNodeIndex), so nodes are considered
fairly. No API calls, no awaits.

Every Filter verdict here comes from the profile's FilterRunner
(framework/filter_runner.py), the rule preemption's dry runs and explain use too; this
module decides only which nodes to ask and in what order, and that a Filter ERROR stops
the search (upstream findNodesThatPassFilters cancels on the first error).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import cast

import numpy as np

from scheduler.algorithm.batch import OpportunisticBatch, ScoredNodes
from scheduler.cache.snapshot import Snapshot
from scheduler.framework import filter_runner
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis, FitError, ScheduleResult
from scheduler.framework.filter_runner import active, run_filter_plugins
from scheduler.framework.handle import NominatedPods
from scheduler.framework.interfaces import (
    BatchFilterPlugin,
    Int32Array,
    IntArray,
    declares,
)
from scheduler.framework.runtime import Framework
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status, go_list
from scheduler.model.pod import PodInfo

# At DEBUG, one line per decision for the differential oracle (tests/differential), which
# compares these against upstream's own high-verbosity score log.
log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


class SchedulingError(RuntimeError):
    """A plugin returned ERROR: an internal problem, not a fit verdict."""

    def __init__(self, status: Status, message: str | None = None) -> None:
        self.status = status
        super().__init__(message or f"{status.plugin}: {status.message()}")


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """upstream numFeasibleNodesToFind: all nodes below 100; else percentage (0 means
    adaptive: 50% - nodes/125, floor 5%) of the nodes, at least 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = 50 - num_all_nodes // 125
        if adaptive < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            adaptive = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * adaptive // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


def _nominated_slots(snapshot: Snapshot, pod: PodInfo, nominator: NominatedPods | None) -> set[int]:
    if nominator is None:
        return set()
    out: set[int] = set()
    for node, pods in nominator.nodes_with_nominations().items():
        slot = snapshot.slot_of(node)
        if slot is None:
            continue
        for p in pods.values():
            if p.uid != pod.uid and p.priority >= pod.priority:
                out.add(slot)
                break
    return out


def _filter_error(status: Status) -> SchedulingError:
    """A Filter ERROR ends the cycle; its message is the runner's, already in upstream's
    words (`running "<plugin>" filter plugin: ...`)."""
    return SchedulingError(status, status.message())


def _record_batch_rejections(
    framework: Framework,
    state: CycleState,
    pod: PodInfo,
    snapshot: Snapshot,
    nominator: NominatedPods | None,
    nominated: set[int],
    diagnosis: Diagnosis,
    groups: list[tuple[int, IntArray, Int32Array | None, list[Status]]],
) -> None:
    """Record batch rejections under the reason upstream would give: the FIRST failing
    plugin in profile order (upstream RunFilterPlugins stops there). Batch plugins run
    before the per-node ones, so a node a batch plugin rejected is re-checked with the
    per-node plugins that come earlier in the profile (only those; cheap, and none at
    all for most pods since e.g. NodePorts is skipped without host ports). A node holding
    nominations of priority >= the pod's is re-run whole, with the nominated pods added
    (upstream RunFilterPluginsWithNominatedPods), for the same reason."""
    for position, slots, reasons, statuses in groups:
        overrides: dict[int, Status] = {}
        # the per-node plugins the profile places before the rejecting batch plugin
        earlier = [
            p
            for p in active(framework.filter_runner.plugins[:position], state)
            if not declares(p, BatchFilterPlugin)
        ]
        if earlier:
            to_check = slots
        elif nominated:
            to_check = slots[np.isin(slots, np.fromiter(nominated, dtype=np.int64))]
        else:
            to_check = slots[:0]
        views = snapshot.views
        for slot in to_check.tolist():
            view = views[slot]
            assert view is not None
            if slot in nominated:
                st = framework.run_filter_with_nominated_pods(state, pod, view, nominator)
            else:
                st = run_filter_plugins(earlier, state, pod, view)
            if st.code == Code.ERROR:
                raise _filter_error(st)
            if st.code != Code.SUCCESS:
                overrides[slot] = st
        if overrides:
            keep = ~np.isin(slots, np.fromiter(overrides, dtype=np.int64, count=len(overrides)))
            slots = slots[keep]
            reasons = reasons[keep] if reasons is not None else None
            for slot, st in overrides.items():
                diagnosis.add(slot, st)
        diagnosis.add_batch(slots, reasons, statuses)


def _rotated(candidates: IntArray, start: int) -> IntArray:
    return np.concatenate((candidates[start:], candidates[:start])) if start else candidates


def find_nodes_that_fit(
    framework: Framework,
    state: CycleState,
    pod: PodInfo,
    snapshot: Snapshot,
    nominator: NominatedPods | None,
    search: SearchState,
    diagnosis: Diagnosis,
    candidates: IntArray,
    counted_before: int | None = None,
) -> tuple[IntArray, int]:
    """Feasible slots (at most num_feasible_nodes_to_find, in search order) and how
    many nodes were processed; moves the search's start index on, also when a Filter
    plugin errs (then SchedulingError is raised after).

    As upstream findNodesThatPassFilters (v1.37.2 pkg/scheduler/schedule_one.go) run
    with one worker, the one outcome of its parallel search that does not depend on
    goroutine timing: node i of the walk is candidates[(nextStartNodeIndex + i) % n];
    the walk stops at the first node whose Filter errs, or at the feasible node one
    past the number to find (that one is neither kept nor counted). The nodes before
    the stop are processed: the feasible ones kept, the rejected ones recorded in
    `diagnosis`, each under the first failing plugin in profile order; nodes past the
    stop are neither. The start index then moves by the feasible nodes plus the
    recorded statuses (findNodesThatFitPod's processedNodes, modulo the number of all
    nodes, not of the candidates): `counted_before` is the slot of a nominated (or
    hinted) node whose status evaluateNominatedNode already recorded, counted once
    more unless the walk recorded it again.

    Batch plugins still filter every candidate at once; only what they found is
    recorded up to the stop."""
    n = len(candidates)
    if n == 0:
        return candidates, 0
    start = search.next_start % n
    order = _rotated(candidates, start)
    pos = np.arange(n, dtype=np.int64)
    to_find = num_feasible_nodes_to_find(framework.percentage_of_nodes_to_score, n)
    if not framework.score_plugins:
        to_find = 1  # upstream: without scoring, the first feasible node is the answer
    runner = framework.filter_runner
    position = {p.name: i for i, p in enumerate(runner.plugins)}
    nominated = _nominated_slots(snapshot, pod, nominator)

    # a batch plugin's ERROR on a node stops the walk there (the earliest such node)
    limit = n
    batch_error: Status | None = None
    alive = order
    groups: list[tuple[int, IntArray, IntArray, Int32Array | None, list[Status]]] = []
    for p in active(runner.batch_plugins, state):
        if len(alive) == 0:
            continue
        res = p.filter_batch(state, pod, snapshot, alive)
        passed = res.passed
        if not passed.all():
            rejected = ~passed
            reasons = res.reasons[rejected] if res.reasons is not None else None
            # a batch plugin's statuses are the node's as the runner words them
            statuses = [filter_runner.decided_by(s, p.name) for s in res.statuses]
            errs = [i for i, s in enumerate(statuses) if s.code == Code.ERROR]
            if errs:
                at = pos[rejected]
                if reasons is not None:
                    at = at[np.isin(reasons, errs)]
                if len(at) and int(at.min()) < limit:
                    limit = int(at.min())
                    first = int(np.flatnonzero(pos[rejected] == limit)[0])
                    batch_error = statuses[0 if reasons is None else int(reasons[first])]
            groups.append((position[p.name], alive[rejected], pos[rejected], reasons, statuses))
            alive = alive[passed]
            pos = pos[passed]

    # nominated-pods rule on the (few) nodes holding relevant nominations
    late: list[tuple[int, int, Status]] = []  # (slot, position, status)
    if nominated and len(alive):
        keep = np.ones(len(alive), dtype=np.bool_)
        for i in np.flatnonzero(np.isin(alive, list(nominated))).tolist():
            slot = int(alive[i])
            view = snapshot.view(slot)
            added, s2, v2, st = runner.add_nominated_pods(state, pod, view, nominator)
            if st.ok and not added:
                continue
            if st.ok:
                st = runner.run(s2, pod, v2)
            if st.code == Code.ERROR:
                if int(pos[i]) < limit:
                    limit, batch_error = int(pos[i]), st
            elif not st.ok:
                late.append((slot, int(pos[i]), st))
            if not st.ok:
                keep[i] = False
        if not keep.all():
            alive = alive[keep]
            pos = pos[keep]

    node_plugins = active(runner.node_plugins, state)
    error: Status | None = None
    stop = n
    if not node_plugins:
        feasible = alive[pos < limit][:to_find]
        if len(alive) > to_find and int(pos[to_find]) < limit:
            stop = int(pos[to_find])
        elif limit < n:
            stop, error = limit, batch_error
    else:
        found: list[int] = []
        views = snapshot.views
        positions = pos.tolist()
        for i, slot in enumerate(alive.tolist()):
            if positions[i] >= limit:
                break
            view = views[slot]
            assert view is not None
            st = run_filter_plugins(node_plugins, state, pod, view)
            if st.ok:
                if len(found) == to_find:
                    stop = positions[i]
                    break
                found.append(slot)
            elif st.code == Code.ERROR:
                stop, error = positions[i], st
                break
            else:
                late.append((slot, positions[i], st))
        if stop == n and limit < n and error is None:
            stop, error = limit, batch_error
        feasible = np.asarray(found, dtype=np.int64)

    processed = stop
    if counted_before is not None and counted_before not in set(order[:stop].tolist()):
        processed += 1
    if log.isEnabledFor(logging.DEBUG):
        # the oracle compares `processed` with what upstream's next search start shows
        log.debug(
            "searched nodes pod=%s start=%d processed=%d feasible=%d",
            pod.key,
            start,
            processed,
            len(feasible),
        )
    search.next_start = (search.next_start + processed) % max(snapshot.num_nodes, 1)
    if error is not None:
        raise _filter_error(error)

    _record_batch_rejections(
        framework,
        state,
        pod,
        snapshot,
        nominator,
        nominated,
        diagnosis,
        [
            (at, slots[ps < stop], r[ps < stop] if r is not None else None, sts)
            for at, slots, ps, r, sts in groups
        ],
    )
    for slot, p_at, st in late:
        if p_at < stop:
            diagnosis.add(slot, st)
    return feasible, processed


def schedule_pod(
    framework: Framework,
    state: CycleState,
    pod: PodInfo,
    snapshot: Snapshot,
    nominator: NominatedPods | None = None,
    *,
    search: SearchState | None = None,
    batch: OpportunisticBatch | None = None,
) -> ScheduleResult | FitError:
    """Pick a node for `pod`. Returns ScheduleResult or FitError (no node fits);
    raises SchedulingError when a plugin reports an internal error. With `batch` (the
    loop's cycles; never a dry run, which must leave it untouched) the profile's
    opportunistic batching is used and fed (batch.py)."""
    if search is None:
        search = framework.search
    signature = framework.sign_pod(pod) if batch is not None else None
    diagnosis = Diagnosis(snapshot)
    num_all = snapshot.num_nodes
    if num_all == 0:
        return FitError(pod, 0, diagnosis)

    pre_result, st = framework.run_pre_filter(state, pod, snapshot)
    if st.code == Code.ERROR:
        # the runtime's words are upstream's ('running PreFilter plugin "X": ...')
        raise SchedulingError(st, st.message())
    if pre_result is not None:
        # upstream: the plugins that narrowed the nodes count as rejectors either way
        diagnosis.unschedulable_plugins.update(pre_result.plugins)
    if not st.ok:
        diagnosis.pre_filter_msg = st.message()
        diagnosis.set_all(st)
        return FitError(pod, num_all, diagnosis)

    hint = ""
    if batch is not None:
        hint = batch.get_node_hint(pod, signature, state, snapshot, search.cycle, search.rng)

    # a pod nominated by an earlier preemption tries its node first (upstream
    # evaluateNominatedNode: whatever PreFilter narrowed to; an error there is ignored);
    # so does batching's hint (never given to a nominated pod)
    nominated_node = pod.nominated_node_name or hint
    nominated_status: tuple[int, Status] | None = None
    absent_plugins = set(pre_result.plugins) if pre_result is not None else set()
    if nominated_node:
        view = snapshot.get(nominated_node)
        slot = snapshot.slot_of(nominated_node)
        if view is not None and slot is not None:
            nst = framework.run_filter_with_nominated_pods(state, pod, view, nominator)
            if nst.ok:
                # upstream: the nominated node alone is the feasible set, so no scoring
                # (and the node search does not move on)
                _log_single_feasible(pod, nominated_node)
                if batch is not None:
                    batch.store_schedule_results(
                        signature, hint, nominated_node, None, search.cycle
                    )
                return ScheduleResult(nominated_node, 1, 1)
            if nst.code != Code.ERROR:
                nominated_status = (slot, nst)
                if nst.plugin:
                    # upstream adds it to the very set the absent-nodes message lists
                    absent_plugins.add(nst.plugin)

    candidates = snapshot.node_order()  # upstream's nodeInfoList: the node tree's order
    if pre_result is not None and pre_result.node_names is not None:
        allowed = [
            s for s in (snapshot.slot_of(nm) for nm in pre_result.node_names) if s is not None
        ]
        cand = np.asarray(sorted(allowed), dtype=np.int64)
        outside = np.setdiff1d(candidates, cand, assume_unique=True)
        if len(outside):
            # upstream's absent-nodes status: no plugin of its own, the names as Go's %v
            plugins = go_list(sorted(absent_plugins))
            diagnosis.add_batch(
                outside, None, [Status.unresolvable(f"node(s) didn't satisfy plugin(s) {plugins}")]
            )
        candidates = cand
    if nominated_status is not None and nominated_status[0] not in set(candidates.tolist()):
        # the main pass does not visit it: its status from the first try stands
        diagnosis.add(*nominated_status)
    elif nominated_status is not None and nominated_status[1].plugin:
        diagnosis.unschedulable_plugins.add(nominated_status[1].plugin)

    feasible, evaluated = find_nodes_that_fit(
        framework,
        state,
        pod,
        snapshot,
        nominator,
        search,
        diagnosis,
        candidates,
        nominated_status[0] if nominated_status is not None else None,
    )
    if len(feasible) == 0:
        return FitError(pod, num_all, diagnosis)
    if len(feasible) == 1:
        only = snapshot.view(int(feasible[0])).name
        _log_single_feasible(pod, only)
        if batch is not None:
            batch.store_schedule_results(signature, hint, only, None, search.cycle)
        return ScheduleResult(only, evaluated, 1)

    per_plugin: dict[str, IntArray] = {}
    raw: dict[str, IntArray] = {}
    if not framework.score_plugins:
        # upstream prioritizeNodes: without score plugins every node scores 1
        total = np.ones(len(feasible), dtype=np.int64)
    else:
        st = framework.run_pre_score(state, pod, snapshot, feasible)
        if not st.ok:
            # worded as upstream's RunPreScorePlugins: the pod's event and condition carry it
            raise SchedulingError(st, st.message())
        total, per_plugin, raw, st = framework.run_score_keeping_raw(state, pod, snapshot, feasible)
        if not st.ok:
            # worded as RunScorePlugins / normalizeScores
            raise SchedulingError(st, st.message())
    if log.isEnabledFor(logging.DEBUG):
        _log_final_scores(pod, snapshot, feasible, total, per_plugin, framework.weights)
    best = np.flatnonzero(total == total.max())
    pick = int(best[search.rng.randrange(len(best))]) if len(best) > 1 else int(best[0])
    chosen = snapshot.view(int(feasible[pick])).name
    if batch is not None:
        others = (
            _other_candidates(snapshot, feasible, pick, raw, total, search)
            if signature is not None
            else None
        )
        # an unsigned pod's list is never built: only its length matters (the reason)
        batch.store_schedule_results(
            signature, hint, chosen, others, search.cycle, num_others=len(feasible) - 1
        )
    return ScheduleResult(chosen, evaluated, len(feasible))


def _other_candidates(
    snapshot: Snapshot,
    feasible: IntArray,
    pick: int,
    raw: Mapping[str, IntArray],
    total: IntArray,
    search: SearchState,
) -> ScoredNodes:
    """The feasible nodes but the chosen one, for batching (upstream keeps the sorted
    list after popping the best). Ties among them are broken in a random order, as the
    pick itself is."""
    keep = np.ones(len(feasible), dtype=np.bool_)
    keep[pick] = False
    slots = feasible[keep]
    # the table's slot -> name list, read in C (this runs over every feasible node)
    table_names = snapshot.table.names
    names = [cast(str, table_names[s]) for s in slots.tolist()]
    tie = np.random.default_rng(search.rng.getrandbits(64)).random(len(slots))
    return ScoredNodes(
        names,
        slots,
        snapshot.live_slots(),
        {k: v[keep] for k, v in raw.items()},
        total[keep],
        tie,
    )


def _log_single_feasible(pod: PodInfo, node: str) -> None:
    if log.isEnabledFor(logging.DEBUG):
        log.debug("single feasible node pod=%s node=%s", pod.key, node)


def _log_final_scores(
    pod: PodInfo,
    snapshot: Snapshot,
    feasible: IntArray,
    total: IntArray,
    per_plugin: dict[str, IntArray],
    weights: Mapping[str, int],
) -> None:
    # per plugin the weighted score, as upstream's "Plugin scored node for pod" line
    names = [snapshot.view(slot).name for slot in feasible.tolist()]
    for plugin, scores in per_plugin.items():
        weight = weights.get(plugin, 1)
        for node, score in zip(names, scores.tolist(), strict=True):
            log.debug(
                "plugin score pod=%s plugin=%s node=%s score=%d",
                pod.key,
                plugin,
                node,
                score * weight,
            )
    for node, score in zip(names, total.tolist(), strict=True):
        log.debug("final score pod=%s node=%s score=%d", pod.key, node, score)
