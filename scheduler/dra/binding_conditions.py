"""Device binding conditions (DRADeviceBindingConditions and DRAResourceClaimDeviceStatus,
both on in v1.37.2): a device may name conditions its driver must report True in the
claim's status.devices before a pod using it binds (an attachment, a fabric
configuration), and conditions that mean it failed. Upstream's PreBind waits for them,
polling every 5 s for up to DynamicResourcesArgs.bindingTimeout (600 s by default);
its Filter treats an allocated claim whose device failed, or waited past the timeout,
as not available (kubernetes@v1.37.2 pkg/scheduler/framework/plugins/dynamicresources/
dynamicresources.go: isClaimReadyForBinding, isClaimTimeout, isPodReadyForBinding).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from scheduler.dra.resources import ClaimRecord

# kube-scheduler config/v1 types.go DynamicResourcesBindingTimeoutDefault
BINDING_TIMEOUT_SECONDS = 600.0
POLL_SECONDS = 5.0  # PreBind's wait.PollUntilContextTimeout interval


class DeviceBindingError(Exception):
    """The pod may not bind: upstream's ErrDeviceBindingFailed / ErrDeviceBindingTimeout
    with its text."""


def claim_ready(claim: ClaimRecord) -> bool:
    """isClaimReadyForBinding: every device with binding conditions has them all True;
    raises DeviceBindingError when one of its failure conditions is True."""
    if not claim.allocated:
        return False
    for device in claim.allocated_devices:
        if not device.binding_conditions:
            continue
        conditions = claim.device_conditions.get((device.driver, device.pool, device.device))
        if conditions is None:
            return False
        for name in device.binding_failure_conditions:
            failed = conditions.get(name)
            if failed is not None and failed.status == "True":
                # Go's %q of the message: a quoted string, escapes as JSON writes them
                message = json.dumps(failed.message, ensure_ascii=False)
                raise DeviceBindingError(
                    f"device binding failed: claim={claim.name}, reason={failed.reason}, "
                    f"message={message}"
                )
        for name in device.binding_conditions:
            met = conditions.get(name)
            if met is None or met.status != "True":
                return False
    return True


def claim_timed_out(claim: ClaimRecord, now: float) -> bool:
    """isClaimTimeout: allocated more than the binding timeout ago, with a device that
    has binding conditions."""
    if not claim.allocated or claim.allocation_timestamp is None:
        return False
    return any(d.binding_conditions for d in claim.allocated_devices) and (
        claim.allocation_timestamp + BINDING_TIMEOUT_SECONDS < now
    )


def has_binding_conditions(claims: Iterable[ClaimRecord]) -> bool:
    return any(d.binding_conditions for c in claims if c.allocated for d in c.allocated_devices)
