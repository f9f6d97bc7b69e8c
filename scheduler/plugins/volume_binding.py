"""VolumeBinding (upstream framework/plugins/volumebinding/volume_binding.go).

PreFilter: every claim the pod uses must exist, not be lost or terminating, and an
ephemeral volume's claim must be owned by the pod; unbound claims of Immediate classes
reject the pod (the PV controller binds them; the PVC event requeues it).
Filter (per node): VolumeBinder.find_pod_volumes; its reasons are
UnschedulableAndUnresolvable.
Score (StorageCapacityScoring, beta and on in 1.37): the shape over the requested /
capacity utilization of the chosen static volumes, else of the CSIStorageCapacity of the
classes to provision.
Reserve assumes the node's choices; PreBind writes them and waits for the binding;
Unreserve reverts the assumptions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.config.plugin_args import UtilizationShapePoint, VolumeBindingArgs
from scheduler.framework import signature
from scheduler.framework.cluster_event import (
    ActionType,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    BatchFilterPlugin,
    BatchFilterResult,
    BatchScorePlugin,
    EnqueueExtensions,
    IntArray,
    NodePodsIndependentFilter,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.csi import CSIDriverInfo, CSINodeInfo, CSIStorageCapacityInfo
from scheduler.model.pod import PodInfo
from scheduler.model.volume import CLAIM_LOST, PVCInfo, StorageClassInfo
from scheduler.plugins.helpers import QUEUE, SKIP, event
from scheduler.plugins.volume_binder import (
    BinderError,
    PodVolumeClaims,
    PodVolumes,
    VolumeBinder,
    claim_not_owned,
)
from scheduler.plugins.volume_filtering import filter_each_node, pod_claims, pvc_not_found
from scheduler.plugins.volume_matching import AffinityCheck, AffinityIndex, pv_affinity

REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_STATE_KEY = names.VOLUME_BINDING
MAX_CUSTOM_PRIORITY_SCORE = 10  # upstream config.MaxCustomPriorityScore
_MAX_UTILIZATION = 100


@dataclass
class _State:
    """Shared by every clone of the cycle state (upstream's Clone returns itself), so
    the per-node results Filter records on copies reach Reserve."""

    claims: PodVolumeClaims | None = None
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    has_static: bool = False
    all_bound: bool = False

    def clone(self) -> _State:
        return self


def build_scorer(shape: tuple[UtilizationShapePoint, ...]) -> Callable[[int, int], int]:
    """upstream buildScorerFunction over helper.BuildBrokenLinearFunction."""
    points = [
        (p.utilization, p.score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for p in shape
    ]

    def raw(p: int) -> int:
        for i, (util, score) in enumerate(points):
            if p <= util:
                if i == 0:
                    return score
                pu, ps = points[i - 1]
                return ps + _go_div((score - ps) * (p - pu), util - pu)
        return points[-1][1]

    def per_class(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(_MAX_UTILIZATION)
        return raw(requested * _MAX_UTILIZATION // capacity)

    return per_class


def _go_div(a: int, b: int) -> int:
    """Go's integer division truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


class VolumeBinding(
    PreFilterPlugin,
    BatchFilterPlugin,
    NodePodsIndependentFilter,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.VOLUME_BINDING

    def __init__(self, args: VolumeBindingArgs, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self.binder = VolumeBinder(handle, float(args.bind_timeout_seconds))
        self._score_class = build_scorer(args.shape)

    # ---------------------------------------------------------------- PreFilter
    def _claim_problem(self, pod: PodInfo) -> str | None:
        """upstream podHasPVCs' errors, read from the informer (not the assume cache)."""
        lister = self._handle.storage
        for vol, pvc in pod_claims(pod, lister):
            if pvc is None:
                if vol.ephemeral:
                    return (
                        "waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{vol.claim_name}"'
                    )
                return pvc_not_found(vol.claim_name)
            if pvc.phase == CLAIM_LOST:
                return (
                    f'persistentvolumeclaim "{pvc.name}" bound to non-existent '
                    f'persistentvolume "{pvc.volume_name}"'
                )
            if pvc.deletion_timestamp is not None:
                return f'persistentvolumeclaim "{pvc.name}" is being deleted'
            if vol.ephemeral:
                msg = claim_not_owned(pod, pvc)
                if msg is not None:
                    return msg
        return None

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        if not any(v.claim_name for v in pod.volumes):
            state.write(_STATE_KEY, _State())
            return None, Status(Code.SKIP)
        problem = self._claim_problem(pod)
        if problem is not None:
            return None, Status.unresolvable(problem, plugin=self.name)
        try:
            claims = self.binder.pod_volume_claims(pod)
        except BinderError as exc:
            return None, Status.from_error(exc, self.name)
        if claims.unbound_immediate:
            return None, Status.unresolvable(REASON_UNBOUND_IMMEDIATE, plugin=self.name)
        state.write(_STATE_KEY, _State(claims=claims))
        return None, Status.success()

    # ---------------------------------------------------------------- Filter
    def filter(
        self,
        state: CycleState,
        pod: PodInfo,
        view: NodeView,
        affinity: AffinityCheck = pv_affinity,
    ) -> Status:
        s: _State | None = state.get(_STATE_KEY)
        if s is None or s.claims is None:
            return Status.success()
        try:
            volumes, reasons = self.binder.find_pod_volumes(
                pod, s.claims, view.name, view.labels, affinity
            )
        except BinderError as exc:
            return Status.from_error(exc, self.name)
        if reasons:
            return Status.unresolvable(*reasons, plugin=self.name)
        s.by_node[view.name] = volumes
        s.has_static = s.has_static or bool(volumes.static_bindings)
        return Status.success()

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        affinity = self._batch_affinity(state, snapshot, slots)

        def one(st: CycleState, p: PodInfo, view: NodeView) -> Status:
            return self.filter(st, p, view, affinity)

        return filter_each_node(one, state, pod, snapshot, slots)

    def _batch_affinity(
        self, state: CycleState, snapshot: Snapshot, slots: IntArray
    ) -> AffinityCheck:
        """Each candidate PV's node affinity over all candidate nodes at once (the node
        table's columns), instead of once per node and PV. A selector with matchFields
        is left to the per-node check: upstream matches a PV's affinity on labels only."""
        s: _State | None = state.get(_STATE_KEY)
        if s is None or s.claims is None:
            return pv_affinity
        pvs = s.claims.volumes()
        for pvc in s.claims.bound:
            pv = self.binder.cache.get_pv(pvc.volume_name)
            if pv is not None:
                pvs.append(pv)
        by_node: dict[str, set[str]] = {}
        everywhere: set[str] = set()
        names = snapshot.table.names
        for pv in pvs:
            sel = pv.node_affinity
            if sel is None:
                everywhere.add(pv.name)
                continue
            if any(t.fields for t in sel.terms):
                return AffinityIndex({}, complete=False)
            mask = snapshot.table.match_node_selector(sel, slots)
            for i in slots[mask]:
                by_node.setdefault(str(names[int(i)]), set()).add(pv.name)
        return AffinityIndex({n: frozenset(v) for n, v in by_node.items()}, frozenset(everywhere))

    # ---------------------------------------------------------------- Score
    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        # upstream runs Score for every pod once StorageCapacityScoring is on; a pod
        # without claims scores 0 on every node, which changes no total
        s: _State | None = state.get(_STATE_KEY)
        if s is None or s.claims is None:
            return Status(Code.SKIP)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        s: _State | None = state.get(_STATE_KEY)
        volumes = s.by_node.get(view.name) if s is not None else None
        if volumes is None:
            return 0, Status.success()
        classes: dict[str, list[int]] = {}  # class -> [requested, capacity]
        if volumes.static_bindings:
            for b in volumes.static_bindings:
                acc = classes.setdefault(b.pv.storage_class, [0, 0])
                acc[0] += b.pvc.request_storage or 0
                acc[1] += b.pv.capacity
        else:
            for d in volumes.dynamic_provisions:
                if d.node_capacity is None:
                    continue
                acc = classes.setdefault(d.pvc.storage_class, [0, 0])
                # the node's capacity once per class, whatever the number of claims
                acc[1] = d.node_capacity.capacity or 0
                acc[0] += d.pvc.request_storage or 0
        if not classes:
            return 0, Status.success()
        total = sum(self._score_class(req, cap) for req, cap in classes.values())
        return _round_half_away(total, len(classes)), Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        out = np.zeros(len(slots), dtype=np.int64)
        for i, slot in enumerate(slots.tolist()):
            out[i] = self.score(state, pod, snapshot.view(slot))[0]
        return out

    # ---------------------------------------------------------------- Reserve .. PreBind
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s: _State | None = state.get(_STATE_KEY)
        if s is None:
            return Status.success()
        volumes = s.by_node.get(node_name)
        if volumes is None:  # the pod uses no claim
            s.all_bound = True
            return Status.success()
        try:
            s.all_bound = self.binder.assume_pod_volumes(pod, node_name, volumes)
        except BinderError as exc:
            return Status.from_error(exc, self.name)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s: _State | None = state.get(_STATE_KEY)
        if s is None:
            return
        volumes = s.by_node.get(node_name)
        if volumes is not None:
            self.binder.revert_assumed(volumes)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s: _State | None = state.get(_STATE_KEY)
        if s is None or s.all_bound:
            return Status.success()
        volumes = s.by_node.get(node_name)
        if volumes is None:
            return Status.from_error(
                BinderError(f'no pod volume found for node "{node_name}"'), self.name
            )
        try:
            await self.binder.bind_pod_volumes(pod, node_name, volumes)
        except Exception as exc:  # API errors included: the pod is retried
            return Status.from_error(exc, self.name)
        return Status.success()

    # ---------------------------------------------------------------- events
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(EventResource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE, _sc_hint),
            event(EventResource.PVC, ActionType.ADD | ActionType.UPDATE, _pvc_hint),
            event(EventResource.PV, ActionType.ADD | ActionType.UPDATE),
            event(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
            event(EventResource.CSI_NODE, ActionType.ADD | ActionType.UPDATE, _csi_node_hint),
            event(EventResource.CSI_DRIVER, ActionType.UPDATE, _csi_driver_hint),
            event(
                EventResource.CSI_STORAGE_CAPACITY,
                ActionType.ADD | ActionType.UPDATE,
                _capacity_hint,
            ),
        ]

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream VolumeBinding.SignPod: the pod's volume sources."""
        return ((signature.VOLUMES, signature.volumes_signer(pod)),), Status.success()


def _round_half_away(total: int, n: int) -> int:
    """math.Round(float(total)/n) as Go rounds: halves away from zero."""
    q, r = divmod(total, n)
    return q + 1 if 2 * r >= n else q


def _pvc_hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, PVCInfo) or new.namespace != pod.namespace:
        return SKIP
    return QUEUE if any(v.claim_name == new.name for v in pod.volumes) else SKIP


def _sc_hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, StorageClassInfo) or not isinstance(new, StorageClassInfo):
        return QUEUE
    return QUEUE if old.allowed_topologies != new.allowed_topologies else SKIP


def _csi_node_hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, CSINodeInfo) or not isinstance(new, CSINodeInfo):
        return QUEUE
    return QUEUE if old.migrated_plugins != new.migrated_plugins else SKIP


def _csi_driver_hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, CSIDriverInfo) or not isinstance(new, CSIDriverInfo):
        return QUEUE
    uses = any(v.csi_driver == new.name for v in pod.volumes)
    return QUEUE if uses and old.storage_capacity and not new.storage_capacity else SKIP


def _capacity_hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(old, CSIStorageCapacityInfo) or not isinstance(new, CSIStorageCapacityInfo):
        return QUEUE
    before, after = old.volume_limit, new.volume_limit
    return QUEUE if after is not None and (before is None or after > before) else SKIP


def new(args: VolumeBindingArgs | None, handle: Handle) -> VolumeBinding:
    return VolumeBinding(args or VolumeBindingArgs(), handle)
