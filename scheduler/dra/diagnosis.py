"""Why a node has no devices for a pod's claims, request by request: what explain shows
beside DynamicResources' one-line verdict ("cannot allocate all claims", upstream's
words, which name neither the claim nor the request).

For every request of a claim still to allocate (each alternative of a `firstAvailable`
request), the devices of the node's pools are counted in the order the allocator rules
them out: not selected by the class or the request's CEL selectors, held by another claim,
tainted (NoSchedule or NoExecute, not tolerated), and free. The count is a diagnosis, not
the decision: free devices may still fail a constraint (matchAttribute,
distinctAttribute), a counter or a capacity request, which only the allocator's search
weighs; the allocator's verdict is the one the scheduler acts on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.dra.allocator import AllocatedState, taint_prevents
from scheduler.dra.pools import Node, SliceIndex, gather_pools, node_matches
from scheduler.dra.resources import (
    ALLOCATION_MODE_ALL,
    ClaimRecord,
    DeviceClassRecord,
    DeviceRecord,
    SliceRecord,
    SubRequest,
)
from scheduler.dra.selector import CompileError, EvaluationError
from scheduler.dra.selector_cache import SelectorCache


@dataclass(frozen=True, slots=True)
class RequestReport:
    claim: str  # namespace/name
    request: str  # "request" or "request/alternative"
    wanted: str  # a count, or "all"
    devices: int  # devices in the node's complete pools
    not_selected: int
    in_use: int
    tainted: int
    free: int
    problem: str = ""  # a class that does not exist, a selector that errs

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "claim": self.claim,
            "request": self.request,
            "wanted": self.wanted,
            "devices": self.devices,
            "notSelected": self.not_selected,
            "inUse": self.in_use,
            "tainted": self.tainted,
            "free": self.free,
        }
        if self.problem:
            out["problem"] = self.problem
        return out


def _selected(
    selectors: SelectorCache, expressions: Sequence[str], device: DeviceRecord
) -> bool | str:
    """True/False, or the problem's text (a selector that does not compile or errs)."""
    for i, expression in enumerate(expressions):
        try:
            if not selectors.get(expression).matches(device.selector_view):
                return False
        except (CompileError, EvaluationError) as err:
            return f"selector #{i}: {err}"
    return True


def _report(
    claim: ClaimRecord,
    name: str,
    request: SubRequest,
    devices: Sequence[tuple[tuple[str, str, str], DeviceRecord]],
    classes: Mapping[str, DeviceClassRecord],
    held: AllocatedState,
    selectors: SelectorCache,
) -> RequestReport:
    wanted = "all" if request.allocation_mode == ALLOCATION_MODE_ALL else str(request.count)
    ref = f"{claim.namespace}/{claim.name}"
    klass = classes.get(request.device_class_name)
    if klass is None:
        problem = f"device class {request.device_class_name} does not exist"
        return RequestReport(ref, name, wanted, len(devices), 0, 0, 0, 0, problem)
    not_selected = in_use = tainted = free = 0
    problem = ""
    for device_id, device in devices:
        chosen = _selected(selectors, klass.selectors, device)
        if chosen is True:
            chosen = _selected(selectors, request.selectors, device)
        if chosen is not True:
            not_selected += 1
            if isinstance(chosen, str) and not problem:
                problem = f"{'/'.join(device_id)}: {chosen}"
        elif not request.admin_access and held.holds(device_id):
            in_use += 1
        elif taint_prevents(device, request):
            tainted += 1
        else:
            free += 1
    return RequestReport(
        ref, name, wanted, len(devices), not_selected, in_use, tainted, free, problem
    )


def request_reports(
    node: Node,
    claims: Sequence[ClaimRecord],
    slices: Sequence[SliceRecord],
    classes: Mapping[str, DeviceClassRecord],
    held: AllocatedState,
    selectors: SelectorCache,
) -> list[RequestReport]:
    """One report per request (per alternative) of the unallocated `claims` on `node`."""
    devices = [
        ((s.driver, s.pool, d.name), d)
        for pool in gather_pools(SliceIndex.of(slices), node)
        if not pool.incomplete and not pool.invalid
        for s in pool.slices_on_node
        for d in s.devices
        # a slice with per-device node selection: only the devices of this node
        if not s.per_device_node_selection
        or node_matches(node, d.node_name, d.all_nodes, d.node_selector)
    ]
    reports = []
    for claim in claims:
        if claim.allocated:
            continue
        for request in claim.requests:
            subs = (
                [(request.name, request.exactly)]
                if request.exactly is not None
                else [(f"{request.name}/{sub.name}", sub) for sub in request.first_available]
            )
            for name, sub in subs:
                if sub is not None:
                    reports.append(_report(claim, name, sub, devices, classes, held, selectors))
    return reports
