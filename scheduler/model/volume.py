"""Slim records for the volume objects the volume plugins read: PVCs, PVs and
StorageClasses. The client layer builds informers with these transforms.

PVC and PV records keep the raw object (`raw`): VolumeBinding writes them back with an
update (PUT) exactly as upstream's binder does, so the write carries the
resourceVersion it decided on and a concurrent change answers 409.

Storage amounts are whole bytes, rounded up (resource.Quantity.Value()).
The helpers follow k8s.io/component-helpers/storage/volume (helpers.go, pv_helpers.go).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import object_name, parse_time
from scheduler.model.quantity import parse_int
from scheduler.model.selectors import (
    LabelSelector,
    NodeSelector,
    parse_label_selector,
    parse_node_selector,
)

BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

# annotations (component-helpers/storage/volume/pv_helpers.go)
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
VOLUME_FILESYSTEM = "Filesystem"
CLAIM_LOST = "Lost"
VOLUME_AVAILABLE = "Available"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PVCInfo:
    namespace: str
    name: str
    uid: str = ""
    volume_name: str = ""  # spec.volumeName
    # spec.storageClassName as given (None: unset); `storage_class` is the effective one
    storage_class_name: str | None = None
    storage_class: str = ""  # upstream GetPersistentVolumeClaimClass
    access_modes: tuple[str, ...] = ()
    request_storage: int | None = None  # spec.resources.requests.storage, bytes
    volume_mode: str = VOLUME_FILESYSTEM
    selector: LabelSelector | None = None  # spec.selector; None: any volume
    attributes_class: str = ""  # spec.volumeAttributesClassName
    annotations: Mapping[str, str] = field(default_factory=dict)
    controller_uid: str = ""  # uid of the controlling owner (ephemeral claims: the pod)
    phase: str = "Pending"
    deletion_timestamp: float | None = None
    resource_version: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def selected_node(self) -> str | None:
        return self.annotations.get(ANN_SELECTED_NODE)

    @property
    def fully_bound(self) -> bool:
        """upstream isPVCFullyBound: a volume named and the PV controller done with it."""
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.annotations

    def with_selected_node(self, node: str) -> PVCInfo:
        """The claim as the binder assumes it: annotated for the provisioner."""
        raw = copy.deepcopy(dict(self.raw))
        raw.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node
        return pvc_from_dict(raw)


@dataclass(frozen=True, slots=True, kw_only=True)
class PVInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    storage_class: str = ""  # upstream GetPersistentVolumeClass
    capacity: int = 0  # spec.capacity.storage, bytes
    access_modes: tuple[str, ...] = ()
    volume_mode: str = VOLUME_FILESYSTEM
    attributes_class: str = ""
    node_affinity: NodeSelector | None = None  # spec.nodeAffinity.required
    claim: ClaimRef | None = None  # spec.claimRef
    csi_driver: str = ""  # spec.csi.driver
    csi_handle: str = ""  # spec.csi.volumeHandle
    phase: str = VOLUME_AVAILABLE
    deletion_timestamp: float | None = None
    resource_version: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def bound_to(self, pvc: PVCInfo) -> bool:
        """upstream IsVolumeBoundToClaim."""
        c = self.claim
        if c is None or c.name != pvc.name or c.namespace != pvc.namespace:
            return False
        return not c.uid or c.uid == pvc.uid

    def matches_node(self, labels: Mapping[str, str]) -> bool:
        """upstream CheckNodeAffinity (on labels only, as upstream: no node name)."""
        return self.node_affinity is None or self.node_affinity.matches(labels, "")

    def bound_copy(self, pvc: PVCInfo) -> tuple[PVInfo, bool]:
        """upstream GetBindVolumeToClaim: the volume with its claimRef set to `pvc`
        (and bound-by-controller when the binding is ours); dirty when anything changed."""
        set_by_us = not self.bound_to(pvc)
        raw = copy.deepcopy(dict(self.raw))
        dirty = False
        c = self.claim
        if c is None or (c.name, c.namespace, c.uid) != (pvc.name, pvc.namespace, pvc.uid):
            raw.setdefault("spec", {})["claimRef"] = {
                "kind": "PersistentVolumeClaim",
                "namespace": pvc.namespace,
                "name": pvc.name,
                "uid": pvc.uid,
                "apiVersion": "v1",
                "resourceVersion": pvc.resource_version,
            }
            dirty = True
        anns = raw.setdefault("metadata", {}).setdefault("annotations", {})
        if set_by_us and ANN_BOUND_BY_CONTROLLER not in anns:
            anns[ANN_BOUND_BY_CONTROLLER] = "yes"
            dirty = True
        return (pv_from_dict(raw) if dirty else self), dirty


@dataclass(frozen=True, slots=True)
class TopologyTerm:
    """One allowedTopologies term: every (key, values) must match the node's labels."""

    expressions: tuple[tuple[str, frozenset[str]], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(k in labels and labels[k] in vs for k, vs in self.expressions)


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageClassInfo:
    name: str
    volume_binding_mode: str = BINDING_IMMEDIATE
    provisioner: str = ""
    allowed_topologies: tuple[TopologyTerm, ...] = ()

    def allows(self, labels: Mapping[str, str]) -> bool:
        """upstream MatchTopologySelectorTerms: no terms match everything."""
        if not self.allowed_topologies:
            return True
        return any(t.matches(labels) for t in self.allowed_topologies)


def _str_map(raw: Any, path: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidObject(path, "must be a map of strings")
    return {str(k): str(v) for k, v in raw.items()}


def _modes(raw: Any, path: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidObject(path, "must be a list")
    return tuple(str(m) for m in raw)


def _storage(raw: Any, path: str) -> int | None:
    if not isinstance(raw, Mapping) or raw.get("storage") is None:
        return None
    try:
        return parse_int(raw["storage"])
    except (ValueError, TypeError) as exc:
        raise InvalidObject(f"{path}.storage", f"not a quantity: {exc}") from exc


def _controller_uid(meta: Mapping[str, Any]) -> str:
    for o in meta.get("ownerReferences") or []:
        if isinstance(o, Mapping) and o.get("controller"):
            return str(o.get("uid") or "")
    return ""


def pvc_from_dict(raw: Mapping[str, Any]) -> PVCInfo:
    meta, name = object_name(raw, "persistentvolumeclaim")
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    anns = _str_map(meta.get("annotations"), "metadata.annotations")
    sc_name = spec.get("storageClassName")
    effective = anns.get(ANN_BETA_STORAGE_CLASS, sc_name if isinstance(sc_name, str) else "")
    sel = spec.get("selector")
    return PVCInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        uid=str(meta.get("uid") or ""),
        volume_name=str(spec.get("volumeName") or ""),
        storage_class_name=sc_name if isinstance(sc_name, str) else None,
        storage_class=effective,
        access_modes=_modes(spec.get("accessModes"), "spec.accessModes"),
        request_storage=_storage(
            (spec.get("resources") or {}).get("requests"), "spec.resources.requests"
        ),
        volume_mode=str(spec.get("volumeMode") or VOLUME_FILESYSTEM),
        selector=parse_label_selector(sel, "spec.selector") if sel is not None else None,
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        annotations=anns,
        controller_uid=_controller_uid(meta),
        phase=str(status.get("phase") or "Pending"),
        deletion_timestamp=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        resource_version=str(meta.get("resourceVersion") or ""),
        raw=raw,
    )


def pv_from_dict(raw: Mapping[str, Any]) -> PVInfo:
    meta, name = object_name(raw, "persistentvolume")
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    anns = _str_map(meta.get("annotations"), "metadata.annotations")
    na = (spec.get("nodeAffinity") or {}).get("required")
    ref = spec.get("claimRef")
    claim = None
    if isinstance(ref, Mapping):
        claim = ClaimRef(
            str(ref.get("namespace") or ""), str(ref.get("name") or ""), str(ref.get("uid") or "")
        )
    csi_raw = spec.get("csi")
    csi: Mapping[str, Any] = csi_raw if isinstance(csi_raw, Mapping) else {}
    return PVInfo(
        name=name,
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=anns,
        storage_class=anns.get(ANN_BETA_STORAGE_CLASS, str(spec.get("storageClassName") or "")),
        capacity=_storage(spec.get("capacity"), "spec.capacity") or 0,
        access_modes=_modes(spec.get("accessModes"), "spec.accessModes"),
        volume_mode=str(spec.get("volumeMode") or VOLUME_FILESYSTEM),
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        # lazy, as upstream's CheckNodeAffinity (MatchNodeSelectorTerms): a term that
        # does not parse matches no node, the others still do; the PV stays visible
        node_affinity=(
            parse_node_selector(na, "spec.nodeAffinity.required", strict=False) if na else None
        ),
        claim=claim,
        csi_driver=str(csi.get("driver") or ""),
        csi_handle=str(csi.get("volumeHandle") or ""),
        phase=str(status.get("phase") or VOLUME_AVAILABLE),
        deletion_timestamp=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        resource_version=str(meta.get("resourceVersion") or ""),
        raw=raw,
    )


def _topology_terms(raw: Any) -> tuple[TopologyTerm, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidObject("allowedTopologies", "must be a list")
    terms: list[TopologyTerm] = []
    for term in raw:
        exprs = (term.get("matchLabelExpressions") or []) if isinstance(term, dict) else []
        terms.append(
            TopologyTerm(
                tuple(
                    (str(e.get("key") or ""), frozenset(str(v) for v in e.get("values") or []))
                    for e in exprs
                    if isinstance(e, dict)
                )
            )
        )
    return tuple(terms)


def storage_class_from_dict(raw: Mapping[str, Any]) -> StorageClassInfo:
    _, name = object_name(raw, "storageclass")
    return StorageClassInfo(
        name=name,
        volume_binding_mode=str(raw.get("volumeBindingMode") or BINDING_IMMEDIATE),
        provisioner=str(raw.get("provisioner") or ""),
        allowed_topologies=_topology_terms(raw.get("allowedTopologies")),
    )
