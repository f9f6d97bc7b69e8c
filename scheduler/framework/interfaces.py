"""One Protocol per extension point (upstream framework/interface.go), batch-first.

A Filter plugin implements `filter(state, pod, view) -> Status` (one node) and may add
`filter_batch(state, pod, snapshot, slots) -> BatchFilterResult` (every candidate node at
once, over the NodeTable). The runtime uses the batch form for the main pass and the
per-node form on modified node copies (nominated pods, preemption dry runs), so a
batch plugin must implement both and they must agree.
Score likewise: `score(state, pod, view) -> (int, Status)` and/or
`score_batch(state, pod, snapshot, slots) -> int64 array`.

Optional abilities are separate Protocols, detected by method presence:
PreFilterExtensions (add_pod/remove_pod), NormalizeScore (normalize_scores),
EnqueueExtensions (events_to_register).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from scheduler.framework.cluster_event import ClusterEventWithHint
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.node_view import NodeView
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.diagnosis import Diagnosis

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]

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
    nominated_node_name: str = ""


class QueuedPod(Protocol):
    """What QueueSort compares: the queue's entry for a pod."""

    @property
    def pod(self) -> PodInfo: ...
    @property
    def timestamp(self) -> float: ...


@runtime_checkable
class Plugin(Protocol):
    @property
    def name(self) -> str: ...


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


class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: Diagnosis
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


# extension point key (config.names) -> the method that marks a plugin as implementing it
EXTENSION_METHODS: dict[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "less",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score|score_batch",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}


def implements(plugin: object, point: str) -> bool:
    return any(hasattr(plugin, m) for m in EXTENSION_METHODS[point].split("|"))
