"""VolumeBinding-lite: this scheduler binds no volumes, but never places a pod where its
volumes cannot follow.

- every PVC must exist and not be terminating, else UnschedulableAndUnresolvable;
- a bound PVC's PV node affinity restricts the nodes ("node(s) had volume node affinity
  conflict", UnschedulableAndUnresolvable);
- an unbound PVC: Immediate binding -> "pod has unbound immediate
  PersistentVolumeClaims" (the PV controller will bind it; the PVC event requeues the
  pod); WaitForFirstConsumer -> "this scheduler cannot bind volumes: ..." (it would
  need the scheduler to pick and provision a volume).
"""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.config.args import VolumeBindingArgs
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import BatchFilterResult, IntArray, PreFilterResult
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import NodeSelector
from scheduler.model.volume import BINDING_WAIT_FOR_FIRST_CONSUMER
from scheduler.plugins.helpers import event

REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
_STATE_KEY = "PreFilter" + names.VOLUME_BINDING


class VolumeBinding:
    name = names.VOLUME_BINDING

    def __init__(self, args: VolumeBindingArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._conflict = Status.unresolvable(REASON_NODE_CONFLICT, plugin=self.name)

    def _fail(self, msg: str) -> tuple[PreFilterResult | None, Status]:
        return None, Status.unresolvable(msg, plugin=self.name)

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.pvc_names:
            return None, Status(Code.SKIP)
        h = self._handle
        affinities: list[NodeSelector] = []
        unbound_immediate = False
        for claim in pod.pvc_names:
            pvc = h.pvcs.get_pvc(pod.namespace, claim)
            if pvc is None:
                return self._fail(f'persistentvolumeclaim "{claim}" not found')
            if pvc.deletion_timestamp is not None:
                return self._fail(f'persistentvolumeclaim "{claim}" is being deleted')
            if pvc.volume_name:
                pv = h.pvs.get_pv(pvc.volume_name)
                if pv is None:
                    return self._fail(
                        f'persistentvolume "{pvc.volume_name}" bound to claim "{claim}" not found'
                    )
                if pv.node_affinity is not None:
                    affinities.append(pv.node_affinity)
                continue
            sc = h.storage_classes.get_storage_class(pvc.storage_class_name or "")
            if sc is not None and sc.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
                return self._fail(
                    f'this scheduler cannot bind volumes: persistentvolumeclaim "{claim}" '
                    f'(storage class "{sc.name}") waits for its first consumer'
                )
            unbound_immediate = True
        if unbound_immediate:
            return self._fail(REASON_UNBOUND_IMMEDIATE)
        state.write(_STATE_KEY, tuple(affinities))
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        affinities: tuple[NodeSelector, ...] = state.get(_STATE_KEY, ())
        for sel in affinities:
            if not sel.matches(view.labels, view.name):
                return self._conflict
        return Status.success()

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        affinities: tuple[NodeSelector, ...] = state.get(_STATE_KEY, ())
        passed = np.ones(len(slots), dtype=np.bool_)
        for sel in affinities:
            passed &= snapshot.table.match_node_selector(sel, slots)
        return BatchFilterResult(passed, [self._conflict])

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(
                EventResource.PVC,
                ActionType.ADD | ActionType.UPDATE_POD_GENERATED | ActionType.UPDATE,
            ),
            event(EventResource.PV, ActionType.ADD | ActionType.UPDATE),
            event(EventResource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE),
            event(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
        ]


def new(args: VolumeBindingArgs | None, handle: Handle) -> VolumeBinding:
    return VolumeBinding(args or VolumeBindingArgs(), handle)
