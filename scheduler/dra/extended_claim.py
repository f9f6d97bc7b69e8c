"""The ResourceClaim the scheduler itself makes for a pod's extended resources backed by
DRA (kubernetes@v1.37.2 pkg/scheduler/framework/plugins/dynamicresources/
extendeddynamicresources.go): found again if an earlier cycle wrote it, else held in
memory under a name no real claim can have until PreBind creates it, and per node a copy
with the device requests that node leaves to DRA.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from scheduler.dra.class_resolver import DeviceClassResolver, is_dra_extended_resource_name
from scheduler.dra.extended_requests import ExtendedDeviceRequest
from scheduler.dra.resources import ClaimRecord, claim_spec_from_dict
from scheduler.model.pod import PodInfo

# specialClaimInMemName: not a valid object name, so no claim in the API has it
IN_MEMORY_NAME = "<extended-resources>"
# resourceapi.ExtendedResourceClaimAnnotation (its one valid value is "true")
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def dra_extended_requests(pod: PodInfo) -> dict[str, int]:
    """The pod's requests that may be extended resources backed by DRA (upstream's
    podScalarResources, filtered by IsDRAExtendedResourceName as every reader does):
    non-zero amounts of domain-qualified names."""
    return {
        r: amount
        for r, amount in pod.requests.items()
        if amount and "/" in r and is_dra_extended_resource_name(r)
    }


def has_class_mapped_resource(pod: PodInfo, resolver: DeviceClassResolver) -> bool:
    """hasDeviceClassMappedExtendedResource."""
    return bool(resolver) and any(
        resolver.device_class(r) is not None for r in dra_extended_requests(pod)
    )


def _controlled_by(raw: Mapping[str, Any], pod: PodInfo) -> bool:
    meta = raw.get("metadata") or {}
    if (meta.get("annotations") or {}).get(ANNOTATION) != "true":
        return False
    return any(
        o.get("name") == pod.name and o.get("controller") is True and o.get("uid") == pod.uid
        for o in meta.get("ownerReferences") or ()
        if isinstance(o, dict)
    )


def find_extended_claim(pod: PodInfo, claims: Iterable[ClaimRecord]) -> ClaimRecord | None:
    """findExtendedResourceClaim over every claim the cache holds (any namespace, as
    upstream lists them): the first with the annotation whose controller is the pod."""
    for claim in claims:
        if _controlled_by(claim.raw, pod):
            return claim
    return None


def in_memory_claim(pod: PodInfo) -> ClaimRecord:
    """The claim as PreFilter makes it: no requests yet, a temporary uid (the key of its
    pending allocation until the API server gives it a real one), the pod as controller,
    and the name the API server will generate from `<pod>-extended-resources-`."""
    raw: dict[str, Any] = {
        "metadata": {
            "name": IN_MEMORY_NAME,
            "generateName": f"{pod.name}-extended-resources-",
            "namespace": pod.namespace,
            "uid": str(uuid.uuid4()),
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod.name,
                    "uid": pod.uid,
                    "controller": True,
                }
            ],
            "annotations": {ANNOTATION: "true"},
        },
        "spec": {"devices": {}},
    }
    return ClaimRecord(
        namespace=pod.namespace,
        name=IN_MEMORY_NAME,
        uid=raw["metadata"]["uid"],
        resource_version="",
        deleting=False,
        requests=(),
        constraints=(),
        config=(),
        controller_uid=pod.uid,
        raw=raw,
    )


def is_in_memory(claim: ClaimRecord) -> bool:
    """isSpecialClaimName."""
    return claim.name == IN_MEMORY_NAME


def has_requests(claim: ClaimRecord) -> bool:
    """Spec.Devices.Requests != nil: written by an earlier cycle (the in-memory claim
    has none; a node's copy may have an empty list, which counts as none too, as Go's
    nil slice from an empty construction)."""
    return bool(claim.requests)


def for_node(claim: ClaimRecord, requests: Sequence[ExtendedDeviceRequest]) -> ClaimRecord:
    """The node's copy of the claim with the device requests that node leaves to DRA."""
    raw = copy.deepcopy(dict(claim.raw))
    devices: dict[str, Any] = {}
    if requests:
        devices["requests"] = [r.as_api() for r in requests]
    raw["spec"] = {"devices": devices}
    parsed, constraints, config = claim_spec_from_dict(raw["spec"])
    return replace(claim, requests=parsed, constraints=constraints, config=config, raw=raw)


def for_create(claim: ClaimRecord) -> dict[str, Any]:
    """What PreBind sends to create the node's copy: without name, uid and status (the
    API server generates the name from generateName)."""
    raw = copy.deepcopy(dict(claim.raw))
    meta = raw.setdefault("metadata", {})
    meta.pop("name", None)
    meta.pop("uid", None)
    meta.pop("resourceVersion", None)
    raw.pop("status", None)
    return raw


class ResourceDoesNotFit(Exception):
    """A node neither advertises one of the pod's extended resources nor is the resource
    backed by a DeviceClass; the text is upstream's."""


def node_extended_resources(
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
    resolver: DeviceClassResolver,
) -> dict[str, int]:
    """filterExtendedResources' split on one node: the resources it leaves to DRA (a
    class backs them and the node's allocatable has none). A resource the node does
    not list and no class backs raises ResourceDoesNotFit; the rest is the device
    plugin's, checked by NodeResourcesFit."""
    to_dra: dict[str, int] = {}
    for resource, amount in requested.items():
        held = allocatable.get(resource)
        if resolver.device_class(resource) is not None and not held:
            to_dra[resource] = amount
        elif held is None:
            raise ResourceDoesNotFit("cannot fit resource")
    return to_dra
