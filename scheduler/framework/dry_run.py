"""NodeDryRun: a private copy of one node for preemption's "what if" questions.

    plan = DryRunPlan(runner, state, pod, nominator)      # once per PostFilter
    run = plan.open(snapshot.get("n1"))                   # once per sampled node
    run.remove_pods(lower_priority_pods)                  # or remove_pod one by one
    if run.filter().ok:                                   # the full Filter
        run.add_pod(victim)                               # reprieve ...
        if not run.still_fits(): ...                      # ... and re-check

`runner` is the profile's FilterRunner (framework/filter_runner.py, the one Filter rule;
plugins reach it as `handle.filter_runner`). remove/add keep the PreFilter extensions
(inter-pod affinity, topology spread counts) in step; filter() and still_fits() apply the
nominated-pods rule (upstream RunFilterPluginsWithNominatedPods), both through the
runner. The caller must have run PreFilter on `state`.

Why a plan: a preemption dry-runs up to hundreds of nodes (10% of a large cluster), each
with a handful of remove/add/filter steps. What does not change between them is worked
out once: the Filter plugins not skipped this cycle, the subset still_fits() re-runs,
the PreFilter extensions that are active, and the nodes holding nominations that count.

still_fits() is upstream's reprieve test (SelectVictimsOnNode in
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go, v1.37.2: after
adding a victim back it re-runs RunFilterPluginsWithNominatedPods and reads only
status.IsSuccess()). Only SUCCESS matters there, and once the full Filter has passed on
this copy, a plugin declaring NodePodsIndependentFilter (its verdict never depends on the
pods on the node) passes again on any later state of the copy: only the other Filter
plugins are re-run. A plugin that does not declare the marker is always re-run.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.cache.node_view import NodeView
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.filter_runner import FilterRunner, active, passes, run_filter_plugins
from scheduler.framework.handle import NominatedPods
from scheduler.framework.interfaces import FilterPlugin, PreFilterExtensions
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo

__all__ = ["DryRunPlan", "NodeDryRun"]

_SUCCESS = Status.success()
_OK = Code.SUCCESS


class DryRunPlan:
    """What every dry run of `pod` in this cycle shares (see the module docstring)."""

    __slots__ = (
        "extensions",
        "filters",
        "nominated_nodes",
        "nominator",
        "pod",
        "recheck",
        "runner",
        "state",
    )

    def __init__(
        self,
        runner: FilterRunner,
        state: CycleState,
        pod: PodInfo,
        nominator: NominatedPods | None = None,
    ) -> None:
        self.runner = runner
        self.state = state
        self.pod = pod
        self.nominator = nominator
        # PreFilter's SKIP is final for the cycle (nothing later adds to skip_filter)
        self.filters: Sequence[FilterPlugin] = active(runner.plugins, state)
        self.recheck: Sequence[FilterPlugin] = active(runner.node_pods_dependent, state)
        self.extensions: Sequence[PreFilterExtensions] = active(runner.extensions, state)
        # The nodes holding pods nominated at priority >= the pod's (not the pod
        # itself), where Filter runs with the nominated-pods rule; elsewhere that rule
        # adds nothing. Nominations cannot change while the plan is used (within one
        # cycle, synchronously).
        self.nominated_nodes: frozenset[str] = frozenset(
            node
            for node, pods in (nominator.nodes_with_nominations().items() if nominator else ())
            if any(p.uid != pod.uid and p.priority >= pod.priority for p in pods.values())
        )

    def open(self, view: NodeView) -> NodeDryRun:
        return NodeDryRun(self.runner, self.state, self.pod, view, self.nominator, plan=self)


class NodeDryRun:
    """A copy of one node's state with pods removed/added and Filter run on it. The
    node's view (and the cycle state) handed in are never modified."""

    __slots__ = (
        "_any_nominated",
        "_extensions",
        "_own_view",
        "_passed",
        "_plan",
        "pod",
        "state",
        "view",
    )

    def __init__(
        self,
        runner: FilterRunner,
        state: CycleState,
        pod: PodInfo,
        view: NodeView,
        nominator: NominatedPods | None = None,
        *,
        plan: DryRunPlan | None = None,
    ) -> None:
        if plan is None:
            plan = DryRunPlan(runner, state, pod, nominator)
        elif plan.state is not state or plan.pod is not pod or plan.runner is not runner:
            raise ValueError("the dry-run plan was made for another cycle or pod")
        self._plan = plan
        self.pod = pod
        self._extensions = plan.extensions
        # Only the active PreFilter extensions write the cycle state in a dry run, so
        # without any the copy is not needed. (upstream DryRunPreemption clones it per
        # node, framework/preemption/preemption.go; Filter plugins may write it too, but
        # only what holds for every node: upstream runs Filter on one CycleState for
        # many nodes at once, schedule_one.go findNodesThatPassFilters, and a state
        # value's Clone may share itself, as VolumeBinding's does.)
        self.state = state.clone() if self._extensions else state
        # the node's own view until the first change, then a private copy
        self.view = view
        self._own_view = False
        nominated = plan.nominated_nodes
        self._any_nominated = bool(nominated) and view.name in nominated
        self._passed = False  # the full Filter has passed on this copy

    # ------------------------------------------------------------ changes
    def remove_pod(self, victim: PodInfo) -> Status:
        if not self._own_view:
            self.view = self.view.clone()
            self._own_view = True
        if not self.view.remove_pod(victim) or not self._extensions:
            return _SUCCESS
        return self._plan.runner.remove_pod(self.state, self.pod, victim, self.view)

    def remove_pods(self, victims: Sequence[PodInfo]) -> Status:
        """remove_pod of each, in order; the first failure ends it. On an unchanged
        copy without active PreFilter extensions (nothing to tell per pod), the copy
        is made without them at once (NodeView.clone_without)."""
        if self._own_view or self._extensions:
            for victim in victims:
                st = self.remove_pod(victim)
                if st.code != _OK:
                    return st
            return _SUCCESS
        self.view = self.view.clone_without({v.uid for v in victims})
        self._own_view = True
        return _SUCCESS

    def add_pod(self, pod: PodInfo) -> Status:
        if not self._own_view:
            self.view = self.view.clone()
            self._own_view = True
        self.view.add_pod(pod)
        if not self._extensions:
            return _SUCCESS
        return self._plan.runner.add_pod(self.state, self.pod, pod, self.view)

    def remove_remote_pod(self, victim: PodInfo, view: object) -> Status:
        """`victim`, on another node (`view`, the snapshot's, never changed), leaves with
        a victim unit: only the PreFilter extensions are told (upstream
        SelectVictimsOnNode calls RunPreFilterExtensionRemovePod with the remote
        NodeInfo and does not mutate it)."""
        return self._remote(False, victim, view)

    def add_remote_pod(self, pod: PodInfo, view: object) -> Status:
        """The reverse of remove_remote_pod (a victim unit reprieved)."""
        return self._remote(True, pod, view)

    def _remote(self, adding: bool, pod: PodInfo, view: object) -> Status:
        if not self._extensions:
            return _SUCCESS
        if not isinstance(view, NodeView):
            raise TypeError(f"expected a NodeView from the snapshot, got {type(view)!r}")
        runner = self._plan.runner
        run = runner.add_pod if adding else runner.remove_pod
        return run(self.state, self.pod, pod, view)

    # ------------------------------------------------------------ Filter
    def filter(self) -> Status:
        """Every Filter plugin not skipped this cycle, with the nominated-pods rule;
        the first rejection in profile order is the node's Status."""
        st = self._run(self._plan.filters)
        if st.code == _OK:
            self._passed = True
        return st

    def still_fits(self) -> bool:
        """Does the pod still pass Filter (SUCCESS only) after the changes made since
        filter() passed? Re-runs only the plugins whose verdict can depend on the pods
        on the node; before any passing filter(), the full Filter."""
        if not self._passed:
            return self.filter().code == _OK
        if self._any_nominated:
            return self._run(self._plan.recheck).code == _OK
        # the common case, the rule's verdict alone: a step per reprieved pod
        return passes(self._plan.recheck, self.state, self.pod, self.view)

    def _run(self, plugins: Sequence[FilterPlugin]) -> Status:
        if not self._any_nominated:
            return run_filter_plugins(plugins, self.state, self.pod, self.view)
        plan = self._plan
        return plan.runner.run_with_nominated_pods(
            self.state, self.pod, self.view, plan.nominator, plugins
        )
