"""NodeResourcesBalancedAllocation (Score): prefer nodes whose resource fractions (after
placing the pod, actual requests) are balanced: 100 * (1 - std of the fractions)."""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.config.args import NodeResourcesBalancedAllocationArgs
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, IntArray
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo
from scheduler.plugins.resource_allocation import alloc_and_requested, alloc_and_requested_one


def balanced_score(alloc: IntArray, req: IntArray) -> IntArray:
    valid = alloc > 0
    frac = np.where(valid, req / np.where(valid, alloc, 1), 0.0)
    frac = np.minimum(frac, 1.0)
    count = valid.sum(axis=1)
    mean = frac.sum(axis=1) / np.maximum(count, 1)
    var = (((frac - mean[:, None]) * valid) ** 2).sum(axis=1) / np.maximum(count, 1)
    std = np.where(count >= 2, np.sqrt(var), 0.0)
    out: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return out


class NodeResourcesBalancedAllocation:
    name = names.NODE_RESOURCES_BALANCED_ALLOCATION

    def __init__(self, args: NodeResourcesBalancedAllocationArgs) -> None:
        self._resources = args.resources

    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        if not any(pod.requests.get(s.name, 0) for s in self._resources):
            return Status(Code.SKIP)  # a best-effort pod: nothing to balance
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        alloc, req = alloc_and_requested_one(view, pod, self._resources, True)
        return int(balanced_score(alloc, req)[0]), Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        alloc, req = alloc_and_requested(snapshot, slots, pod, self._resources, True)
        return balanced_score(alloc, req)


def new(
    args: NodeResourcesBalancedAllocationArgs | None, handle: Handle
) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(args or NodeResourcesBalancedAllocationArgs())
