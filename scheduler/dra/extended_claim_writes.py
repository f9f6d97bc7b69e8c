"""The API writes of extended resources backed by DRA, each as upstream's plugin makes
it (kubernetes@v1.37.2 pkg/scheduler/framework/plugins/dynamicresources/
extendeddynamicresources.go): PreBind creates the scheduler's claim for the pod
(createExtendedResourceClaimInAPI) and, once it is allocated and reserved, patches the
pod's status.extendedResourceClaimStatus (patchPodExtendedResourceClaimStatus);
PostFilter and Unreserve delete a claim that was written but not used (deleteClaim:
the finalizer off first, retried on conflict, then the delete).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import random
from collections.abc import Sequence
from typing import Any

from scheduler.client.errors import Conflict, NotFound
from scheduler.dra.claim_writes import FINALIZER, ClaimWriteError, claim_ref
from scheduler.dra.extended_claim import for_create
from scheduler.dra.extended_requests import RequestMapping
from scheduler.dra.resources import ClaimRecord, claim_from_dict
from scheduler.framework.handle import ResourceClaimAPI
from scheduler.model.pod import PodInfo

log = logging.getLogger(__name__)

# client-go retry.DefaultRetry: 5 steps of 10 ms, jitter 0.1
_RETRY_STEPS = 5
_RETRY_DELAY = 0.01


class ExtendedClaimWrites:
    def __init__(self, api: ResourceClaimAPI) -> None:
        self._api = api

    async def create(self, node_claim: ClaimRecord) -> ClaimRecord:
        """The node's copy of the claim, created; the API server names it."""
        try:
            created = await self._api.create_resource_claim(for_create(node_claim))
        except Exception as exc:
            # upstream formats the claim after clearing its name: "<namespace>/"
            raise ClaimWriteError(
                f"create claim for extended resources {node_claim.namespace}/: {exc}"
            ) from exc
        return claim_from_dict(created)

    async def record_in_pod(
        self, pod: PodInfo, claim: ClaimRecord, mappings: Sequence[RequestMapping]
    ) -> None:
        """status.extendedResourceClaimStatus: which request serves which container's
        resource, and the claim's name."""
        if not mappings:
            raise ClaimWriteError(
                f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} "
                "ExtendedResourceClaimStatus"
            )
        patch = {
            "status": {
                "extendedResourceClaimStatus": {
                    "requestMappings": [m.as_api() for m in mappings],
                    "resourceClaimName": claim.name,
                }
            }
        }
        try:
            await self._api.patch_pod_status(pod.namespace, pod.name, patch)
        except Exception as exc:
            raise ClaimWriteError(
                f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {exc}"
            ) from exc

    async def delete(self, claim: ClaimRecord) -> None:
        """deleteClaim, in the background (upstream runs it inside PostFilter and
        Unreserve); a failure is logged and the pod's next cycle finds the claim again."""
        try:
            await self._delete(claim)
        except Exception:
            log.exception("delete claim=%s", claim_ref(claim))

    async def _delete(self, claim: ClaimRecord) -> None:
        ref = claim_ref(claim)
        raw: dict[str, Any] = copy.deepcopy(dict(claim.raw))
        for attempt in range(_RETRY_STEPS):
            if attempt:
                await asyncio.sleep(_RETRY_DELAY * (1 + 0.1 * random.random()))
                try:
                    raw = await self._api.get_resource_claim(claim.namespace, claim.name)
                except Exception as exc:
                    raise ClaimWriteError(f"get resourceclaim {ref}: {exc}") from exc
            meta = raw.setdefault("metadata", {})
            finalizers = list(meta.get("finalizers") or ())
            if FINALIZER in finalizers:  # the first occurrence, as slices.Index finds it
                finalizers.remove(FINALIZER)
            meta["finalizers"] = finalizers
            try:
                await self._api.update_resource_claim(raw)
                break
            except Conflict:
                if attempt == _RETRY_STEPS - 1:
                    raise
            except Exception as exc:
                raise ClaimWriteError(f"update resourceclaim {ref}: {exc}") from exc
        with contextlib.suppress(NotFound):  # gone already: done
            await self._api.delete_resource_claim(claim.namespace, claim.name)
