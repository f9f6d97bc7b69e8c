"""The structured allocator: which devices of one node's pools satisfy a pod's claims
(k8s.io/dynamic-resource-allocation@v0.37.2/structured/internal/incubating/
allocator_incubating.go, the variant v1.37.2 runs with its default features:
AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints, DeviceBindingAndStatus,
ConsumableCapacity, FractionalCapacityRange; docs/plans/dra.md).

A depth-first search in upstream's order: claims in order, requests in order (for a
request with `firstAvailable`, its alternatives in order), devices pool by pool, slice by
slice (slices by name), device by device, backtracking when a later request cannot be
met. The first complete assignment is the answer, so the choice is upstream's whenever
the inputs are the same. Selector results are cached per (device, request) for the call.

`allocate` returns one AllocationResult per claim, None when the node cannot satisfy the
claims, and raises AllocationError for what upstream treats as an error (a CEL runtime
error, a missing class, a request for all devices of an incomplete pool, ...), with
upstream's message.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from scheduler.dra.capacity import CapacityError, consumed_by, fits
from scheduler.dra.constraints import Constraint, DistinctAttribute, MatchAttribute
from scheduler.dra.pools import Node, Pool, SliceIndex, node_matches
from scheduler.dra.resources import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT,
    ALLOCATION_RESULTS_MAX_SIZE,
    TAINT_NO_EXECUTE,
    TAINT_NO_SCHEDULE,
    ClaimRecord,
    DeviceClassRecord,
    DeviceRecord,
    SliceRecord,
    SubRequest,
)
from scheduler.dra.selector import CompileError, EvaluationError
from scheduler.dra.selector_cache import SelectorCache

DeviceID = tuple[str, str, str]  # (driver, pool, device)


def _NOTHING() -> None:
    """The undo of a device not taken."""


def taint_prevents(device: DeviceRecord, request: SubRequest) -> bool:
    """A NoSchedule or NoExecute taint of the device that the request does not tolerate
    (allocator_incubating.go allocateDevice's taint check)."""
    return any(
        taint.effect in (TAINT_NO_EXECUTE, TAINT_NO_SCHEDULE)
        and not any(t.tolerates(taint) for t in request.tolerations)
        for taint in device.taints
    )


class AllocationError(Exception):
    """Upstream's allocator returned an error; the message is its text. `on_node`: the
    error wraps ErrFailedAllocationOnNode (structured/allocator.go), so the scheduler
    reads it as "unschedulable on this node", not as a failure of the cycle."""

    def __init__(self, message: str, *, on_node: bool = False) -> None:
        super().__init__(message)
        self.on_node = on_node


@dataclass
class AllocatedState:
    """What other claims hold (schedulerapi.AllocatedState): whole devices, shares of
    shareable devices, and the capacity those shares consume."""

    devices: set[DeviceID] = field(default_factory=set)
    shared: set[tuple[DeviceID, str]] = field(default_factory=set)
    capacity: dict[DeviceID, dict[str, Fraction]] = field(default_factory=dict)
    # (driver, pool) -> how often its held devices changed, as of this snapshot
    # (dra/verdict_cache.py; empty where nobody counts)
    pool_versions: dict[tuple[str, str], int] = field(default_factory=dict)

    def holds(self, device: DeviceID) -> bool:
        """IsDeviceAllocated."""
        return (
            device in self.devices
            or any(d == device for d, _ in self.shared)
            or device in self.capacity
        )


@dataclass(frozen=True)
class DeviceResult:
    request: str  # "request" or "request/subrequest"
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    share_id: str = ""
    consumed_capacity: Mapping[str, Fraction] = field(default_factory=dict)
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigResult:
    source: str  # "FromClass" | "FromClaim"
    requests: tuple[str, ...] | None
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class AllocationResult:
    devices: tuple[DeviceResult, ...]
    config: tuple[ConfigResult, ...]
    # the v1.NodeSelector of the result, as the API has it (None: any node)
    node_selector: Mapping[str, Any] | None


@dataclass
class _RequestData:
    request: SubRequest
    parent: str  # the parent request's name for an alternative, else ""
    klass: DeviceClassRecord
    num_devices: int
    all_devices: list[tuple[DeviceRecord, DeviceID, SliceRecord, Pool]] | None = None
    selected_subrequest: int = 0

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


@dataclass
class _Internal:
    request: str
    parent: str
    device: DeviceRecord
    id: DeviceID
    slice: SliceRecord
    share_id: str = ""
    consumed: Mapping[str, Fraction] | None = None
    admin_access: bool | None = None


class _Stop(Exception):
    """errAllocationResultMaxSizeExceeded: unwinds to the alternative that can shrink."""


def _claim_ref(claim: ClaimRecord) -> str:
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


class Allocator:
    """One pod's claims against every node (upstream builds one per PreFilter): the
    selectors' compiled programs are shared through `selectors`; counters available in
    each pool are computed once per allocator."""

    def __init__(
        self,
        allocated: AllocatedState,
        classes: Mapping[str, DeviceClassRecord],
        slices: Sequence[SliceRecord],
        selectors: SelectorCache,
        new_share_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.allocated = allocated
        self.classes = classes
        self.slices = SliceIndex.of(slices)
        self.selectors = selectors
        self.new_share_id = new_share_id
        self._available_counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}

    def allocate(
        self, node: Node, claims: Sequence[ClaimRecord], deadline: float | None = None
    ) -> list[AllocationResult] | None:
        """`deadline` (time.monotonic()): past it the search stops with
        AllocationTimedOut, as upstream's allocateOne stops on its context's deadline
        (DRASchedulerFilterTimeout)."""
        found = self.search(node, claims, deadline)
        return found.results() if found is not None else None

    def search(
        self, node: Node, claims: Sequence[ClaimRecord], deadline: float | None = None
    ) -> FoundAllocation | None:
        """`allocate`, with the results built only when asked for: Filter searches every
        node and Reserve reads one node's results (building them for each node was a
        fifth of a Filter). Every error `allocate` raises is raised here."""
        run = _Run(self, node, claims, deadline)
        return FoundAllocation(run) if run.search() else None


class FoundAllocation:
    """A successful search; `results()` builds the AllocationResults once."""

    __slots__ = ("_built", "_run")

    def __init__(self, run: _Run) -> None:
        self._run: _Run | None = run
        self._built: list[AllocationResult] = []

    def results(self) -> list[AllocationResult]:
        if self._run is not None:
            self._built = self._run.build()
            self._run = None
        return self._built


class AllocationTimedOut(AllocationError):
    """The search passed its deadline (upstream: context.DeadlineExceeded)."""


def _taken(
    data: _RequestData,
    device: DeviceRecord,
    device_id: DeviceID,
    slice_: SliceRecord,
    share_id: str,
    consumed: dict[str, Fraction] | None,
    admin: bool,
) -> _Internal:
    """The result entry of a device taken for a request."""
    return _Internal(
        request=data.request.name,
        parent=data.parent,
        device=device,
        id=device_id,
        slice=slice_,
        share_id=share_id,
        consumed=consumed,
        admin_access=True if admin else None,
    )


class _Run:
    def __init__(
        self, a: Allocator, node: Node, claims: Sequence[ClaimRecord], deadline: float | None
    ) -> None:
        self.a = a
        self.node = node
        self.claims = claims
        self.deadline = deadline
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.constraints: list[list[Constraint]] = []
        self.consumed_counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        self.request_data: dict[tuple[int, int, int], _RequestData] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self.results: list[list[_Internal]] = [[] for _ in claims]
        self.pools: Sequence[Pool] = ()
        self.node_selectors: list[Mapping[str, Any] | None] = []

    # --- setup (Allocate) ------------------------------------------------------------

    def search(self) -> bool:
        self.pools = self.a.slices.pools_for(self.node)
        for ci, claim in enumerate(self.claims):
            per_claim = 0
            for ri, request in enumerate(claim.requests):
                if request.first_available:
                    least = None
                    for si, sub in enumerate(request.first_available):
                        data = self._validate(claim, sub, request.name, (ci, ri, si))
                        self.request_data[(ci, ri, si)] = data
                        least = data.num_devices if least is None else min(least, data.num_devices)
                    wanted = least or 0
                else:
                    if request.exactly is None:
                        raise AllocationError(
                            f"claim {_claim_ref(claim)}, request {request.name}: "
                            "missing device class name (unsupported request type?)"
                        )
                    data = self._validate(claim, request.exactly, "", (ci, ri, 0))
                    self.request_data[(ci, ri, 0)] = data
                    wanted = data.num_devices
                if wanted > ALLOCATION_RESULTS_MAX_SIZE - per_claim:
                    raise AllocationError(
                        f"claim {_claim_ref(claim)}, request {request.name}: adding {wanted} "
                        f"devices exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, "
                        f"with {per_claim} already accounted for"
                    )
                per_claim += wanted
            constraints: list[Constraint] = []
            for i, c in enumerate(claim.constraints):
                if c.match_attribute:
                    constraints.append(MatchAttribute(c.requests, c.match_attribute))
                elif c.distinct_attribute:
                    constraints.append(DistinctAttribute(c.requests, c.distinct_attribute))
                else:
                    raise AllocationError(
                        f"claim {_claim_ref(claim)}, constraint #{i}: empty constraint "
                        "(unsupported constraint type?)"
                    )
            self.constraints.append(constraints)
        try:
            done = self._allocate_one(0, 0, 0, 0, False, (0, 0, 0))
        except _Stop as err:
            # upstream's errAllocationResultMaxSizeExceeded reaching Allocate is its error
            raise AllocationError("allocation max size exceeded") from err
        if not done:
            if any(p.invalid for p in self.pools):
                raise AllocationError("invalid resource pools were encountered", on_node=True)
            return False
        # the node selectors now: building one can fail, which is Filter's error
        # what only the search needed goes now: Filter keeps a found allocation per
        # node until the cycle ends, and the collector walks whatever is kept
        self.matches = {}
        self.allocating = {}
        self.allocating_capacity = {}
        self.consumed_counters = {}
        self.node_selectors = [
            self._node_selector(self.results[ci]) for ci in range(len(self.claims))
        ]
        return True

    def build(self) -> list[AllocationResult]:
        return [self._result(ci) for ci in range(len(self.claims))]

    def _validate(
        self, claim: ClaimRecord, request: SubRequest, parent: str, key: tuple[int, int, int]
    ) -> _RequestData:
        name = request.name
        ref = _claim_ref(claim)
        if request.has_derived_attributes:
            raise AllocationError(
                f"claim {ref}, request {name}: cannot handle request with derived attributes, "
                "the feature is disabled"
            )
        for i, selector in enumerate(request.selectors):
            if not selector:
                raise AllocationError(
                    f"claim {ref}, request {name}, selector #{i}: CEL expression empty "
                    "(unsupported selector type?)"
                )
        if not request.device_class_name:
            raise AllocationError(
                f"claim {ref}, request {name}: missing device class name "
                "(unsupported request type?)"
            )
        klass = self.a.classes.get(request.device_class_name)
        if klass is None:
            raise AllocationError(
                f"claim {ref}, request {name}: could not retrieve device class "
                f'{request.device_class_name}: deviceclass.resource.k8s.io "'
                f'{request.device_class_name}" not found'
            )
        data = _RequestData(request, parent, klass, 0)
        if request.allocation_mode == ALLOCATION_MODE_EXACT:
            data.num_devices = request.count
        elif request.allocation_mode == ALLOCATION_MODE_ALL:
            data.all_devices = []
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"claim {ref}, request {name}: asks for all devices, but resource "
                        f"pool {pool.name} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocationError(
                        f"claim {ref}, request {name}: asks for all devices, but resource "
                        f"pool {pool.name} is currently invalid"
                    )
                for slice_ in pool.slices_on_node:
                    for device in slice_.devices:
                        device_id = (slice_.driver, slice_.pool, device.name)
                        if not self._selectable(key, data, slice_, device, device_id):
                            continue
                        try:
                            ok = fits({}, request.capacity_requests, device.capacity, {})
                        except CapacityError as err:
                            raise AllocationError(
                                f"claim {ref}, request {name}: checking capacity for device "
                                f"{device.name}: {err}"
                            ) from err
                        if ok:
                            data.all_devices.append((device, device_id, slice_, pool))
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(
                f"claim {ref}, request {name}: unsupported count mode {request.allocation_mode}"
            )
        return data

    # --- the search (allocateOne) ------------------------------------------------------

    def _allocate_one(
        self,
        ci: int,
        ri: int,
        si: int,
        di: int,
        sub_chosen: bool,
        start: tuple[int, int, int],
    ) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise AllocationTimedOut("filter operation aborted: context deadline exceeded")
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.requests):
            try:
                return self._allocate_one(ci + 1, 0, 0, 0, False, (0, 0, 0))
            except _Stop:
                return False
        data = self.request_data[(ci, ri, si)]
        if not sub_chosen and data.parent:
            all_exceeded = True
            sub = 0
            while (ci, ri, sub) in self.request_data:
                try:
                    ok = self._allocate_one(ci, ri, sub, di, True, (0, 0, 0))
                except _Stop:
                    sub += 1
                    continue
                all_exceeded = False
                if ok:
                    self.request_data[(ci, ri, 0)].selected_subrequest = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _Stop
            return False
        request = data.request
        every = request.allocation_mode == ALLOCATION_MODE_ALL
        if every and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self._allocate_one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        if data.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE - len(self.results[ci]):
            raise _Stop
        if every:
            assert data.all_devices is not None
            device, device_id, slice_, pool = data.all_devices[di]
            done, undo = self._allocate_device(ci, ri, si, device, device_id, slice_, pool, True)
            if not done:
                return False
            try:
                ok = self._allocate_one(ci, ri, si, di + 1, sub_chosen, (0, 0, 0))
            except BaseException:
                undo()
                raise
            if not ok:
                undo()
            return ok
        admin = bool(request.admin_access)
        # _in_use, inlined: this loop visits every device of the node for every pod
        held = self.a.allocated.devices
        allocating = self.allocating
        matches = self.matches
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            slice_start = start[1] if pi == start[0] else 0
            for sl in range(slice_start, len(pool.slices_on_node)):
                slice_ = pool.slices_on_node[sl]
                ids = pool.device_ids[sl]
                device_start = start[2] if (pi, sl) == start[:2] else 0
                for dx in range(device_start, len(ids)):
                    device_id = ids[dx]
                    if admin:
                        if ci in allocating.get(device_id, ()):
                            continue
                    elif device_id in held or allocating.get(device_id):
                        continue
                    device = slice_.devices[dx]
                    known = matches.get((device_id, ci, ri, si))  # _selectable's memory
                    if known is None:
                        known = self._selectable((ci, ri, si), data, slice_, device, device_id)
                    if not known:
                        continue
                    if not self._fits_or_raise(ci, request, device, device_id, "checking"):
                        continue
                    done, undo = self._allocate_device(
                        ci, ri, si, device, device_id, slice_, pool, False, capacity_fits=True
                    )
                    if not done:
                        continue
                    try:
                        ok = self._allocate_one(ci, ri, si, di + 1, sub_chosen, (pi, sl, dx + 1))
                    except BaseException:
                        undo()
                        raise
                    if ok:
                        return True
                    undo()
        return False

    def _in_use(self, device_id: DeviceID) -> bool:
        return device_id in self.a.allocated.devices or bool(self.allocating.get(device_id))

    def _capacity_in_use(self, device_id: DeviceID) -> bool:
        allocated = self.a.allocated
        return (
            device_id in allocated.capacity
            or any(d == device_id for d, _ in allocated.shared)
            or device_id in self.allocating_capacity
        )

    def _fits_or_raise(
        self, ci: int, request: SubRequest, device: DeviceRecord, device_id: DeviceID, step: str
    ) -> bool:
        """_capacity_fits, its CapacityError as upstream's allocation error for `step`
        ("checking" in the search, "rechecking" when the device is taken)."""
        try:
            return self._capacity_fits(request, device, device_id)
        except CapacityError as err:
            raise AllocationError(
                f"claim {_claim_ref(self.claims[ci])}, request {request.name}: {step} "
                f"capacity for device {'/'.join(device_id)}: {err}"
            ) from err

    def _capacity_fits(
        self, request: SubRequest, device: DeviceRecord, device_id: DeviceID
    ) -> bool:
        if (
            not request.capacity_requests
            and device_id not in self.a.allocated.capacity
            and device_id not in self.allocating_capacity
            and all(
                c.request_policy is None and c.value.numerator >= 0
                for c in device.capacity.values()
            )
        ):
            # what `fits` finds for a device nothing consumes yet, asked for nothing in
            # particular, without a policy: each capacity consumed whole, which fits
            return True
        return fits(
            self.a.allocated.capacity.get(device_id, {}),
            request.capacity_requests,
            device.capacity,
            self.allocating_capacity.get(device_id),
        )

    def _selectable(
        self,
        key: tuple[int, int, int],
        data: _RequestData,
        slice_: SliceRecord,
        device: DeviceRecord,
        device_id: DeviceID,
    ) -> bool:
        """isSelectable: class selectors, then the request's, then per-device node
        selection; remembered per (device, request)."""
        match_key = (device_id, *key)
        known = self.matches.get(match_key)
        if known is not None:
            return known
        result = (
            self._selectors_match(key, device, device_id, data.klass, data.klass.selectors)
            and self._selectors_match(key, device, device_id, None, data.request.selectors)
            and (
                not slice_.per_device_node_selection
                or node_matches(self.node, device.node_name, device.all_nodes, device.node_selector)
            )
        )
        self.matches[match_key] = result
        return result

    def _selectors_match(
        self,
        key: tuple[int, int, int],
        device: DeviceRecord,
        device_id: DeviceID,
        klass: DeviceClassRecord | None,
        expressions: Sequence[str],
    ) -> bool:
        for i, expression in enumerate(expressions):
            try:
                selector = self.a.selectors.get(expression)
            except CompileError as err:
                owner = self._selector_owner(key, klass)
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {err}") from err
            try:
                if not selector.matches(device.selector_view):
                    return False
            except EvaluationError as err:
                raise AllocationError(
                    f"{self._selector_owner(key, klass)}: selector #{i} on device "
                    f"{'/'.join(device_id)}: CEL runtime error: {err}"
                ) from err
        return True

    def _selector_owner(self, key: tuple[int, int, int], klass: DeviceClassRecord | None) -> str:
        """Who a failing selector belongs to, in upstream's error."""
        if klass is not None:
            return f"class {klass.name}"
        return f"claim {_claim_ref(self.claims[key[0]])}"

    # --- one device (allocateDevice) ---------------------------------------------------

    def _allocate_device(
        self,
        ci: int,
        ri: int,
        si: int,
        device: DeviceRecord,
        device_id: DeviceID,
        slice_: SliceRecord,
        pool: Pool,
        must: bool,
        *,
        capacity_fits: bool = False,
    ) -> tuple[bool, Callable[[], None]]:
        """`capacity_fits`: the caller checked the capacity just before, in this state
        (the plain case skips the same check again)."""
        data = self.request_data[(ci, ri, si)]
        request = data.request
        admin = bool(request.admin_access)
        shareable = bool(device.allow_multiple_allocations)
        if (
            not (shareable or admin or device.consumes_counters or device.taints)
            and not (self.constraints[ci])
        ):
            return self._allocate_plain_device(ci, data, device, device_id, slice_, capacity_fits)
        nothing = _NOTHING
        if not shareable and admin and ci in self.allocating.get(device_id, ()):
            return False, nothing
        if not admin and self._in_use(device_id):
            return False, nothing
        skip_counters = shareable and self._capacity_in_use(device_id)
        counters_reserved = False
        if not skip_counters and device.consumes_counters:
            if not self._reserve_counters(device, pool):
                return False, nothing
            counters_reserved = True
        base = data.parent or request.name
        sub = request.name if data.parent else ""
        undo_steps: list[Callable[[], None]] = []

        def rollback() -> None:
            for step in reversed(undo_steps):
                step()
            undo_steps.clear()

        if counters_reserved:
            undo_steps.append(lambda: self._release_counters(device, pool))
        if self._taint_prevents(device, request):
            rollback()
            return False, nothing
        for constraint in self.constraints[ci]:
            if not constraint.add(base, sub, device, device_id[0]):
                rollback()
                if must:
                    raise AllocationError(
                        f"claim {_claim_ref(self.claims[ci])}, request {request.name}: cannot "
                        f"add device {'/'.join(device_id)} because a claim constraint would "
                        "not be satisfied"
                    )
                return False, nothing
            undo_steps.append(lambda c=constraint: c.remove(base, sub))  # type: ignore[misc]
        if not shareable:
            self.allocating.setdefault(device_id, set()).add(ci)
            undo_steps.append(lambda: self.allocating[device_id].discard(ci))
        consumed: dict[str, Fraction] = {}
        share_id = ""
        try:
            ok = self._fits_or_raise(ci, request, device, device_id, "rechecking")
        except AllocationError:
            rollback()
            raise
        if not ok:
            rollback()
            return False, nothing
        if shareable:
            try:
                consumed = consumed_by(request.capacity_requests, device.capacity)
            except CapacityError as err:
                rollback()
                raise AllocationError(
                    f"claim {_claim_ref(self.claims[ci])}, request {request.name}: computing "
                    f"consumed capacity for device {'/'.join(device_id)}: {err}"
                ) from err
            share_id = self.a.new_share_id()
            existed = device_id in self.allocating_capacity
            mine = self.allocating_capacity.setdefault(device_id, {})
            for name, amount in consumed.items():
                mine[name] = mine.get(name, Fraction(0)) + amount

            def release_capacity() -> None:
                held = self.allocating_capacity.get(device_id)
                if held is not None:
                    for name, amount in consumed.items():
                        if name in held:
                            held[name] -= amount
                    if all(v == 0 for v in held.values()):
                        del self.allocating_capacity[device_id]
                if existed and device_id not in self.allocating_capacity:
                    self.allocating_capacity[device_id] = {}

            undo_steps.append(release_capacity)
        results = self.results[ci]
        results.append(_taken(data, device, device_id, slice_, share_id, consumed or None, admin))
        size = len(results)
        undo_steps.append(lambda: results.__delitem__(slice(size - 1, None)))
        steps = list(undo_steps)

        def undo() -> None:
            for step in reversed(steps):
                step()

        return True, undo

    def _allocate_plain_device(
        self,
        ci: int,
        data: _RequestData,
        device: DeviceRecord,
        device_id: DeviceID,
        slice_: SliceRecord,
        capacity_fits: bool,
    ) -> tuple[bool, Callable[[], None]]:
        """_allocate_device for the common case, with the same outcome: a device that is
        not shared, consumes no counters and has no taints, for a request without admin
        access in a claim without constraints. Only the in-use check, the capacity check
        and the bookkeeping remain (no undo steps to collect)."""
        request = data.request
        if device_id in self.a.allocated.devices or self.allocating.get(device_id):
            return False, _NOTHING
        if not capacity_fits and not self._fits_or_raise(
            ci, request, device, device_id, "rechecking"
        ):
            return False, _NOTHING
        allocating = self.allocating.setdefault(device_id, set())
        allocating.add(ci)
        results = self.results[ci]
        results.append(_taken(data, device, device_id, slice_, "", None, False))
        size = len(results)

        def undo() -> None:
            del results[size - 1 :]
            allocating.discard(ci)

        return True, undo

    def _taint_prevents(self, device: DeviceRecord, request: SubRequest) -> bool:
        return taint_prevents(device, request)

    def _available(self, pool: Pool) -> dict[str, dict[str, Fraction]]:
        """The counters of a pool left by the devices other claims hold (computed once
        per allocator, as upstream's availableCounters)."""
        key = pool.id
        found = self.a._available_counters.get(key)
        if found is not None:
            return found
        available = {cs.name: dict(cs.counters) for cs in pool.counter_sets.values()}
        for slices in (pool.slices_on_node, pool.slices_not_on_node):
            for s in slices:
                for d in s.devices:
                    if not self.a.allocated.holds((s.driver, s.pool, d.name)):
                        continue
                    for c in d.consumes_counters:
                        per_set = available.get(c.counter_set, {})
                        for name, amount in c.counters.items():
                            if name in per_set:
                                per_set[name] -= amount
        self.a._available_counters[key] = available
        return available

    def _reserve_counters(self, device: DeviceRecord, pool: Pool) -> bool:
        """checkAvailableCounters: add the device's consumption, keep it when every
        counter of the pool still covers what is consumed."""
        available = self._available(pool)
        consumed = self.consumed_counters.setdefault(pool.id, {})
        for c in device.consumes_counters:
            per_set = consumed.setdefault(c.counter_set, {})
            for name, amount in c.counters.items():
                per_set[name] = per_set.get(name, Fraction(0)) + amount
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            for name, amount in counters.items():
                if amount < used.get(name, Fraction(0)):
                    self._release_counters(device, pool)
                    return False
        return True

    def _release_counters(self, device: DeviceRecord, pool: Pool) -> None:
        consumed = self.consumed_counters.get(pool.id, {})
        for c in device.consumes_counters:
            per_set = consumed.get(c.counter_set, {})
            for name, amount in c.counters.items():
                per_set[name] = per_set.get(name, Fraction(0)) - amount

    # --- the result ----------------------------------------------------------------------

    def _result(self, ci: int) -> AllocationResult:
        claim = self.claims[ci]
        devices = []
        for r in self.results[ci]:
            request = self._lookup_request(claim, r)
            devices.append(
                DeviceResult(
                    request=f"{r.parent}/{r.request}" if r.parent else r.request,
                    driver=r.id[0],
                    pool=r.id[1],
                    device=r.id[2],
                    admin_access=r.admin_access,
                    tolerations=tuple(t.raw for t in request.tolerations) if request else (),
                    share_id=r.share_id,
                    consumed_capacity=dict(r.consumed or {}),
                    binding_conditions=r.device.binding_conditions,
                    binding_failure_conditions=r.device.binding_failure_conditions,
                )
            )
        return AllocationResult(
            devices=tuple(devices),
            config=self._configs(ci),
            node_selector=self.node_selectors[ci],
        )

    @staticmethod
    def _lookup_request(claim: ClaimRecord, r: _Internal) -> SubRequest | None:
        name = r.parent or r.request
        for request in claim.requests:
            if request.name != name:
                continue
            if not r.parent:
                return request.exactly
            for sub in request.first_available:
                if sub.name == r.request:
                    return sub
        return None

    def _chosen(self, ci: int, ri: int) -> _RequestData:
        data = self.request_data[(ci, ri, 0)]
        if data.parent:
            data = self.request_data[(ci, ri, data.selected_subrequest)]
        return data

    def _subrequest_ref(self, ci: int, ri: int) -> str:
        """ "request/subrequest" of the alternative chosen, "" for a plain request."""
        data = self.request_data[(ci, ri, 0)]
        if not data.parent:
            return ""
        request = self.claims[ci].requests[ri]
        return f"{request.name}/{request.first_available[data.selected_subrequest].name}"

    def _configs(self, ci: int) -> tuple[ConfigResult, ...]:
        claim = self.claims[ci]
        configs: list[ConfigResult] = []
        by_class: dict[str, tuple[int, int]] = {}
        for ri in range(len(claim.requests)):
            data = self._chosen(ci, ri)
            span = by_class.get(data.klass.name)
            if span is not None:
                for i in range(*span):
                    c = configs[i]
                    configs[i] = ConfigResult(c.source, (*(c.requests or ()), data.name), c.raw)
                continue
            first = len(configs)
            for raw in data.klass.config:
                configs.append(ConfigResult("FromClass", (data.name,), raw))
            by_class[data.klass.name] = (first, len(configs))
        for config in claim.config:
            if not config.requests:
                configs.append(ConfigResult("FromClaim", (), config.raw))
                continue
            for ri, request in enumerate(claim.requests):
                if request.name in config.requests:
                    configs.append(ConfigResult("FromClaim", config.requests, config.raw))
                    break
                data = self.request_data[(ci, ri, 0)]
                if not data.parent:
                    continue
                sub = request.first_available[data.selected_subrequest]
                if f"{request.name}/{sub.name}" in config.requests:
                    configs.append(ConfigResult("FromClaim", config.requests, config.raw))
                    break
        out = []
        for c in configs:
            requests = c.requests
            if requests and all(
                request.name in requests or self._subrequest_ref(ci, ri) in requests
                for ri, request in enumerate(claim.requests)
            ):
                requests = None  # applies to every request: written without a list
            out.append(ConfigResult(c.source, requests, c.raw))
        return tuple(out)

    def _node_selector(self, results: list[_Internal]) -> Mapping[str, Any] | None:
        """createNodeSelector: pinned to this node when any device is node-local (or binds
        to the node), else the requirements of the slices' node selectors merged into
        one term, else none."""
        fields: list[Mapping[str, Any]] = []
        expressions: list[Mapping[str, Any]] = []
        for r in results:
            if r.slice.per_device_node_selection:
                node_name, selector_raw = r.device.node_name, r.device.node_selector_raw
            else:
                node_name, selector_raw = r.slice.node_name, r.slice.node_selector_raw
            if node_name or r.device.binds_to_node:
                return {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {
                                    "key": "metadata.name",
                                    "operator": "In",
                                    "values": [self.node.name],
                                }
                            ]
                        }
                    ]
                }
            if selector_raw is not None:
                terms = selector_raw.get("nodeSelectorTerms") or []
                if len(terms) > 1:
                    raise AllocationError(
                        f"create NodeSelector for claim {self.claims[0].name}: unsupported "
                        f"ResourceSlice.NodeSelector with {len(terms)} terms"
                    )
                if terms:
                    _add_requirements(terms[0].get("matchFields") or [], fields)
                    _add_requirements(terms[0].get("matchExpressions") or [], expressions)
        if not fields and not expressions:
            return None
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = expressions
        if fields:
            term["matchFields"] = fields
        return {"nodeSelectorTerms": [term]}


def _add_requirements(source: Sequence[Mapping[str, Any]], into: list[Mapping[str, Any]]) -> None:
    """addNewNodeSelectorRequirements: a requirement is kept once (same key, operator
    and set of values)."""
    for requirement in source:
        values = set(requirement.get("values") or ())
        if not any(
            r.get("key") == requirement.get("key")
            and r.get("operator") == requirement.get("operator")
            and set(r.get("values") or ()) == values
            for r in into
        ):
            into.append(requirement)
