"""Slim records for the volume objects VolumeBinding-lite reads: PVCs, PVs and
StorageClasses. The client layer builds informers with these transforms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.pod import parse_time
from scheduler.model.selectors import NodeSelector, parse_node_selector

BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


@dataclass(frozen=True, slots=True, kw_only=True)
class PVCInfo:
    namespace: str
    name: str
    volume_name: str = ""  # spec.volumeName: bound when set
    storage_class_name: str | None = None
    phase: str = "Pending"
    deletion_timestamp: float | None = None
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PVInfo:
    name: str
    node_affinity: NodeSelector | None = None  # spec.nodeAffinity.required
    claim_ref: str = ""  # "ns/name"
    phase: str = "Available"
    resource_version: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageClassInfo:
    name: str
    volume_binding_mode: str = BINDING_IMMEDIATE
    provisioner: str = ""


def _meta(raw: Mapping[str, Any], kind: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidObject("", f"{kind} must be an object")
    meta = raw.get("metadata") or {}
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise InvalidObject("metadata.name", "must be a non-empty string")
    return dict(meta)


def pvc_from_dict(raw: Mapping[str, Any]) -> PVCInfo:
    meta = _meta(raw, "persistentvolumeclaim")
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    return PVCInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        volume_name=str(spec.get("volumeName") or ""),
        storage_class_name=spec.get("storageClassName"),
        phase=str(status.get("phase") or "Pending"),
        deletion_timestamp=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def pv_from_dict(raw: Mapping[str, Any]) -> PVInfo:
    meta = _meta(raw, "persistentvolume")
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    na = (spec.get("nodeAffinity") or {}).get("required")
    ref = spec.get("claimRef") or {}
    return PVInfo(
        name=meta["name"],
        # lazy, as upstream's CheckNodeAffinity (MatchNodeSelectorTerms): a term that
        # does not parse matches no node, the others still do; the PV stays visible
        node_affinity=(
            parse_node_selector(na, "spec.nodeAffinity.required", strict=False) if na else None
        ),
        claim_ref=f"{ref.get('namespace')}/{ref.get('name')}" if ref.get("name") else "",
        phase=str(status.get("phase") or "Available"),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def storage_class_from_dict(raw: Mapping[str, Any]) -> StorageClassInfo:
    meta = _meta(raw, "storageclass")
    return StorageClassInfo(
        name=meta["name"],
        volume_binding_mode=str(raw.get("volumeBindingMode") or BINDING_IMMEDIATE),
        provisioner=str(raw.get("provisioner") or ""),
    )
