"""The slim node record (NodeInfo) built once from the API server's raw JSON.

Only what scheduling needs: labels, taints, unschedulable, allocatable (cpu in
millicores, everything else in integer units), images (name -> size), Ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.quantity import PODS, parse_resource
from scheduler.model.taints import EFFECTS, Taint

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInfo:
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: Mapping[str, int] = field(default_factory=dict)
    images: Mapping[str, int] = field(default_factory=dict)
    ready: bool = True

    @property
    def allowed_pods(self) -> int:
        return self.allocatable.get(PODS, 0)


def _normalize_image(name: str) -> str:
    """upstream ImageLocality: an image without tag or digest means ":latest"."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def normalize_image(name: str) -> str:
    return _normalize_image(name)


def node_from_dict(raw: Mapping[str, Any]) -> NodeInfo:
    """Build a NodeInfo from a raw v1.Node dict. Raises InvalidObject."""
    if not isinstance(raw, Mapping):
        raise InvalidObject("", "node must be an object")
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject("metadata.name", "must be a non-empty string")
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise InvalidObject("metadata.labels", "must be a map of strings", name)
    taints: list[Taint] = []
    for i, t in enumerate(spec.get("taints") or []):
        if not isinstance(t, dict) or not isinstance(t.get("key"), str):
            raise InvalidObject(f"spec.taints[{i}]", "must have a string key", name)
        effect = t.get("effect", "")
        if effect not in EFFECTS:
            raise InvalidObject(f"spec.taints[{i}].effect", f"unknown effect {effect!r}", name)
        taints.append(Taint(t["key"], str(t.get("value") or ""), effect))
    allocatable: dict[str, int] = {}
    raw_alloc = status.get("allocatable") or status.get("capacity") or {}
    if not isinstance(raw_alloc, dict):
        raise InvalidObject("status.allocatable", "must be a map", name)
    for res, q in raw_alloc.items():
        try:
            allocatable[res] = parse_resource(res, q)
        except InvalidObject as e:
            raise InvalidObject(f"status.allocatable.{res}", e.detail, name) from e
    images: dict[str, int] = {}
    for img in status.get("images") or []:
        if not isinstance(img, dict):
            continue
        size = int(img.get("sizeBytes") or 0)
        for n in img.get("names") or []:
            if isinstance(n, str):
                images[_normalize_image(n)] = size
    ready = False
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            ready = c.get("status") == "True"
    return NodeInfo(
        name=name,
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=dict(labels),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable", False)),
        allocatable=allocatable,
        images=images,
        ready=ready,
    )
