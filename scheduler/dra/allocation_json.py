"""An allocation result as the API writes it: resource.k8s.io/v1 AllocationResult
(k8s.io/api@v0.37.2 resource/v1/types.go), the value PreBind puts in a claim's
status.allocation."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from scheduler.dra.allocator import AllocationResult, DeviceResult

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))
_SUB = (("m", 10**3), ("u", 10**6), ("n", 10**9))


def format_quantity(value: Fraction) -> str:
    """A quantity string the API server reads back as exactly `value`: a whole number
    with the largest binary suffix that divides it, else the largest decimal one, and a
    fraction in milli, micro or nano units (rounded up to a nano, as resource.Quantity
    does). The string may differ from the one upstream writes for the same amount (its
    suffix follows the format of the request it came from); the amount is the same."""
    if value.denominator == 1:
        n = value.numerator
        if n == 0:
            return "0"
        for suffix, unit in _BINARY:
            if n % unit == 0:
                return f"{n // unit}{suffix}"
        for suffix, unit in _DECIMAL:
            if n % unit == 0:
                return f"{n // unit}{suffix}"
        return str(n)
    for suffix, unit in _SUB:
        scaled = value * unit
        if scaled.denominator == 1 or suffix == "n":
            return f"{-(-scaled.numerator // scaled.denominator)}{suffix}"
    raise AssertionError("unreachable")


def _device(d: DeviceResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "request": d.request,
        "driver": d.driver,
        "pool": d.pool,
        "device": d.device,
    }
    if d.admin_access is not None:
        out["adminAccess"] = d.admin_access
    if d.tolerations:
        out["tolerations"] = [dict(t) for t in d.tolerations]
    if d.binding_conditions:
        out["bindingConditions"] = list(d.binding_conditions)
    if d.binding_failure_conditions:
        out["bindingFailureConditions"] = list(d.binding_failure_conditions)
    if d.share_id:
        out["shareID"] = d.share_id
    if d.consumed_capacity:
        out["consumedCapacity"] = {k: format_quantity(v) for k, v in d.consumed_capacity.items()}
    return out


def allocation_to_api(result: AllocationResult, timestamp: str | None) -> dict[str, Any]:
    """status.allocation for `result`; `timestamp` (RFC 3339) is allocationTimestamp,
    which v1.37.2's PreBind sets when device binding conditions are on (they are)."""
    devices: dict[str, Any] = {"results": [_device(d) for d in result.devices]}
    if result.config:
        devices["config"] = [
            {
                "source": c.source,
                **({"requests": list(c.requests)} if c.requests else {}),
                **c.raw,
            }
            for c in result.config
        ]
    out: dict[str, Any] = {"devices": devices}
    if result.node_selector is not None:
        out["nodeSelector"] = result.node_selector
    if timestamp is not None:
        out["allocationTimestamp"] = timestamp
    return out
