"""Shared scoring core of NodeResourcesFit and NodeResourcesBalancedAllocation
(upstream resourceAllocationScorer), vectorised over the node table.

For each configured resource: allocatable and requested-after-placing-the-pod per node.
cpu/memory use the non-zero requests (100m/200Mi defaults) unless `use_requested`;
an extended resource the pod does not request is left out (alloc 0), as is any
resource with allocatable 0 on a node.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config.args import ResourceSpec
from scheduler.framework.interfaces import IntArray
from scheduler.model.pod import PodInfo
from scheduler.model.quantity import CPU, EPHEMERAL_STORAGE, MEMORY

_BASE = (CPU, MEMORY, EPHEMERAL_STORAGE)


def pod_request(pod: PodInfo, resource: str, use_requested: bool) -> int:
    # not use_requested is NodeResourcesFit's scorer, which upstream builds without the
    # PodLevelResources flag: its own cpu/memory view of the pod (model.pod_resources)
    if not use_requested and resource == CPU:
        return pod.fit_score_cpu
    if not use_requested and resource == MEMORY:
        return pod.fit_score_memory
    return pod.requests.get(resource, 0)


def alloc_and_requested(
    snapshot: Snapshot,
    slots: IntArray,
    pod: PodInfo,
    resources: Sequence[ResourceSpec],
    use_requested: bool,
) -> tuple[IntArray, IntArray]:
    """(alloc, requested), each shaped (len(slots), len(resources))."""
    table = snapshot.table
    n = len(slots)
    alloc = np.zeros((n, len(resources)), dtype=np.int64)
    req = np.zeros((n, len(resources)), dtype=np.int64)
    for j, spec in enumerate(resources):
        r = spec.name
        amount = pod_request(pod, r, use_requested)
        if amount == 0 and r not in _BASE:
            continue  # an extended resource the pod does not ask for
        col = table.column(r)
        if col is None:
            continue
        alloc[:, j] = table.alloc[slots, col]
        if not use_requested and r in (CPU, MEMORY):
            req[:, j] = table.nz_req[slots, 0 if r == CPU else 1] + amount
        else:
            req[:, j] = table.req[slots, col] + amount
    return alloc, req


def alloc_and_requested_one(
    view: NodeView, pod: PodInfo, resources: Sequence[ResourceSpec], use_requested: bool
) -> tuple[IntArray, IntArray]:
    alloc = np.zeros((1, len(resources)), dtype=np.int64)
    req = np.zeros((1, len(resources)), dtype=np.int64)
    for j, spec in enumerate(resources):
        r = spec.name
        amount = pod_request(pod, r, use_requested)
        if amount == 0 and r not in _BASE:
            continue
        alloc[0, j] = view.allocatable.get(r, 0)
        if not use_requested and r == CPU:
            req[0, j] = view.non_zero_cpu + amount
        elif not use_requested and r == MEMORY:
            req[0, j] = view.non_zero_memory + amount
        else:
            req[0, j] = view.requested.get(r, 0) + amount
    return alloc, req


def weights(resources: Sequence[ResourceSpec]) -> npt.NDArray[np.int64]:
    return np.array([s.weight for s in resources], dtype=np.int64)
