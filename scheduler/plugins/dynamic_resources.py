"""DynamicResources (kubernetes@v1.37.2 pkg/scheduler/framework/plugins/dynamicresources/
dynamicresources.go): pods with ResourceClaims get devices from the ResourceSlices of
the node they are placed on.

PreEnqueue: every claim the pod names exists, is not being deleted, and (made from a
template) belongs to the pod. PreFilter: the same check, the device classes of the claims
to allocate exist, no claim is being allocated for another pod right now; then one
allocator over the devices every other claim holds (and those Reserve has promised).
Filter (per node): allocated claims must be available on the node (their node
selector); the others are allocated by the structured allocator (scheduler/dra/
allocator.py), "cannot allocate all claims" when it finds nothing. Score prefers nodes
where earlier `firstAvailable` alternatives were chosen. Reserve promises the node's
allocation in memory (a pending allocation: no API call in the cycle); Unreserve takes it
back. PreBind writes each claim's allocation and the pod's reservation
(status.allocation, status.reservedFor) with upstream's conflict retries, then waits for
the devices' binding conditions, if any (dra/binding_conditions.py).

PostFilter deallocates a claim that is allocated where the pod cannot go and reserved
for nobody (its write runs in the background). The messages are upstream's, word for
word.

Extended resources backed by DRA (DRAExtendedResource, GA in v1.37.2; upstream's
extendeddynamicresources.go): a pod that requests an extended resource some DeviceClass
backs gets one more claim, the scheduler's own, after its user claims. PreFilter finds
it if an earlier cycle wrote it, else holds it in memory without requests; Filter gives
each node a copy with a device request per container for the resources the node leaves
to DRA (dra/extended_requests.py), allocated with the user claims; a claim from an
earlier cycle fails every node, and PostFilter deletes it. PreBind creates the node's
copy, allocates and reserves it as any claim, then records in the pod's
status.extendedResourceClaimStatus which request serves which container; Unreserve
deletes a claim it had written.

Not here yet (docs/plans/dra.md): the BindingConditionsPending event, the configuration
of the filter and binding timeouts (their defaults, 10 s and 600 s, are built in), and
claims of pod groups.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.config import names
from scheduler.dra.allocator import (
    AllocationError,
    AllocationResult,
    AllocationTimedOut,
    Allocator,
    FoundAllocation,
)
from scheduler.dra.binding_conditions import (
    BINDING_TIMEOUT_SECONDS,
    POLL_SECONDS,
    DeviceBindingError,
    claim_ready,
    claim_timed_out,
    has_binding_conditions,
)
from scheduler.dra.claim_writes import ClaimWrites, claim_ref
from scheduler.dra.device_state import DeviceState
from scheduler.dra.diagnosis import request_reports
from scheduler.dra.extended_claim import (
    ResourceDoesNotFit,
    dra_extended_requests,
    find_extended_claim,
    for_node,
    has_class_mapped_resource,
    has_requests,
    in_memory_claim,
    is_in_memory,
    node_extended_resources,
)
from scheduler.dra.extended_claim_writes import ExtendedClaimWrites
from scheduler.dra.extended_requests import RequestMapping, requests_and_mappings
from scheduler.dra.pod_claims import ClaimNotUsable, pod_claims, reserved_for_pod
from scheduler.dra.pools import Node
from scheduler.dra.resources import (
    AllocatedDevice,
    ClaimRecord,
    DeviceClassRecord,
    DeviceRequest,
)
from scheduler.dra.selector_cache import SelectorCache
from scheduler.dra.verdict_cache import Signature, VerdictCache, signature
from scheduler.framework.cluster_event import ActionType, ClusterEventWithHint, EventResource
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    EnqueueExtensions,
    IntArray,
    NodePodsIndependentFilter,
    NormalizeScorePlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import NodeSelector
from scheduler.plugins.helpers import QUEUE, SKIP, default_normalize, event

_STATE_KEY = names.DYNAMIC_RESOURCES
FIRST_AVAILABLE_MAX = 8  # resourceapi.FirstAvailableDeviceRequestMaxSize
# DynamicResourcesArgs.filterTimeout's default (kube-scheduler config/v1 types.go
# DynamicResourcesFilterTimeoutDefault; DRASchedulerFilterTimeout is on in v1.37.2): one
# node's allocation that takes longer fails the attempt with an error, as upstream's
FILTER_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class _NodeAllocation:
    """Filter's answer for one node (upstream nodeAllocation): the allocations of the
    claims to allocate, in their order; the node's copy of the scheduler's claim for
    extended resources and the pod's request mappings, if it has one."""

    found: FoundAllocation | None
    extended_claim: ClaimRecord | None = None
    mappings: tuple[RequestMapping, ...] = ()

    @property
    def results(self) -> list[AllocationResult]:
        """Built when first read (Score with alternatives, Reserve on the chosen node)."""
        return self.found.results() if self.found is not None else []


@dataclass
class _State:
    """Shared by every clone of the cycle state (upstream's Clone returns itself): Filter
    records each node's allocation on copies, Reserve reads it."""

    # the user claims in spec order, then the scheduler's claim for extended resources
    # (upstream's claimStore)
    claims: list[ClaimRecord] = field(default_factory=list)
    user_claims: int = 0
    # the extended resources the pod requests (upstream's podScalarResources), and the
    # uid its claim had in PreFilter (the key of its pending allocation)
    extended_requests: dict[str, int] = field(default_factory=dict)
    extended_uid: str = ""
    # per claim: the node selector of its allocation (allocated claims only)
    available_on: list[NodeSelector | None] = field(default_factory=list)
    to_allocate: list[int] = field(default_factory=list)  # indexes of unallocated claims
    allocator: Allocator | None = None
    # the claims to allocate as the verdict cache knows them (None: not cacheable), and
    # the class records that signature names
    signature: Signature | None = None
    signature_classes: tuple[DeviceClassRecord, ...] = ()
    node_allocations: dict[str, _NodeAllocation] = field(default_factory=dict)
    unavailable: set[int] = field(default_factory=set)
    # Reserve's choice per claim index, which PreBind writes
    allocations: dict[int, AllocationResult] = field(default_factory=dict)

    def clone(self) -> _State:
        return self

    @property
    def extended_index(self) -> int | None:
        """The index of the scheduler's claim for extended resources, if there is one."""
        return self.user_claims if len(self.claims) > self.user_claims else None

    @property
    def extended_claim(self) -> ClaimRecord | None:
        index = self.extended_index
        return self.claims[index] if index is not None else None


_NO_ALLOCATION = _NodeAllocation(None)


def _with_allocation(claim: ClaimRecord, result: AllocationResult) -> ClaimRecord:
    """The claim as it will be once the allocation is written (the pending allocation)."""
    return replace(
        claim,
        allocated=True,
        allocated_devices=tuple(
            AllocatedDevice(
                request=d.request,
                driver=d.driver,
                pool=d.pool,
                device=d.device,
                admin_access=bool(d.admin_access),
                share_id=d.share_id,
                consumed_capacity=d.consumed_capacity,
            )
            for d in result.devices
        ),
    )


def _may_name(pod: PodInfo, claim: ClaimRecord) -> bool:
    """Whether `claim` can be one of the pod's claims: in its namespace, and named by its
    spec or by its status (a template's claim)."""
    if claim.namespace != pod.namespace:
        return False
    return any(e.claim_name == claim.name for e in pod.resource_claims) or any(
        name == claim.name for _, name in pod.resource_claim_statuses
    )


class DynamicResources(
    PreEnqueuePlugin,
    PreFilterPlugin,
    NodePodsIndependentFilter,
    PostFilterPlugin,
    ScorePlugin,
    NormalizeScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = names.DYNAMIC_RESOURCES

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        state = handle.device_state
        # without the DRA informers (tests of other plugins), an empty view: every claim
        # is then missing, which is what a cluster without claims answers too
        self.devices = state if isinstance(state, DeviceState) else DeviceState()
        self.selectors = SelectorCache()  # upstream: the plugin's celCache
        self.verdicts = VerdictCache()
        self.writes = ClaimWrites(handle.resource_claim_api, self.devices)
        self.extended_writes = ExtendedClaimWrites(handle.resource_claim_api)
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---------------------------------------------------------------- PreEnqueue
    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.resource_claims:
            return Status.success()
        try:
            pod_claims(pod, self.devices)
        except ClaimNotUsable as exc:
            return Status.unresolvable(str(exc), plugin=self.name)
        return Status.success()

    # ---------------------------------------------------------------- PreFilter
    def _class_problem(self, class_name: str, request: str) -> Status | None:
        """validateDeviceClass."""
        if not class_name:
            return Status.from_error(
                ValueError(f"request {request}: unsupported request type"), self.name
            )
        if class_name not in self.devices.classes:
            return Status.unresolvable(
                f"request {request}: device class {class_name} does not exist", plugin=self.name
            )
        return None

    def _request_problem(self, claim: ClaimRecord, request: DeviceRequest) -> Status | None:
        """PreFilter's check of one request of a claim to allocate: its class (each
        alternative's) exists."""
        if request.exactly is not None:
            return self._class_problem(request.exactly.device_class_name, request.name)
        if not request.first_available:
            return Status.unresolvable(
                f"resource claim {claim_ref(claim)}, request {request.name}: unknown request type",
                plugin=self.name,
            )
        for sub in request.first_available:
            problem = self._class_problem(sub.device_class_name, f"{request.name}/{sub.name}")
            if problem is not None:
                return problem
        return None

    def _pre_filter_extended(self, pod: PodInfo, s: _State) -> ClaimRecord | None:
        """preFilterExtendedResources: the scheduler's claim for the pod's extended
        resources that a DeviceClass backs, as an earlier cycle wrote it or new in
        memory; None when no class backs any of them."""
        if not has_class_mapped_resource(pod, self.devices.class_resolver):
            return None
        s.extended_requests = dra_extended_requests(pod)
        found = find_extended_claim(pod, self.devices.all_claims())
        return found if found is not None else in_memory_claim(pod)

    def pre_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        s = _State()
        state.write(_STATE_KEY, s)
        try:
            claims = pod_claims(pod, self.devices) if pod.resource_claims else []
        except ClaimNotUsable as exc:
            return None, Status.unresolvable(str(exc), plugin=self.name)
        extended = self._pre_filter_extended(pod, s)
        s.user_claims = len(claims)
        if extended is not None:
            claims.append(extended)
            s.extended_uid = extended.uid
        if not claims:
            return None, Status(Code.SKIP)
        s.claims = claims
        for index, claim in enumerate(claims):
            # (upstream's "resourceclaim in use" cannot happen: CanBeReserved is always
            # true in v1.37.2, the API server bounds reservedFor)
            if claim.allocated:
                s.available_on.append(claim.allocation_node_selector)
                continue
            s.available_on.append(None)
            s.to_allocate.append(index)
            if self.devices.pending_allocation(claim.uid) is not None:
                return None, Status.unresolvable(
                    f"resource claim {claim_ref(claim)} is in the process of being allocated",
                    plugin=self.name,
                )
            if index == s.extended_index:
                continue  # no requests yet, or an earlier cycle's: Filter decides
            for request in claim.requests:
                problem = self._request_problem(claim, request)
                if problem is not None:
                    return None, problem
        if s.to_allocate:
            s.allocator = Allocator(
                self.devices.allocated_state(),
                self.devices.classes,
                self.devices.allocation_slices(),
                self.selectors,
            )
            if s.extended_index not in s.to_allocate:  # (that claim differs per node)
                found = signature([s.claims[i] for i in s.to_allocate], self.devices.classes)
                if found is not None:
                    s.signature, s.signature_classes = found
        return None, Status.success()

    # ---------------------------------------------------------------- Filter
    def _filter_extended(
        self, s: _State, pod: PodInfo, view: NodeView
    ) -> tuple[ClaimRecord | None, tuple[RequestMapping, ...], Status | None]:
        """filterExtendedResources: the node's copy of the scheduler's claim with a
        request for each resource the node leaves to DRA, and the pod's mappings; no
        copy when there is no such claim, it is allocated, or the node's device plugins
        cover everything and the pod has no user claim."""
        claim = s.extended_claim
        if claim is None:
            return None, (), None
        if has_requests(claim):
            # written in an earlier cycle: fail here, PostFilter deletes it, then anew
            return (
                None,
                (),
                Status.unresolvable("cannot schedule extended resource claim", plugin=self.name),
            )
        node = view.node
        allocatable = node.allocatable if node is not None else {}
        resolver = self.devices.class_resolver
        try:
            to_dra = node_extended_resources(s.extended_requests, allocatable, resolver)
        except ResourceDoesNotFit as exc:
            return None, (), Status.unresolvable(str(exc), plugin=self.name)
        if s.user_claims == 0 and not to_dra:
            return None, (), None
        if claim.allocated:
            return None, (), None
        requests, mappings = requests_and_mappings(pod.container_requests, to_dra, resolver)
        return for_node(claim, requests), tuple(mappings), None

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        s: _State | None = state.get(_STATE_KEY)
        if s is None or not s.claims:
            return Status.success()
        node_claim, mappings, problem = self._filter_extended(s, pod, view)
        if problem is not None:
            return problem
        if node_claim is None and s.user_claims == 0:
            return Status.success()  # the device plugins cover the extended resources
        unavailable = [
            i
            for i, selector in enumerate(s.available_on)
            if (selector is not None and not selector.matches(view.labels, view.name))
            or self._binding_failed(s.claims[i])
        ]
        found: FoundAllocation | None = None
        if s.allocator is not None:
            to_allocate = [
                node_claim if i == s.extended_index and node_claim is not None else s.claims[i]
                for i in s.to_allocate
            ]
            node = Node(view.name, view.labels)
            a = s.allocator
            hit = False
            if s.signature is not None:
                hit, found = self.verdicts.get(a.slices, node, s.signature, a.allocated)
            deadline = time.monotonic() + FILTER_TIMEOUT_SECONDS
            try:
                if not hit:
                    found = a.search(node, to_allocate, deadline)
                    if s.signature is not None:
                        self.verdicts.put(
                            a.slices, node, s.signature, s.signature_classes, a.allocated, found
                        )
            except AllocationTimedOut:
                return Status.from_error(
                    TimeoutError(f"node {view.name}: timed out trying to allocate devices"),
                    self.name,
                )
            except AllocationError as exc:
                if exc.on_node:
                    return Status.unresolvable(str(exc), plugin=self.name)
                return Status.from_error(exc, self.name)
            if found is None:
                return Status.unresolvable("cannot allocate all claims", plugin=self.name)
        if unavailable:
            s.unavailable.update(unavailable)
            return Status.unresolvable("resourceclaim not available on the node", plugin=self.name)
        if found is not None:
            s.node_allocations[view.name] = _NodeAllocation(found, node_claim, mappings)
        return Status.success()

    # ---------------------------------------------------------------- PostFilter
    def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        """PostFilter (deallocateOrDeletePodClaims): a claim that was not available on
        any node and is reserved for nobody else is deallocated, so that it can be
        allocated anew where the pod fits; the pod then tries again. Without PreFilter's
        state (an earlier PreFilter plugin ended the run) upstream fails with the cycle
        state's error, "not found", and so does this."""
        s: _State | None = state.get(_STATE_KEY)
        if s is None:
            return None, Status(Code.ERROR, ("not found",), self.name)
        extended = s.extended_claim
        for index in sorted(s.unavailable):
            claim = s.claims[index]
            if index == s.extended_index:
                if not is_in_memory(claim):
                    break  # an earlier cycle's claim: deleted below
                continue
            if not claim.reserved_for or (
                len(claim.reserved_for) == 1 and claim.reserved_for[0].uid == pod.uid
            ):
                # upstream's UpdateStatus runs inside PostFilter; here in the background,
                # as this scheduler's other writes, the pod being retried when the claim's
                # change arrives (its queueing hint: deallocated)
                self._spawn(self.writes.deallocate(claim))
                return None, Status.unschedulable("deallocation of ResourceClaim completed")
        if extended is not None and not is_in_memory(extended):
            # the scheduler's claim from an earlier cycle (Filter refused every node for
            # it): deleted, in the background as the deallocation above; the pod is
            # retried when the deletion of an allocated claim arrives
            self._spawn(self.extended_writes.delete(extended))
            return None, Status.unschedulable("deletion of ResourceClaim completed")
        return None, Status(Code.UNSCHEDULABLE)

    # ---------------------------------------------------------------- Score
    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        """computeScore: FIRST_AVAILABLE_MAX - i for each claim request whose alternative
        i was chosen, over the claims already allocated and those allocated here."""
        s: _State | None = state.get(_STATE_KEY)
        if s is None or not s.claims:
            return 0, Status.success()
        if not any(r.first_available for claim in s.claims for r in claim.requests):
            return 0, Status.success()  # only alternatives score
        node_allocation = s.node_allocations.get(view.name)
        if node_allocation is None:
            return 0, Status.success()
        allocations = node_allocation.results
        score = 0
        pending = iter(allocations)
        for claim in s.claims:
            if claim.allocated:
                chosen = {d.request for d in claim.allocated_devices}
            else:
                result = next(pending, None)
                if result is None:
                    return 0, Status.from_error(
                        ValueError(
                            f"number of allocations {len(allocations)} is smaller than "
                            "number of claims needing allocation"
                        ),
                        self.name,
                    )
                chosen = {d.request for d in result.devices}
            for request in claim.requests:
                if request.exactly is not None:
                    continue
                for i, sub in enumerate(request.first_available):
                    if f"{request.name}/{sub.name}" in chosen:
                        score += FIRST_AVAILABLE_MAX - i
        return score, Status.success()

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, scores: IntArray, slots: IntArray
    ) -> Status:
        return default_normalize(scores)

    # ---------------------------------------------------------------- Reserve
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s: _State | None = state.get(_STATE_KEY)
        if s is None or not s.to_allocate or s.allocator is None:
            return Status.success()
        node_allocation = s.node_allocations.get(node_name)
        results = node_allocation.results if node_allocation is not None else None
        if not results:
            if all(i == s.extended_index for i in s.to_allocate):
                # only the claim for extended resources, and the node's device plugins
                # cover them: nothing to allocate
                return Status.success()
            return Status.from_error(ValueError("claim allocation not found for node"), self.name)
        if len(results) != len(s.to_allocate):
            return Status.from_error(
                ValueError(
                    f"internal error, have {len(results)} allocations, "
                    f"{len(s.to_allocate)} claims to allocate, want {len(s.to_allocate)} claims"
                ),
                self.name,
            )
        for index, result in zip(s.to_allocate, results, strict=True):
            s.allocations[index] = result
            claim = s.claims[index]
            if index == s.extended_index and node_allocation is not None:
                # the node's copy, with its requests (keyed by the in-memory uid)
                claim = node_allocation.extended_claim or claim
            self.devices.signal_pending(_with_allocation(claim, result))
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s: _State | None = state.get(_STATE_KEY)
        if s is None or not s.claims:
            return
        for claim in s.claims[: s.user_claims]:
            if self.devices.remove_pending(claim.uid, force=False):
                self.devices.restore(claim.key)
            if claim.allocated and reserved_for_pod(pod, claim):
                # PreBind reserved it and a later step failed: take the reservation back
                self._spawn(self.writes.unreserve(claim, pod))
        extended = s.extended_claim
        if extended is not None:
            # unreserveExtendedResourceClaim: the pending allocation is keyed by the
            # claim's uid in PreFilter; a claim PreBind (or an earlier cycle) wrote is
            # deleted, so that no devices stay held for a pod not placed
            if self.devices.remove_pending(s.extended_uid, force=False):
                self.devices.restore(extended.key)
            if not is_in_memory(extended):
                self._spawn(self.extended_writes.delete(extended))

    def _spawn(self, work: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(work)
        except RuntimeError:  # no loop (a synchronous test): nothing was written either
            work.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---------------------------------------------------------------- PreBind
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s: _State | None = state.get(_STATE_KEY)
        if s is None or not s.claims:
            return Status.success()
        written: list[tuple[int, str]] = []  # (claim index, uid of its pending allocation)
        for index, claim in enumerate(s.claims):
            if reserved_for_pod(pod, claim):
                continue
            pending_uid = claim.uid
            allocation = s.allocations.get(index)
            extended = index == s.extended_index
            if extended and allocation is None and not has_requests(claim):
                continue  # the extended resources are the node's device plugins'
            try:
                if extended and is_in_memory(claim):
                    claim = await self._create_extended_claim(s, node_name)
                    s.claims[index] = claim  # Unreserve deletes it from now on
                s.claims[index] = await self.writes.bind(claim, allocation, pod)
                if extended:
                    mappings = s.node_allocations.get(node_name, _NO_ALLOCATION).mappings
                    await self.extended_writes.record_in_pod(pod, s.claims[index], mappings)
            except Exception as exc:  # API errors included: the pod is retried
                return Status.from_error(exc, self.name)
            written.append((index, pending_uid))
        if has_binding_conditions(s.claims):
            failed = await self._wait_for_binding_conditions(s)
            if failed is not None:
                return failed
        # success: the written copies hold the devices now (upstream prebindSuccessCleanup)
        for index, pending_uid in written:
            if index in s.allocations:
                self.devices.remove_pending(pending_uid, force=True)
        return Status.success()

    async def _create_extended_claim(self, s: _State, node_name: str) -> ClaimRecord:
        """createExtendedResourceClaimInAPI: the node's copy Filter made, created."""
        node_allocation = s.node_allocations.get(node_name)
        if node_allocation is None or node_allocation.extended_claim is None:
            raise ValueError(f"extended resource claim not found for node {node_name}")
        return await self.extended_writes.create(node_allocation.extended_claim)

    @staticmethod
    def _binding_failed(claim: ClaimRecord) -> bool:
        """Filter's check of an allocated claim (binding conditions on): its device
        failed binding, or waited for it past the binding timeout."""
        if not claim.allocated:
            return False
        try:
            ready = claim_ready(claim)
        except DeviceBindingError:
            return True
        return not ready and claim_timed_out(claim, time.time())

    async def _wait_for_binding_conditions(self, s: _State) -> Status | None:
        """PreBind's wait (isPodReadyForBinding polled every POLL_SECONDS, at once first,
        for up to BINDING_TIMEOUT_SECONDS) on the claims as the informer shows them; the
        error status upstream returns when a device fails or the wait times out. (Upstream
        also records a BindingConditionsPending event on the pod; not here yet.)"""
        deadline = time.monotonic() + BINDING_TIMEOUT_SECONDS
        while True:
            try:
                if self._pod_ready_for_binding(s):
                    return None
            except DeviceBindingError as exc:
                return Status.from_error(exc, self.name)
            left = deadline - time.monotonic()
            if left <= 0:
                return Status.from_error(
                    DeviceBindingError("device binding timeout: context deadline exceeded"),
                    self.name,
                )
            await asyncio.sleep(min(POLL_SECONDS, left))

    def _pod_ready_for_binding(self, s: _State) -> bool:
        for index, claim in enumerate(s.claims):
            current = self.devices.get_claim(claim.namespace, claim.name) or claim
            s.claims[index] = current
            if not claim_ready(current):
                if claim_timed_out(current, time.time()):
                    raise DeviceBindingError(f"device binding timeout: claim={current.name}")
                return False
        return True

    # ---------------------------------------------------------------- events
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            event(
                EventResource.NODE,
                ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ALLOCATABLE,
            ),
            event(
                EventResource.RESOURCE_CLAIM,
                ActionType.ADD | ActionType.UPDATE | ActionType.DELETE,
                self._claim_hint,
            ),
            event(
                EventResource.UNSCHEDULED_POD,
                ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM,
                self._pod_hint,
            ),
            event(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE),
            event(EventResource.RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE),
        ]

    def _claim_hint(self, pod: PodInfo, old: Any, new: Any) -> Any:
        """isSchedulableAfterClaimChange."""
        if not isinstance(new, ClaimRecord):
            # deleted: only a claim that held devices frees something
            return QUEUE if not isinstance(old, ClaimRecord) or old.allocated else SKIP
        deallocated = isinstance(old, ClaimRecord) and old.allocated and not new.allocated
        if not deallocated and not _may_name(pod, new):
            # not one of the pod's claims: whatever the lookup below finds, SKIP (this
            # runs for every rejected pod on every claim event)
            return SKIP
        try:
            uses = any(c.uid == new.uid for c in pod_claims(pod, self.devices))
        except ClaimNotUsable:
            return SKIP
        if isinstance(old, ClaimRecord) and old.allocated and not new.allocated:
            return QUEUE  # deallocated: its devices are free for any pod
        if not uses:
            return SKIP
        if not isinstance(old, ClaimRecord):
            return QUEUE  # the pod's claim was created
        if old.raw.get("status") == new.raw.get("status"):
            return SKIP
        return QUEUE

    def _pod_hint(self, pod: PodInfo, old: Any, new: Any) -> Any:
        """isSchedulableAfterTargetPodUpdate: the pod's own update, once every claim of
        it can be found."""
        if not isinstance(new, PodInfo) or new.uid != pod.uid:
            return SKIP
        try:
            pod_claims(new, self.devices)
        except ClaimNotUsable:
            return SKIP
        return QUEUE

    # ---------------------------------------------------------------- explain
    def explain_node(
        self, pod: PodInfo, node_name: str, labels: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """What explain shows beside this plugin's verdict on a node: per request of the
        pod's claims still to allocate, how the node's devices were ruled out
        (dra/diagnosis.py), and the allocated claims whose devices are elsewhere. Costs
        a pass over the node's devices: explain asks for one page of nodes at a time."""
        try:
            claims = pod_claims(pod, self.devices)
        except ClaimNotUsable as exc:
            return [{"problem": str(exc)}]
        node = Node(node_name, labels)
        out: list[dict[str, Any]] = [
            {"claim": claim_ref(c), "allocatedElsewhere": True}
            for c in claims
            if c.allocated
            and c.allocation_node_selector is not None
            and not c.allocation_node_selector.matches(labels, node_name)
        ]
        reports = request_reports(
            node,
            claims,
            self.devices.allocation_slices(),
            self.devices.classes,
            self.devices.allocated_state(),
            self.selectors,
        )
        out.extend(r.as_dict() for r in reports)
        return out

    # ---------------------------------------------------------------- sign
    def sign_pod(self, pod: PodInfo) -> tuple[tuple[SignFragment, ...], Status]:
        if pod.resource_claims:
            return (), Status.unschedulable("pods with dra resource claims are not signable")
        return (), Status.success()


def new(args: object, handle: Handle) -> DynamicResources:
    return DynamicResources(handle)
