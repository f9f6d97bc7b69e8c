"""One Protocol per extension point (upstream framework/interface.go), batch-first.

A Filter plugin implements `filter(state, pod, view) -> Status` (one node) and may add
`filter_batch(state, pod, snapshot, slots) -> BatchFilterResult` (every candidate node at
once, over the NodeTable). The runtime uses the batch form for the main pass and the
per-node form on modified node copies (nominated pods, preemption dry runs), so a
batch plugin must implement both and they must agree.
Score likewise: `score(state, pod, view) -> (int, Status)` and/or
`score_batch(state, pod, snapshot, slots) -> int64 array`.

Optional abilities are separate Protocols: PreFilterExtensions (add_pod/remove_pod),
NormalizeScorePlugin (normalize_scores), EnqueueExtensions (events_to_register).

A plugin class names every Protocol it serves as a base class, so strict mypy checks
each of its methods against the Protocol; the framework places a plugin at an
extension point only when the class declares that point's Protocol (`declares`), never
by the mere presence of a method name. `EXTENSION_POINTS` is the one table of which
Protocol serves which extension point.
"""

from __future__ import annotations

from collections.abc import Awaitable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from scheduler.framework.cluster_event import ClusterEventWithHint
from scheduler.framework.cycle_state import CycleState

# re-exported: plugins and the runtime import the array types from here
from scheduler.framework.node_arrays import BoolArray as BoolArray
from scheduler.framework.node_arrays import Int32Array as Int32Array
from scheduler.framework.node_arrays import IntArray as IntArray
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.node_view import NodeView
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.diagnosis import Diagnosis

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """A PreFilter plugin may narrow the candidate nodes; None node_names = all."""

    node_names: frozenset[str] | None = None
    plugins: tuple[str, ...] = ()  # the plugins that narrowed (set by the runtime)

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names, self.plugins + other.plugins)


@dataclass(slots=True)
class BatchFilterResult:
    """`passed[i]` for slots[i]. A rejected node's Status is statuses[reasons[i]]
    (or statuses[0] when reasons is None)."""

    passed: BoolArray
    statuses: Sequence[Status] = ()
    reasons: Int32Array | None = None

    @classmethod
    def all_pass(cls, n: int) -> BatchFilterResult:
        return cls(np.ones(n, dtype=np.bool_))


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What a PostFilter plugin asks of the scheduling loop, the only writer of the
    nominator (upstream PostFilterResult with its NominatingInfo).

    nominated_node_name: None leaves the pod's nomination as it is, "" clears it, a node
    name nominates the pod there.
    cleared: other pods whose nomination no longer holds (lower-priority pods nominated
    to the node a preemption takes).
    status_by_task: a background task of the plugin writes the pod's status (PodScheduled
    and nominatedNodeName), so the loop must not.
    settle: when set, the loop awaits it before the next pod (Sync preemption).
    """

    nominated_node_name: str | None = None
    cleared: tuple[PodInfo, ...] = ()
    status_by_task: bool = False
    settle: Awaitable[object] | None = None


class QueuedPod(Protocol):
    """What QueueSort compares: the queue's entry for a pod."""

    @property
    def pod(self) -> PodInfo: ...
    @property
    def timestamp(self) -> float: ...


@runtime_checkable
class Plugin(Protocol):
    name: str


class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: PodInfo) -> Status: ...


class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: QueuedPod, b: QueuedPod) -> bool: ...
    def sort_key(self, pod: PodInfo, timestamp: float) -> tuple[Any, ...]: ...


class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]: ...


class PreFilterExtensions(Plugin, Protocol):
    """Keep PreFilter state right when the framework adds/removes a pod on a node copy."""

    def add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, view: NodeView
    ) -> Status: ...
    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, view: NodeView
    ) -> Status: ...


class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status: ...


class BatchFilterPlugin(FilterPlugin, Protocol):
    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult: ...


class NodePodsIndependentFilter(FilterPlugin, Protocol):
    """A marker: this Filter's verdict for a pod on a node never depends on which pods
    are on the node. It reads the pod, the Node object and cluster objects (volumes,
    classes), never the node's pods or their aggregates (requests, ports, counts), nor
    CycleState that PreFilter extensions (add_pod/remove_pod) change.

    Preemption's dry run relies on it: once Filter has passed on a node copy, adding
    or removing pods there cannot change such a plugin's verdict, so each reprieve
    step re-runs only the other Filter plugins. A plugin that does not declare this
    (every out-of-tree plugin, unless its author declares it) is always re-run."""


class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]: ...


class PreScorePlugin(Plugin, Protocol):
    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status: ...


class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]: ...


class BatchScorePlugin(Plugin, Protocol):
    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray: ...


class NormalizeScorePlugin(Plugin, Protocol):
    def normalize_scores(
        self, state: CycleState, pod: PodInfo, scores: IntArray, slots: IntArray
    ) -> Status:
        """Normalize `scores` (aligned with `slots`) in place to 0..100."""
        ...


class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...
    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        """(status, timeout seconds): WAIT asks the pod to wait up to the timeout."""
        ...


class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


class BindPlugin(Plugin, Protocol):
    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """SKIP hands the pod to the next bind plugin."""
        ...


class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> list[ClusterEventWithHint]: ...


# One piece of a pod's signature (upstream fwk.SignFragment): a key naming what it
# describes (framework/signature.py holds upstream's names) and a hashable value. Two
# plugins returning the same key must return the same value for the same pod.
SignFragment = tuple[str, Hashable]


class SignPlugin(Plugin, Protocol):
    """upstream fwk.SignPlugin (KEP-5598, opportunistic batching): the fragments of the
    pod's spec this plugin's PreFilter/Filter/PreScore/Score read. Two pods whose
    fragments are equal for every plugin of the profile must get the same feasibility
    and scores on the same nodes. A non-success Status means "this pod cannot be
    signed" (it is then never batched). A profile with a PreFilter/Filter/PreScore/Score
    plugin that does not declare this Protocol signs no pod at all."""

    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]: ...


# extension point key (config.names) -> the Protocols a plugin declares to serve it
# (Score: either form)
EXTENSION_POINTS: dict[str, tuple[object, ...]] = {
    "preEnqueue": (PreEnqueuePlugin,),
    "queueSort": (QueueSortPlugin,),
    "preFilter": (PreFilterPlugin,),
    "filter": (FilterPlugin,),
    "postFilter": (PostFilterPlugin,),
    "preScore": (PreScorePlugin,),
    "score": (ScorePlugin, BatchScorePlugin),
    "reserve": (ReservePlugin,),
    "permit": (PermitPlugin,),
    "preBind": (PreBindPlugin,),
    "bind": (BindPlugin,),
    "postBind": (PostBindPlugin,),
}


def declares(plugin: object, protocol: object) -> bool:
    """The plugin's class names `protocol` among its bases (nominal, so mypy checked it)."""
    return protocol in type(plugin).__mro__


def implements(plugin: object, point: str) -> bool:
    return any(declares(plugin, proto) for proto in EXTENSION_POINTS[point])


def extension_points_of(plugin_type: type) -> frozenset[str]:
    """The extension points (YAML keys) a plugin class serves: the points whose Protocol
    its class names among its bases. This is the one answer to "which plugin serves which
    point" (upstream asks the plugin instance with type assertions in expandMultiPointPlugins,
    pkg/scheduler/framework/runtime/framework.go); the config loader's multiPoint expansion
    receives it through the registry."""
    mro = plugin_type.__mro__
    return frozenset(
        point for point, protos in EXTENSION_POINTS.items() if any(p in mro for p in protos)
    )
