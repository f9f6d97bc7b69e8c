"""What DynamicResources writes to ResourceClaims, each write as upstream's plugin makes
it (kubernetes@v1.37.2 pkg/scheduler/framework/plugins/dynamicresources/
dynamicresources.go): PreBind's bindClaim (finalizer, allocation, the pod's reservation,
retried on conflict), Unreserve's removal of a reservation, PostFilter's deallocation.
Every write goes through the handle's ResourceClaimAPI (fenced by the lease like a
bind); PreBind's written copy is assumed in the device state at once, as upstream's
AssumeClaimAfterAPICall.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
from datetime import UTC, datetime
from typing import Any

from scheduler.client.errors import Conflict
from scheduler.dra.allocation_json import allocation_to_api
from scheduler.dra.allocator import AllocationResult
from scheduler.dra.device_state import DeviceState
from scheduler.dra.resources import ClaimRecord, claim_from_dict
from scheduler.framework.handle import ResourceClaimAPI
from scheduler.model.pod import PodInfo

log = logging.getLogger(__name__)

FINALIZER = "resource.kubernetes.io/delete-protection"  # resourceapi.Finalizer
# client-go retry.DefaultRetry: 5 steps of 10 ms, jitter 0.1
_RETRY_STEPS = 5
_RETRY_DELAY = 0.01


class ClaimWriteError(Exception):
    """PreBind could not write a claim; the text is upstream's."""


def claim_ref(claim: ClaimRecord) -> str:
    """klog.KObj."""
    return f"{claim.namespace}/{claim.name}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ClaimWrites:
    def __init__(self, api: ResourceClaimAPI, devices: DeviceState) -> None:
        self._api = api
        self._devices = devices

    async def bind(
        self, claim: ClaimRecord, result: AllocationResult | None, pod: PodInfo
    ) -> ClaimRecord:
        """bindClaim: add the finalizer (when allocating `result`), the allocation and the
        pod's reservation, retrying on conflict with a fresh copy (retry.RetryOnConflict).
        Returns the claim as written."""
        api = self._api
        raw: dict[str, Any] = copy.deepcopy(dict(claim.raw))
        for attempt in range(_RETRY_STEPS):
            if attempt:
                await asyncio.sleep(_RETRY_DELAY * (1 + 0.1 * random.random()))
                raw = await api.get_resource_claim(claim.namespace, claim.name)
            try:
                updated = await self._write(raw, claim, result, pod)
            except Conflict:
                if attempt == _RETRY_STEPS - 1:
                    raise
                continue
            record = claim_from_dict(updated)
            self._devices.assume_written(record)
            return record
        raise AssertionError("unreachable")

    async def _write(
        self,
        raw: dict[str, Any],
        claim: ClaimRecord,
        result: AllocationResult | None,
        pod: PodInfo,
    ) -> dict[str, Any]:
        """One attempt of bindClaim's update; Conflict is left to the caller's retry."""
        api = self._api
        ref = claim_ref(claim)
        meta = raw.setdefault("metadata", {})
        status = raw.setdefault("status", {})
        if meta.get("deletionTimestamp"):
            raise ClaimWriteError(f"claim {ref} got deleted in the meantime")
        if result is not None:
            if status.get("allocation") is not None:
                raise ClaimWriteError(f"claim {ref} got allocated elsewhere in the meantime")
            finalizers = list(meta.get("finalizers") or [])
            if FINALIZER not in finalizers:
                meta["finalizers"] = [*finalizers, FINALIZER]
                try:
                    raw = await api.update_resource_claim(raw)
                except Conflict:
                    raise
                except Exception as exc:
                    raise ClaimWriteError(f"add finalizer to claim {ref}: {exc}") from exc
                status = raw.setdefault("status", {})
            status["allocation"] = allocation_to_api(result, None)
        status["reservedFor"] = [
            *(status.get("reservedFor") or []),
            {"resource": "pods", "name": pod.name, "uid": pod.uid},
        ]
        # DRADeviceBindingConditions and DRAResourceClaimDeviceStatus are on in v1.37.2
        if status.get("allocation") is None:
            raise ClaimWriteError(f"claim {ref} got deallocated elsewhere in the meantime")
        status["allocation"].setdefault("allocationTimestamp", _now())
        try:
            return await api.update_resource_claim_status(raw)
        except Conflict:
            raise
        except Exception as exc:
            what = "add allocation and reservation to" if result else "add reservation to"
            raise ClaimWriteError(f"{what} claim {ref}: {exc}") from exc

    async def deallocate(self, claim: ClaimRecord) -> None:
        """PostFilter's deallocation: status without allocation, reservations and device
        status (upstream's UpdateStatus); a failure is logged, the pod is retried."""
        raw: dict[str, Any] = copy.deepcopy(dict(claim.raw))
        status = raw.setdefault("status", {})
        for key in ("reservedFor", "allocation", "devices"):
            status.pop(key, None)
        try:
            await self._api.update_resource_claim_status(raw)
        except Exception:
            log.exception("deallocate claim=%s", claim_ref(claim))

    async def unreserve(self, claim: ClaimRecord, pod: PodInfo) -> None:
        """Unreserve's removal of the pod from the claim's reservedFor."""
        try:
            await self._api.unreserve_resource_claim(
                claim.namespace, claim.name, claim.uid, pod.uid
            )
        except Exception:
            # upstream logs it too; the claim's next consumer sees the stale entry, and
            # the resourceclaim controller drops entries of pods that are gone
            log.exception("unreserve claim=%s pod=%s", claim_ref(claim), pod.key)
