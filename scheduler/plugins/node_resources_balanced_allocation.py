"""NodeResourcesBalancedAllocation (Score), as upstream v1.37.2
(noderesources/balanced_allocation.go + resource_allocation.go).

The score is the IMPROVEMENT in balance the pod brings, not the balance after placing it:

    balance(fractions) = int64((1 - std(fractions)) * 100)
    score = 50 + (50 + balance(with pod) - balance(without pod)) / 2   (Go int division)

For each configured resource (default cpu and memory): fraction = requested / allocatable
capped at 1, where requested is the node's requested amount (actual requests, no 100m /
200Mi defaults: useRequested) plus, "with pod", the pod's request. A resource with
allocatable 0 on the node, or an extended resource the pod does not request, is left
out. std: none or one fraction -> 0; two -> |f0 - f1| / 2; more -> population standard
deviation around the mean (summed in resource order, as upstream). PreScore skips a pod
requesting none of the resources.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.config.args import NodeResourcesBalancedAllocationArgs
from scheduler.framework import signature
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    BatchScorePlugin,
    IntArray,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo
from scheduler.plugins.resource_allocation import (
    alloc_and_requested,
    alloc_and_requested_one,
    pod_request,
)

FloatArray = npt.NDArray[np.float64]


def balance(requested: IntArray, alloc: IntArray) -> IntArray:
    """upstream balancedResourceScore, one row per node."""
    valid = alloc > 0
    if requested.shape[1] == 2 and valid.all():
        return _balance_two(requested, alloc)
    return _balance_general(requested, alloc, valid)


def _balance_two(requested: IntArray, alloc: IntArray) -> IntArray:
    """The common case (cpu and memory, both allocatable on every node) in a few numpy
    calls: std = |f0 - f1| / 2. Same float64 operations, in the same order, as the
    general path's two-fraction branch, so the integers are identical."""
    frac: FloatArray = requested / alloc
    np.minimum(frac, 1.0, out=frac)
    std = frac[:, 0] - frac[:, 1]
    std /= 2
    np.abs(std, out=std)
    score = 1 - std
    score *= MAX_NODE_SCORE
    out: IntArray = score.astype(np.int64)  # Go int64(): truncation
    return out


def _balance_general(
    requested: IntArray, alloc: IntArray, valid: npt.NDArray[np.bool_]
) -> IntArray:
    frac: FloatArray = np.where(valid, requested / np.where(valid, alloc, 1), 0.0)
    frac = np.minimum(frac, 1.0)
    count = valid.sum(axis=1)
    n_rows, n_res = frac.shape
    # sequential sums in resource order (numpy's pairwise sum could round differently)
    total = np.zeros(n_rows, dtype=np.float64)
    for j in range(n_res):
        total += frac[:, j]
    std = np.zeros(n_rows, dtype=np.float64)
    # exactly two fractions: |f0 - f1| / 2
    rank = np.cumsum(valid, axis=1)
    first = np.where(valid & (rank == 1), frac, 0.0).sum(axis=1)  # one non-zero term
    second = np.where(valid & (rank == 2), frac, 0.0).sum(axis=1)
    std = np.where(count == 2, np.abs((first - second) / 2), std)
    many = count > 2
    if many.any():
        mean = total / np.maximum(count, 1)
        sq = np.zeros(n_rows, dtype=np.float64)
        for j in range(n_res):
            d = frac[:, j] - mean
            sq += np.where(valid[:, j], d * d, 0.0)
        std = np.where(many, np.sqrt(sq / np.maximum(count, 1)), std)
    out: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)  # Go int64(): truncation
    return out


def balanced_score(requested: IntArray, allocated: IntArray, alloc: IntArray) -> IntArray:
    """upstream balancedResourceScorer: 50 + (50 + with - without) / 2, Go division
    (truncates toward zero, so a negative improvement rounds up)."""
    d = MAX_NODE_SCORE // 2 + balance(requested, alloc) - balance(allocated, alloc)
    half = np.where(d >= 0, d // 2, -((-d) // 2))
    out: IntArray = MAX_NODE_SCORE // 2 + half
    return out


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin, BatchScorePlugin, SignPlugin):
    name = names.NODE_RESOURCES_BALANCED_ALLOCATION

    def __init__(self, args: NodeResourcesBalancedAllocationArgs) -> None:
        self._resources = args.resources

    def _pod_vector(self, pod: PodInfo) -> IntArray:
        return np.array([pod_request(pod, s.name, True) for s in self._resources], dtype=np.int64)

    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        if not self._pod_vector(pod).any():
            return Status(Code.SKIP)  # a best-effort pod: nothing to balance
        return Status.success()

    def _score(self, pod: PodInfo, alloc: IntArray, requested: IntArray) -> IntArray:
        # the node without the pod: the pod's request off every resource that counts
        allocated = requested - np.where(alloc > 0, self._pod_vector(pod)[None, :], 0)
        return balanced_score(requested, allocated, alloc)

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        alloc, req = alloc_and_requested_one(view, pod, self._resources, True)
        return int(self._score(pod, alloc, req)[0]), Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        alloc, req = alloc_and_requested(snapshot, slots, pod, self._resources, True)
        return self._score(pod, alloc, req)

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream BalancedAllocation.SignPod: the pod's resource requests, overhead included
        (extended resources backed by dynamic resource allocation are not modelled)."""
        return ((signature.RESOURCES, signature.resources_signer(pod)),), Status.success()


def new(
    args: NodeResourcesBalancedAllocationArgs | None, handle: Handle
) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(args or NodeResourcesBalancedAllocationArgs())
