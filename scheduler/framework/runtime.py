"""Framework: the plugins of one profile and how each extension point runs them.

Built from the configuration's Profile (scheduler.config.types.Profile): per extension
point the enabled plugin refs, multiPoint already expanded by the config loader, score
weights (0 -> 1) and per-plugin args (missing -> the plugin's defaults).

Filter is the one FilterRunner (framework/filter_runner.py) built here over the profile's
Filter plugins: the scheduling algorithm (scheduler/algorithm/), preemption's dry runs and
explain all run Filter through it. The algorithm sits above this module and calls it;
nothing here calls the algorithm.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import numpy as np

from scheduler.config import names
from scheduler.config.args import default_plugin_args
from scheduler.config.types import Profile
from scheduler.framework.cluster_event import ClusterEventWithHint
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.filter_runner import FilterRunner
from scheduler.framework.handle import Handle, NominatedPods, PodActivator
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BatchScorePlugin,
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    IntArray,
    NormalizeScorePlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPod,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    declares,
    implements,
)
from scheduler.framework.registry import Registry
from scheduler.framework.search import SearchState
from scheduler.framework.signature import PodSignature, batchable, sign_pod
from scheduler.framework.status import Code, Status, go_list, with_plugin
from scheduler.framework.waiting_pods import WaitingPods
from scheduler.model.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.node_view import NodeView
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.diagnosis import Diagnosis

log = logging.getLogger(__name__)

# upstream framework/runtime/framework.go maxTimeout: no Permit wait is longer
MAX_PERMIT_WAIT = 15 * 60.0


class FrameworkError(ValueError):
    """The profile cannot be built (unknown plugin, plugin lacking the extension point)."""


# Upstream v1.37's default profiles hold DynamicResources right before DefaultPreemption
# (apis/config/v1/default_plugins.go). Its PreFilter writes the state its PostFilter reads;
# when an earlier PreFilter plugin ends the run (UnschedulableAndUnresolvable, or narrowed
# node sets that do not intersect) that state is missing, DynamicResources' PostFilter
# fails with the cycle state's "not found" error and RunPostFilterPlugins stops there: no
# preemption, and the pod's message ends in " not found". A profile without this
# scheduler's DynamicResources plugin (the default while its gate is off) says and does
# what upstream does (seen against the kube-scheduler v1.37.2 binary,
# tests/integration/test_fidelity_messages.py); with the plugin, the plugin says it.
_PRE_FILTER_ENDED_EARLY = "framework/PreFilterEndedBeforeDynamicResources"
DYNAMIC_RESOURCES = "DynamicResources"
DRA_STATE_NOT_FOUND = "not found"


class Framework:
    """The plugins of one profile, per extension point, in profile order.

    `profile` is the configuration's own Profile, multiPoint already expanded by the
    config loader (scheduler.config.plugins.expand_extension_points, the one table of
    which plugin serves which point); here each placed plugin must also declare that
    point's Protocol, so strict mypy has checked its methods.
    """

    def __init__(
        self,
        profile: Profile,
        registry: Registry,
        handle: Handle | None = None,
        *,
        global_percentage_of_nodes_to_score: int = 0,
        search: SearchState | None = None,
    ) -> None:
        self.profile = profile
        # pass one SearchState to every profile's Framework to share the rotation
        self.search = search if search is not None else SearchState()
        self.profile_name = profile.scheduler_name
        self.handle = handle if handle is not None else Handle()
        self.percentage_of_nodes_to_score = (
            profile.percentage_of_nodes_to_score
            if profile.percentage_of_nodes_to_score is not None
            else global_percentage_of_nodes_to_score
        )
        self._plugins: dict[str, Plugin] = {}
        self.weights: dict[str, int] = {}
        points: dict[str, list[Plugin]] = {p: [] for p in names.EXTENSION_POINTS}
        for point in names.EXTENSION_POINTS:
            seen: set[str] = set()
            for ref in profile.enabled(point):
                plugin = self._instantiate(ref.name, registry)
                if not implements(plugin, point):
                    raise FrameworkError(f"plugin {ref.name!r} does not extend {point}")
                if ref.name in seen:
                    raise FrameworkError(f"plugin {ref.name!r} listed twice in {point}")
                seen.add(ref.name)
                points[point].append(plugin)
                if point == names.SCORE:
                    self.weights[ref.name] = ref.weight or 1
        # every plugin declares its point's Protocol (implements() checked it): sound casts
        self.pre_enqueue_plugins = cast(list[PreEnqueuePlugin], points[names.PRE_ENQUEUE])
        sorts = cast(list[QueueSortPlugin], points[names.QUEUE_SORT])
        if len(sorts) > 1:
            raise FrameworkError("only one queueSort plugin may be enabled")
        self.queue_sort_plugin = sorts[0] if sorts else None
        self.pre_filter_plugins = cast(list[PreFilterPlugin], points[names.PRE_FILTER])
        self.filter_plugins = cast(list[FilterPlugin], points[names.FILTER])
        pre_filter_extensions = [
            cast(PreFilterExtensions, p)
            for p in self.pre_filter_plugins
            if declares(p, PreFilterExtensions)
        ]
        self.filter_runner = FilterRunner(self.filter_plugins, pre_filter_extensions)
        self.handle.filter_runner = self.filter_runner
        self.post_filter_plugins = cast(list[PostFilterPlugin], points[names.POST_FILTER])
        self.pre_score_plugins = cast(list[PreScorePlugin], points[names.PRE_SCORE])
        self.score_plugins = points[names.SCORE]
        self.reserve_plugins = cast(list[ReservePlugin], points[names.RESERVE])
        self.permit_plugins = cast(list[PermitPlugin], points[names.PERMIT])
        self.pre_bind_plugins = cast(list[PreBindPlugin], points[names.PRE_BIND])
        self.bind_plugins = cast(list[BindPlugin], points[names.BIND])
        self.post_bind_plugins = cast(list[PostBindPlugin], points[names.POST_BIND])
        # upstream computeBatchablePlugins: every PreFilter/Filter/PreScore/Score plugin
        # must sign, or no pod of this profile is signed (and none is batched)
        self.signers, unsigned = batchable(
            [
                *self.pre_filter_plugins,
                *self.filter_plugins,
                *self.pre_score_plugins,
                *self.score_plugins,
            ]
        )
        self.signatures_enabled = not unsigned
        if unsigned:
            log.info(
                "signatures disabled for profile %s: plugins %s do not sign pods",
                self.profile_name,
                unsigned,
            )

    def _instantiate(self, name: str, registry: Registry) -> Plugin:
        plugin = self._plugins.get(name)
        if plugin is None:
            if name not in registry:
                raise FrameworkError(f"plugin {name!r} is not registered")
            args = self.profile.args_for(name)
            if args is None:
                args = default_plugin_args(name)
            plugin = registry.get(name)(args, self.handle)
            self._plugins[name] = plugin
        return plugin

    def set_pod_activator(self, activator: PodActivator) -> None:
        """The scheduling queue, once it exists (it is built from the frameworks)."""
        self.handle.activator = activator

    @property
    def waiting_pods(self) -> WaitingPods:
        return self.handle.waiting_pods

    def sign_pod(self, pod: PodInfo) -> PodSignature | None:
        """upstream SignPod: the pod's signature under this profile, None when a plugin
        cannot sign it or the profile has a plugin that signs nothing."""
        if not self.signatures_enabled:
            return None
        return sign_pod(self.signers, pod)

    # ------------------------------------------------------------ introspection
    def plugin(self, name: str) -> Plugin:
        return self._plugins[name]

    def has_plugin(self, name: str) -> bool:
        return name in self._plugins

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Plugin name -> the cluster events (with hints) that may make a pod it
        rejected schedulable again. Handed to the queue."""
        out: dict[str, list[ClusterEventWithHint]] = {}
        for name, plugin in self._plugins.items():
            if declares(plugin, EnqueueExtensions):
                out[name] = list(cast(EnqueueExtensions, plugin).events_to_register())
        return out

    # ------------------------------------------------------------ queue side
    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        for p in self.pre_enqueue_plugins:
            st = p.pre_enqueue(pod)
            if not st.ok:
                return with_plugin(st, p.name)
        return Status.success()

    def queue_sort_less(self, a: QueuedPod, b: QueuedPod) -> bool:
        assert self.queue_sort_plugin is not None
        return bool(self.queue_sort_plugin.less(a, b))

    # ------------------------------------------------------------ filter
    def run_pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        """upstream RunPreFilterPlugins (framework/runtime/framework.go): SKIP marks the
        plugin's Filter skipped; UnschedulableAndUnresolvable (or an error) ends the run
        at once; Unschedulable is remembered and the other plugins still run (the last
        one is returned); narrowed node sets are intersected, and an empty intersection
        is UnschedulableAndUnresolvable with no plugin of its own. The result returned
        beside a rejection names the narrowing plugins (they count as rejectors)."""
        result: PreFilterResult | None = None
        rejected: Status | None = None
        for p in self.pre_filter_plugins:
            res, st = p.pre_filter(state, pod, snapshot)
            if st.code == Code.SKIP:
                state.skip_filter.add(p.name)
                continue
            if not st.ok:
                if not st.is_rejected:
                    # upstream wraps anything but a rejection as the plugin's error
                    msg = f'running PreFilter plugin "{p.name}": {st.message()}'
                    return None, Status(Code.ERROR, (msg,), p.name, st.error)
                st = with_plugin(st, p.name)
                if st.code == Code.UNSCHEDULABLE:
                    rejected = st
                    continue
                state.write(_PRE_FILTER_ENDED_EARLY, True)
                return None, st
            if res is not None and res.node_names is not None:
                res = PreFilterResult(res.node_names, (p.name,))
                result = res if result is None else result.merge(res)
                if not result.node_names:
                    narrowing = sorted(set(result.plugins))
                    if len(narrowing) == 1:
                        msg = f"node(s) didn't satisfy plugin {narrowing[0]}"
                    else:
                        names_ = go_list(narrowing)
                        msg = f"node(s) didn't satisfy plugin(s) {names_} simultaneously"
                    state.write(_PRE_FILTER_ENDED_EARLY, True)
                    return result, Status.unresolvable(msg)
        if rejected is not None:
            return result, rejected
        return result, Status.success()

    def run_filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        """upstream RunFilterPlugins: every Filter plugin on one node (filter_runner.py)."""
        return self.filter_runner.run(state, pod, view)

    def run_filter_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, view: NodeView, nominator: NominatedPods | None
    ) -> Status:
        """upstream RunFilterPluginsWithNominatedPods (filter_runner.py)."""
        return self.filter_runner.run_with_nominated_pods(state, pod, view, nominator)

    # ------------------------------------------------------------ post filter
    def run_post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """upstream RunPostFilterPlugins: the first plugin that succeeds, errors or says
        UnschedulableAndUnresolvable ends the run; otherwise the Unschedulable reasons
        of all are joined under the first rejecting plugin, with the last non-empty
        result (e.g. one clearing the nomination)."""
        if (
            self.post_filter_plugins
            and state.get(_PRE_FILTER_ENDED_EARLY)
            and DYNAMIC_RESOURCES not in self._plugins  # else the plugin itself says so
        ):
            return None, Status(Code.ERROR, (DRA_STATE_NOT_FOUND,), DYNAMIC_RESOURCES)
        reasons: list[str] = []
        result: PostFilterResult | None = None
        rejector = ""
        for p in self.post_filter_plugins:
            res, st = p.post_filter(state, pod, snapshot, diagnosis)
            if st.ok:
                return res, st
            if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return res, with_plugin(st, p.name)
            if not st.is_rejected:
                return None, with_plugin(st, p.name)
            if res is not None:
                result = res
            reasons.extend(st.reasons)
            rejector = rejector or p.name
        return result, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)

    # ------------------------------------------------------------ score
    def run_pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        """A failure is an ERROR in RunPreScorePlugins' words (framework/runtime/
        framework.go: `running PreScore plugin "X": <the plugin's message>`)."""
        for p in self.pre_score_plugins:
            st = p.pre_score(state, pod, snapshot, slots)
            if st.code == Code.SKIP:
                state.skip_score.add(p.name)
                continue
            if not st.ok:
                return _score_error(f'running PreScore plugin "{p.name}": {st.message()}', p.name)
        return Status.success()

    def run_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> tuple[IntArray, dict[str, IntArray], Status]:
        """Weighted sum of normalized scores over `slots`, plus the per-plugin scores."""
        total, per_plugin, _, st = self.run_score_keeping_raw(state, pod, snapshot, slots)
        return total, per_plugin, st

    def run_score_keeping_raw(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> tuple[IntArray, dict[str, IntArray], dict[str, IntArray], Status]:
        """run_score, also returning each plugin's raw (not normalized) scores, which
        opportunistic batching keeps to re-normalize later (upstream RunScorePlugins
        keeps them as NodePluginScores.RawScores)."""
        raw, st = self.run_raw_scores(state, pod, snapshot, slots)
        if not st.ok:
            return np.zeros(len(slots), dtype=np.int64), {}, raw, st
        total, per_plugin, st = self.normalize_scores(state, pod, raw, slots)
        return total, per_plugin, raw, st

    def run_raw_scores(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> tuple[dict[str, IntArray], Status]:
        """Each Score plugin not skipped this cycle on `slots`, before normalizing
        (upstream runRawScorePlugins). A failure is an ERROR worded as RunScorePlugins
        wraps runRawScorePlugins' (`running Score plugins: plugin "X" failed with: ...`)."""
        raw: dict[str, IntArray] = {}
        for p in self.score_plugins:
            if p.name in state.skip_score:
                continue
            if declares(p, BatchScorePlugin):
                batch = cast(BatchScorePlugin, p)
                raw[p.name] = np.asarray(
                    batch.score_batch(state, pod, snapshot, slots), dtype=np.int64
                )
                continue
            one = cast(ScorePlugin, p)
            values = []
            for s in slots.tolist():
                v, st = one.score(state, pod, snapshot.view(s))
                if not st.ok:
                    why = f'running Score plugins: plugin "{p.name}" failed with: {st.message()}'
                    return raw, _score_error(why, p.name)
                values.append(v)
            raw[p.name] = np.asarray(values, dtype=np.int64)
        return raw, Status.success()

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, raw: Mapping[str, IntArray], slots: IntArray
    ) -> tuple[IntArray, dict[str, IntArray], Status]:
        """NormalizeScore of each plugin not skipped this cycle over its raw scores
        (left untouched), range check, weighted sum (upstream normalizeScores, whose
        error wording the statuses carry). A plugin without raw scores here scores 0
        everywhere."""
        total = np.zeros(len(slots), dtype=np.int64)
        per_plugin: dict[str, IntArray] = {}
        for p in self.score_plugins:
            if p.name in state.skip_score:
                continue
            given = raw.get(p.name)
            scores = given.copy() if given is not None else np.zeros(len(slots), dtype=np.int64)
            if declares(p, NormalizeScorePlugin):
                st = cast(NormalizeScorePlugin, p).normalize_scores(state, pod, scores, slots)
                if not st.ok:
                    why = (
                        f'running Normalize on Score plugins: plugin "{p.name}" failed with: '
                        f"{st.message()}"
                    )
                    return total, per_plugin, _score_error(why, p.name)
            if len(scores) and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
                # upstream checks nodes in parallel and reports whichever it meets first;
                # here the first in node order
                outside = np.flatnonzero((scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE))
                why = (
                    f'applying score defaultWeights on Score plugins: plugin "{p.name}" '
                    f"returns an invalid score {int(scores[outside[0]])}, it should in the "
                    f"range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
                )
                return total, per_plugin, _score_error(why, p.name)
            per_plugin[p.name] = scores
            total += scores * self.weights.get(p.name, 1)
        return total, per_plugin, Status.success()

    # ------------------------------------------------------------ reserve .. bind
    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        for p in self.reserve_plugins:
            st = p.reserve(state, pod, node_name)
            if not st.ok:
                return with_plugin(st, p.name)
        return Status.success()

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for p in reversed(self.reserve_plugins):
            try:
                p.unreserve(state, pod, node_name)
            except Exception:  # an unreserve must never stop the others
                log.exception("unreserve failed plugin=%s pod=%s", p.name, pod.key)

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        """SUCCESS, WAIT or the first rejection. A WAIT names the plugin whose wait ends
        first, with that wait: upstream arms a timer per waiting plugin (each capped at
        15 minutes; RunPermitPlugins, waiting_pods_map.go newWaitingPod) and the first
        to fire rejects the pod in that plugin's name; on equal waits the first plugin
        in profile order stands for upstream's (random) first timer."""
        wait: float | None = None
        waiting_plugin = ""
        for p in self.permit_plugins:
            st, timeout = p.permit(state, pod, node_name)
            if st.code == Code.WAIT:
                timeout = min(timeout, MAX_PERMIT_WAIT)
                if wait is None or timeout < wait:
                    wait, waiting_plugin = timeout, p.name
            elif not st.ok:
                return with_plugin(st, p.name), 0.0
        if wait is not None:
            return Status(Code.WAIT, plugin=waiting_plugin), wait
        return Status.success(), 0.0

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        for p in self.pre_bind_plugins:
            st = await p.pre_bind(state, pod, node_name)
            if st.code == Code.ERROR:
                # upstream RunPreBindPlugins wraps an error in the plugin's name; the pod's
                # event and condition carry that text
                msg = f'running PreBind plugin "{p.name}": {st.message()}'
                return Status(Code.ERROR, (msg,), p.name, st.error)
            if not st.ok:
                return with_plugin(st, p.name)
        return Status.success()

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        for p in self.bind_plugins:
            st = await p.bind(state, pod, node_name)
            if st.code == Code.SKIP:
                continue
            if st.code == Code.ERROR:
                # upstream RunBindPlugins wraps an error in the plugin's name; the pod's
                # FailedScheduling event carries that text
                msg = f'running Bind plugin "{p.name}": {st.message()}'
                return Status(Code.ERROR, (msg,), p.name, st.error)
            return with_plugin(st, p.name)
        return Status(Code.ERROR, ("no bind plugin bound the pod",))

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for p in self.post_bind_plugins:
            p.post_bind(state, pod, node_name)


def _score_error(message: str, plugin: str) -> Status:
    # upstream fwk.AsStatus(err): an ERROR whatever the plugin's own code was
    return Status(Code.ERROR, (message,), plugin)
