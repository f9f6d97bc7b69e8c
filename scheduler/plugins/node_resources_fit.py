"""NodeResourcesFit: Filter (requests must fit allocatable minus requested; "Too many
pods"; "Insufficient <resource>") and Score (LeastAllocated default, MostAllocated,
RequestedToCapacityRatio), as upstream.

The Filter's code is Unschedulable (preemption may help), unless some short resource is
requested beyond the node's whole allocatable: then no eviction can make room and the
code is UnschedulableAndUnresolvable, so preemption does not dry-run that node (upstream
fitsRequest's InsufficientResource.Unresolvable, v1.37.2 noderesources/fit.go; "Too many
pods" never makes it unresolvable).

Extended resources backed by DRA (DRAExtendedResource, GA in v1.37.2; on here with the
DynamicResourceAllocation gate): an extended resource that some DeviceClass backs is not
counted on a node whose allocatable has none of it; DynamicResources allocates devices
for it there (upstream shouldDelegateResourceToDRA). A node whose device plugin
advertises it is checked as before.

Batch form: one comparison per requested resource over the table columns; each
rejected node gets a bitmask of what is short, and one Status per distinct bitmask.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.config.args import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    NodeResourcesFitArgs,
    UtilizationShapePoint,
)
from scheduler.dra.class_resolver import DEVICE_CLASS_PREFIX, DeviceClassResolver
from scheduler.dra.resources import DeviceClassRecord
from scheduler.framework import signature
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    MAX_NODE_SCORE,
    BatchFilterPlugin,
    BatchFilterResult,
    BatchScorePlugin,
    BoolArray,
    EnqueueExtensions,
    IntArray,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Status
from scheduler.model.node import NodeInfo
from scheduler.model.pod import PodInfo
from scheduler.model.quantity import CPU, EPHEMERAL_STORAGE, MEMORY
from scheduler.plugins.helpers import QUEUE, SKIP, event
from scheduler.plugins.resource_allocation import (
    alloc_and_requested,
    alloc_and_requested_one,
    weights,
)

TOO_MANY_PODS = "Too many pods"
SIGNATURE_DISABLED = "signature disabled when dra extended resources are used in the cluster"
_STATE_KEY = "PreFilter" + names.NODE_RESOURCES_FIT
MAX_CUSTOM_PRIORITY_SCORE = 10


# (resource, amount) the filter checks, and those a DeviceClass backs
_Wanted = tuple[list[tuple[str, int]], frozenset[str]]
_SUCCESS = Status.success()
_NONE: frozenset[str] = frozenset()
_ZERO = np.zeros(1, dtype=np.int64)  # the allocatable of a resource no node has
_NO_ALLOCATABLE: Mapping[str, int] = {}
# distinct rejection Statuses kept for reuse: the combinations of requested resources
# seen, a handful in practice (extended resources could add more; past this, built anew)
_MAX_REJECTIONS_KEPT = 256


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


class NodeResourcesFit(
    PreFilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.NODE_RESOURCES_FIT

    def __init__(
        self, args: NodeResourcesFitArgs, class_resolver: DeviceClassResolver | None = None
    ) -> None:
        self.args = args
        # DeviceClasses backing extended resources (None: dynamic resource allocation off)
        self._classes = class_resolver
        self._resources = args.scoring_strategy.resources
        self._weights = weights(self._resources)
        self._weight_sum = int(self._weights.sum())
        self._type = args.scoring_strategy.type
        self._shape = args.scoring_strategy.shape
        # (too many pods, short resources, unresolvable) -> the filter's Status
        self._rejections: dict[tuple[bool, tuple[str, ...], bool], Status] = {}

    def _checked(self, pod: PodInfo) -> list[tuple[str, int]]:
        """(resource, amount) the filter checks, in upstream's order: cpu, memory,
        ephemeral-storage, then extended resources (sorted) not ignored."""
        out = []
        for r in (CPU, MEMORY, EPHEMERAL_STORAGE):
            v = pod.requests.get(r, 0)
            if v > 0:
                out.append((r, v))
        for r in sorted(pod.requests):
            if r in (CPU, MEMORY, EPHEMERAL_STORAGE):
                continue
            v = pod.requests[r]
            if v <= 0 or r in self.args.ignored_resources:
                continue
            if "/" in r and r.split("/", 1)[0] in self.args.ignored_resource_groups:
                continue
            out.append((r, v))
        return out

    def _delegable(self, wanted: list[tuple[str, int]]) -> frozenset[str]:
        """The requested resources a DeviceClass backs: on a node without them in its
        allocatable they are DynamicResources' (shouldDelegateResourceToDRA)."""
        classes = self._classes
        if not classes:
            return _NONE
        return frozenset(r for r, _ in wanted if classes.device_class(r) is not None)

    # -------------------------------------------------------------- filter
    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        wanted = self._checked(pod)
        state.write(_STATE_KEY, (wanted, self._delegable(wanted)))
        return None, Status.success()

    def _wanted(self, state: CycleState, pod: PodInfo) -> _Wanted:
        """PreFilter's (resource, amount) to check and which of them DRA may take."""
        found: _Wanted | None = state.get(_STATE_KEY)
        if found is not None:
            return found
        wanted = self._checked(pod)
        return wanted, self._delegable(wanted)

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        # the per-node form runs on node copies (nominated pods, and each step of a
        # preemption dry run): the node's maps are read once, the loop allocates
        # nothing until something is short, and rejections reuse one Status per
        # distinct outcome (Status is immutable)
        node = view.node
        allocatable = node.allocatable if node is not None else _NO_ALLOCATABLE
        requested = view.requested
        wanted, delegable = self._wanted(state, pod)
        too_many = len(view.pods) >= allocatable.get("pods", 0)  # one more would exceed
        short: list[str] | None = None
        unresolvable = False
        for r, amount in wanted:
            alloc = allocatable.get(r, 0)
            if alloc <= 0 and r in delegable:
                continue  # DynamicResources allocates it here
            if amount > alloc - requested.get(r, 0):
                if short is None:
                    short = []
                short.append(r)
                unresolvable = unresolvable or amount > alloc
        if short is None and not too_many:
            return _SUCCESS
        key = (too_many, tuple(short) if short is not None else (), unresolvable)
        status = self._rejections.get(key)
        if status is None:
            reasons = [TOO_MANY_PODS] if too_many else []
            reasons.extend(insufficient(r) for r in key[1])
            if unresolvable:
                status = Status.unresolvable(*reasons, plugin=self.name)
            else:
                status = Status.unschedulable(*reasons, plugin=self.name)
            if len(self._rejections) < _MAX_REJECTIONS_KEPT:
                self._rejections[key] = status
        return status

    def filter_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> BatchFilterResult:
        table = snapshot.table
        wanted, delegable = self._wanted(state, pod)
        labels = [TOO_MANY_PODS] + [insufficient(r) for r, _ in wanted]
        # pod_count + 1 > max_pods, one numpy call fewer (integers)
        too_many = table.pod_count[slots] >= table.max_pods[slots]
        # one bit past the labels: some short resource exceeds the whole allocatable
        unresolvable_bit = len(labels)
        # per wanted resource: (allocatable, short) over the slots, None without a column
        # (short everywhere). Column by column: numpy's 2-D gather (np.ix_) is slower
        # (a resource DynamicResources takes where the node has none: short nowhere
        # without a column, and only where the node has some with one)
        checked: list[tuple[IntArray, BoolArray] | None] = []
        for r, amount in wanted:
            col = table.column(r)
            if col is None:
                checked.append(
                    (_ZERO, np.zeros(len(slots), dtype=np.bool_)) if r in delegable else None
                )
                continue
            alloc = table.alloc[slots, col]
            short = amount > alloc - table.req[slots, col]
            if r in delegable:
                short &= alloc > 0
            checked.append((alloc, short))
        if not too_many.any() and all(c is not None and not c[1].any() for c in checked):
            return BatchFilterResult(np.ones(len(slots), dtype=np.bool_))  # the common cycle
        bits = too_many.astype(np.int64)
        for i, ((_, amount), c) in enumerate(zip(wanted, checked, strict=True), start=1):
            if c is None:
                short = np.ones(len(slots), dtype=np.bool_)
                beyond = short
            else:
                alloc, short = c
                beyond = short & (amount > alloc)
            bits |= short.astype(np.int64) << i
            bits |= beyond.astype(np.int64) << unresolvable_bit
        passed = bits == 0
        if passed.all():
            return BatchFilterResult(passed)
        statuses: list[Status] = []
        reasons = np.full(len(slots), -1, dtype=np.int32)
        for mask in np.unique(bits[~passed]).tolist():
            rs = [labels[i] for i in range(len(labels)) if mask >> i & 1]
            reasons[bits == mask] = len(statuses)
            if mask >> unresolvable_bit & 1:
                statuses.append(Status.unresolvable(*rs, plugin=self.name))
            else:
                statuses.append(Status.unschedulable(*rs, plugin=self.name))
        return BatchFilterResult(passed, statuses, reasons)

    # -------------------------------------------------------------- score
    def _score(self, alloc: IntArray, req: IntArray) -> IntArray:
        """upstream least_allocated.go / most_allocated.go /
        requested_to_capacity_ratio.go, integer arithmetic as Go's."""
        valid = alloc > 0
        linear = self._type in (LEAST_ALLOCATED, MOST_ALLOCATED)
        if linear and self._weight_sum > 0 and valid.all():
            # the common case, every resource counts on every node: the weighted sum is a
            # plain integer dot product with the constant weights (same integers)
            if self._type == LEAST_ALLOCATED:
                per = np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // alloc)
            else:
                per = np.minimum(req, alloc) * MAX_NODE_SCORE // alloc
            fast: IntArray = (per @ self._weights) // self._weight_sum
            return fast
        safe = np.where(valid, alloc, 1)
        if self._type == LEAST_ALLOCATED:
            per = np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // safe)
        elif self._type == MOST_ALLOCATED:
            per = np.minimum(req, alloc) * MAX_NODE_SCORE // safe
        else:
            util = np.where(req > alloc, 100, req * 100 // safe)
            per = _broken_linear(util, self._shape)
            # upstream counts a resource (and its weight) only when its score is > 0
            valid = valid & (per > 0)
        w = self._weights[None, :] * valid
        wsum = w.sum(axis=1)
        total = (per * w).sum(axis=1)
        if self._type in (LEAST_ALLOCATED, MOST_ALLOCATED):
            out = np.where(wsum > 0, total // np.maximum(wsum, 1), 0)
        else:
            # Go's math.Round: halves away from zero (numpy rounds halves to even)
            out = np.where(wsum > 0, np.floor(total / np.maximum(wsum, 1) + 0.5), 0).astype(
                np.int64
            )
        result: IntArray = out.astype(np.int64)
        return result

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        alloc, req = alloc_and_requested_one(view, pod, self._resources, False)
        return int(self._score(alloc, req)[0]), Status.success()

    def score_batch(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> IntArray:
        alloc, req = alloc_and_requested(snapshot, slots, pod, self._resources, False)
        return self._score(alloc, req)

    def pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status:
        return Status.success()

    # -------------------------------------------------------------- events
    def events_to_register(self) -> list[ClusterEventWithHint]:
        def pod_freed(pod: PodInfo, old: Any, new: Any) -> Any:
            gone = old if isinstance(old, PodInfo) else None
            if gone is None:
                return QUEUE
            wanted = {r for r, _ in self._checked(pod)}
            return QUEUE if not wanted or any(gone.requests.get(r, 0) for r in wanted) else SKIP

        def node_fits(pod: PodInfo, old: Any, new: Any) -> Any:
            if not isinstance(new, NodeInfo):
                return QUEUE
            wanted = self._checked(pod)
            delegable = self._delegable(wanted)
            ok = all(
                new.allocatable.get(r, 0) >= v
                or (r in delegable and new.allocatable.get(r, 0) <= 0)
                for r, v in wanted
            )
            return QUEUE if ok else SKIP

        events = [
            event(
                EventResource.ASSIGNED_POD,
                ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN,
                pod_freed,
            ),
            event(
                EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE, node_fits
            ),
        ]
        if self._classes is not None:
            # a pod may wait for a class that backs its extended resource
            events.append(
                event(
                    EventResource.DEVICE_CLASS,
                    ActionType.ADD | ActionType.UPDATE,
                    _class_backs_pod_resource,
                )
            )
        return events

    # ------------------------------------------------------------ sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        """upstream Fit.SignPod: the pod's resource requests, overhead included; no
        signature for a pod requesting an extended resource a DeviceClass backs."""
        classes = self._classes
        if classes and any(
            v and classes.device_class(r) is not None for r, v in pod.requests.items()
        ):
            return (), Status.unschedulable(SIGNATURE_DISABLED)
        return ((signature.RESOURCES, signature.resources_signer(pod)),), Status.success()


def _class_backs_pod_resource(pod: PodInfo, old: Any, new: Any) -> Any:
    """isSchedulableAfterDeviceClassEvent: a class added under the implicit name of a
    resource the pod requests, or one whose extendedResourceName (new or changed) the
    pod requests."""
    if not isinstance(new, DeviceClassRecord):
        return QUEUE
    if isinstance(old, DeviceClassRecord):
        if old.extended_resource_name == new.extended_resource_name:
            return SKIP
    elif DEVICE_CLASS_PREFIX + new.name in pod.requests:
        return QUEUE  # (a class's name never changes: only an added one is new here)
    if new.extended_resource_name and new.extended_resource_name in pod.requests:
        return QUEUE
    return SKIP


def _broken_linear(util: IntArray, shape: tuple[UtilizationShapePoint, ...]) -> IntArray:
    """upstream helper.BuildBrokenLinearFunction (scores scaled by MaxNodeScore/10): the
    first point with utilization >= p decides; between two points a linear interpolation
    with Go's integer division (truncating toward zero, which matters on falling slopes);
    past the last point its score."""
    xs = [p.utilization for p in shape]
    ys = [p.score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE) for p in shape]
    out = np.full(util.shape, ys[-1], dtype=np.int64)
    decided = np.zeros(util.shape, dtype=np.bool_)
    for i, x in enumerate(xs):
        here = ~decided & (util <= x)
        if i == 0:
            val = np.full(util.shape, ys[0], dtype=np.int64)
        else:
            num = (ys[i] - ys[i - 1]) * (util - xs[i - 1])
            den = xs[i] - xs[i - 1]
            q = np.where(num >= 0, num // den, -((-num) // den))  # den > 0 (validated)
            val = ys[i - 1] + q
        out = np.where(here, val, out)
        decided |= here
    return out


def new(args: NodeResourcesFitArgs | None, handle: Handle) -> NodeResourcesFit:
    # the DRA device state's resolver when the DynamicResourceAllocation gate is on
    resolver = getattr(handle.device_state, "class_resolver", None)
    return NodeResourcesFit(
        args or NodeResourcesFitArgs(),
        resolver if isinstance(resolver, DeviceClassResolver) else None,
    )
