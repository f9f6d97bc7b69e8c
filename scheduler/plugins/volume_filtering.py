"""Batch Filter for plugins whose verdict is computed per node (the volume plugins).

The framework runs batch filters first and per-node filters after them, so a per-node
plugin placed before a batch plugin in the profile would report its reason for a node
only when the later plugin passed it: not upstream's "first failing plugin in profile
order". Offering a batch form that simply loops keeps the order exact. The loop only
runs for pods the plugin's PreFilter did not skip (pods with volumes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BatchFilterResult, IntArray
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo

NodeFilter = Callable[[CycleState, PodInfo, NodeView], Status]


def filter_each_node(
    node_filter: NodeFilter, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
) -> BatchFilterResult:
    n = len(slots)
    passed = np.ones(n, dtype=np.bool_)
    reasons = np.zeros(n, dtype=np.int32)
    statuses: list[Status] = []
    index: dict[tuple[int, tuple[str, ...]], int] = {}
    for i, slot in enumerate(slots.tolist()):
        st = node_filter(state, pod, snapshot.view(slot))
        if st.ok:
            continue
        passed[i] = False
        key = (int(st.code), st.reasons)
        at = index.get(key)
        if at is None:
            at = index[key] = len(statuses)
            statuses.append(st)
        reasons[i] = at
    return BatchFilterResult(passed, statuses, reasons)
