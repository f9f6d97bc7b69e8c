"""Batch Filter for plugins whose verdict is computed per node (the volume plugins), and
the claim lookups and the queueing hint those plugins share.

The framework runs batch filters first and per-node filters after them, so a per-node
plugin placed before a batch plugin in the profile would report its reason for a node
only when the later plugin passed it: not upstream's "first failing plugin in profile
order". Offering a batch form that simply loops keeps the order exact. The loop only
runs for pods the plugin's PreFilter did not skip (pods with volumes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cluster_event import QueueingHint
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import PVCLister
from scheduler.framework.interfaces import BatchFilterResult, IntArray
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo
from scheduler.model.pod_volumes import PodVolume
from scheduler.model.volume import PVCInfo
from scheduler.plugins.helpers import QUEUE, SKIP

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


class FiltersEachNode:
    """The batch Filter of a plugin whose `filter` decides one node at a time."""

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        raise NotImplementedError

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        return filter_each_node(self.filter, state, pod, snapshot, slots)


def pod_claims(
    pod: PodInfo, lister: PVCLister, *, ephemeral: bool = True
) -> Iterator[tuple[PodVolume, PVCInfo | None]]:
    """Each volume of the pod that uses a claim, with the claim (None: not found);
    generic ephemeral volumes' claims only with `ephemeral`."""
    for v in pod.volumes:
        if v.claim_name and (ephemeral or not v.ephemeral):
            yield v, lister.get_pvc(pod.namespace, v.claim_name)


def pvc_not_found(name: str) -> str:
    return f'persistentvolumeclaim "{name}" not found'


def pvc_of_pod_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """A PVC event matters to a pod that names the claim in a persistentVolumeClaim
    volume (not through a generic ephemeral volume)."""
    if not isinstance(new, PVCInfo) or new.namespace != pod.namespace:
        return SKIP
    names_ = {v.claim_name for v in pod.volumes if v.claim_name and not v.ephemeral}
    return QUEUE if new.name in names_ else SKIP
