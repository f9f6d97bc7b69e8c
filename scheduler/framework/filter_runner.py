"""The Filter rule of one profile, written once.

Upstream's framework runtime owns it (pkg/scheduler/framework/runtime/framework.go,
v1.37.2: RunFilterPlugins, RunFilterPluginsWithNominatedPods with addGENominatedPods,
RunPreFilterExtensionAddPod/RemovePod) and hands the same functions to the scheduling
algorithm and to preemption's SelectVictimsOnNode. Here every question "does the pod pass
Filter on this node" goes through this module: the main pass and the nominated or hinted
node (algorithm/schedule_one.py), the re-checks of batch rejections, preemption's dry runs
(framework/dry_run.py) and explain (which calls those two).

The rule:
- the Filter plugins in profile order, those whose PreFilter said SKIP this cycle left out
  (`active`, worked out once per cycle by callers that ask for many nodes);
- the first plugin that does not succeed decides the node's Status, named after it;
- a Status that is neither SUCCESS nor a rejection (a plugin's internal error) becomes an
  ERROR worded as upstream's, `running "<plugin>" filter plugin: <message>`; what an ERROR
  means is the caller's (the main pass stops its search, a dry run counts the node out);
- with nominated pods: on a node holding pods nominated at priority >= the pod's (not the
  pod itself) the pod must pass with them added (their PreFilter extensions told), and
  when any were added also without them;
- PreFilter extensions (AddPod/RemovePod) run for the plugins not skipped this cycle; one
  that does not succeed is an ERROR worded as upstream's.

Callers may hand a subset of the plugins (the per-node ones after a batch pass, a dry
run's re-check set): the rule is the same over any subset in profile order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    BatchFilterPlugin,
    FilterPlugin,
    NodePodsIndependentFilter,
    PreFilterExtensions,
    declares,
)
from scheduler.framework.nominated_pods import NominatedPods
from scheduler.framework.status import Code, Status, with_plugin
from scheduler.model.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.node_view import NodeView

class _Named(Protocol):
    @property
    def name(self) -> str: ...


_P = TypeVar("_P", bound=_Named)

_SUCCESS = Status.success()
_OK = Code.SUCCESS
_REJECTED = (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def active(plugins: Sequence[_P], state: CycleState) -> Sequence[_P]:
    """The plugins this cycle runs: those whose PreFilter said SKIP left out, in profile
    order. A cycle's skip set is final once PreFilter has run, so a caller that runs the
    rule on many nodes works this out once."""
    skip = state.skip_filter
    if not skip:
        return plugins
    return [p for p in plugins if p.name not in skip]


def run_filter_plugins(
    plugins: Sequence[FilterPlugin], state: CycleState, pod: PodInfo, view: NodeView
) -> Status:
    """The first Status in profile order that is not SUCCESS, SUCCESS when none.
    `plugins` are the cycle's active ones (`active`)."""
    for p in plugins:
        st = p.filter(state, pod, view)
        if st.code != _OK:
            return decided_by(st, p.name)
    return _SUCCESS


def passes(
    plugins: Sequence[FilterPlugin], state: CycleState, pod: PodInfo, view: NodeView
) -> bool:
    """`run_filter_plugins(...).code == SUCCESS`, without building the node's Status: a
    preemption dry run's reprieve steps ask only this (upstream SelectVictimsOnNode
    reads only IsSuccess there), thousands of times per preemption."""
    for p in plugins:  # noqa: SIM110 (a plain loop: all() would add a generator frame)
        if p.filter(state, pod, view).code != _OK:
            return False
    return True


def decided_by(status: Status, plugin: str) -> Status:
    """A Filter plugin's Status as the node's: a rejection named after the plugin, or
    the plugin's ERROR in upstream's words (batch plugins' statuses go through it too)."""
    if status.code == _OK:
        return status
    if status.code in _REJECTED:
        return with_plugin(status, plugin)
    # upstream: "Filter plugins are not supposed to return any status other than
    # Success or Unschedulable": anything else is the plugin's error
    message = f'running "{plugin}" filter plugin: {status.message()}'
    return Status(Code.ERROR, (message,), plugin, status.error)


class FilterRunner:
    """A profile's Filter plugins, the subsets the callers run, and the rule over them."""

    __slots__ = ("batch_plugins", "extensions", "node_plugins", "node_pods_dependent", "plugins")

    def __init__(
        self, plugins: Sequence[FilterPlugin], extensions: Sequence[PreFilterExtensions]
    ) -> None:
        self.plugins: list[FilterPlugin] = list(plugins)
        # the main pass runs these over the whole NodeTable first ...
        self.batch_plugins: list[BatchFilterPlugin] = [
            cast(BatchFilterPlugin, p) for p in self.plugins if declares(p, BatchFilterPlugin)
        ]
        # ... and these per node after, on the nodes still feasible
        self.node_plugins: list[FilterPlugin] = [
            p for p in self.plugins if not declares(p, BatchFilterPlugin)
        ]
        # what a preemption dry run re-checks after a reprieve (framework/dry_run.py):
        # every plugin but those declaring their verdict independent of the node's pods
        self.node_pods_dependent: list[FilterPlugin] = [
            p for p in self.plugins if not declares(p, NodePodsIndependentFilter)
        ]
        self.extensions: list[PreFilterExtensions] = list(extensions)

    def run(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        """upstream RunFilterPlugins: every Filter plugin on one node."""
        return run_filter_plugins(active(self.plugins, state), state, pod, view)

    def add_pod(self, state: CycleState, pod: PodInfo, added: PodInfo, view: NodeView) -> Status:
        """upstream RunPreFilterExtensionAddPod: `added` now counts on `view`."""
        return self._run_extensions(True, state, pod, added, view)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, removed: PodInfo, view: NodeView
    ) -> Status:
        """upstream RunPreFilterExtensionRemovePod: `removed` no longer counts on `view`."""
        return self._run_extensions(False, state, pod, removed, view)

    def extended(self, state: CycleState) -> bool:
        """A PreFilter extension runs in this cycle: pods added or removed on other
        nodes may change its Filter verdicts."""
        return bool(active(self.extensions, state))

    def _run_extensions(
        self, adding: bool, state: CycleState, pod: PodInfo, other: PodInfo, view: NodeView
    ) -> Status:
        for p in active(self.extensions, state):
            run = p.add_pod if adding else p.remove_pod
            st = run(state, pod, other, view)
            if st.code != _OK:
                method = "AddPod" if adding else "RemovePod"
                message = f'running {method} on PreFilter plugin "{p.name}": {st.message()}'
                return Status(Code.ERROR, (message,), p.name, st.error)
        return _SUCCESS

    def add_nominated_pods(
        self,
        state: CycleState,
        pod: PodInfo,
        view: NodeView,
        nominator: NominatedPods | None,
    ) -> tuple[bool, CycleState, NodeView, Status]:
        """upstream addGENominatedPods: copies of state and view with the pods nominated
        to the node at priority >= the pod's (not the pod itself) added. (False, state,
        view, SUCCESS) when none apply; an AddPod error is returned, not raised."""
        if nominator is None:
            return False, state, view, _SUCCESS
        nominated = [
            p
            for p in nominator.nominated_pods_for_node(view.name)
            if p.uid != pod.uid and p.priority >= pod.priority
        ]
        if not nominated:
            return False, state, view, _SUCCESS
        state_out = state.clone()
        view_out = view.clone()
        for p in nominated:
            view_out.add_pod(p)
            st = self.add_pod(state_out, pod, p, view_out)
            if st.code != _OK:
                return False, state, view, st
        return True, state_out, view_out, _SUCCESS

    def run_with_nominated_pods(
        self,
        state: CycleState,
        pod: PodInfo,
        view: NodeView,
        nominator: NominatedPods | None,
        plugins: Sequence[FilterPlugin] | None = None,
    ) -> Status:
        """upstream RunFilterPluginsWithNominatedPods over `plugins` (the cycle's active
        ones by default; a caller's subset must be active ones too): the
        pod must pass with the nominated pods of equal or higher priority added; if any
        were added, also without them (they may never arrive, and inter-pod affinity
        could depend on them)."""
        run = active(self.plugins, state) if plugins is None else plugins
        added, s2, v2, st = self.add_nominated_pods(state, pod, view, nominator)
        if st.code != _OK:
            return st
        st = run_filter_plugins(run, s2, pod, v2)
        if st.code != _OK or not added:
            return st
        return run_filter_plugins(run, state, pod, view)
