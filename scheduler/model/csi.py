"""Slim records for the storage.k8s.io objects the volume plugins read: CSINode (attach
limits per driver), CSIDriver (capacity tracking, presence requirement),
CSIStorageCapacity (free space per topology) and VolumeAttachment (attachments already
counted against a node's limit)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import object_name
from scheduler.model.quantity import parse_int
from scheduler.model.selectors import LabelSelector, parse_label_selector

# v1.MigratedPluginsAnnotationKey
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"


@dataclass(frozen=True, slots=True, kw_only=True)
class CSINodeInfo:
    name: str
    # driver name -> allocatable.count (None: the driver publishes no limit)
    drivers: Mapping[str, int | None] = field(default_factory=dict)
    migrated_plugins: str = ""  # the annotation's raw value

    def limits(self) -> dict[str, int]:
        """upstream getVolumeLimits: only drivers that publish a count."""
        return {d: n for d, n in self.drivers.items() if n is not None}


@dataclass(frozen=True, slots=True, kw_only=True)
class CSIDriverInfo:
    name: str
    storage_capacity: bool = False  # spec.storageCapacity
    prevent_scheduling_if_missing: bool = False  # spec.preventPodSchedulingIfMissing


@dataclass(frozen=True, slots=True, kw_only=True)
class CSIStorageCapacityInfo:
    namespace: str
    name: str
    storage_class_name: str
    node_topology: LabelSelector | None = None  # None: no node has access
    capacity: int | None = None
    maximum_volume_size: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def volume_limit(self) -> int | None:
        """upstream volumeLimit: the largest volume that fits, if known."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeAttachmentInfo:
    name: str
    node_name: str = ""
    attacher: str = ""
    pv_name: str | None = None  # spec.source.persistentVolumeName


def _quantity(raw: Any, path: str) -> int | None:
    if raw is None:
        return None
    try:
        return parse_int(raw)
    except (ValueError, TypeError) as exc:
        raise InvalidObject(path, f"not a quantity: {exc}") from exc


def csi_node_from_dict(raw: Mapping[str, Any]) -> CSINodeInfo:
    meta, name = object_name(raw, "csinode")
    drivers: dict[str, int | None] = {}
    for i, d in enumerate((raw.get("spec") or {}).get("drivers") or []):
        if not isinstance(d, Mapping) or not d.get("name"):
            raise InvalidObject(f"spec.drivers[{i}].name", "must be set")
        count = (d.get("allocatable") or {}).get("count")
        drivers[str(d["name"])] = int(count) if count is not None else None
    anns = meta.get("annotations") or {}
    return CSINodeInfo(
        name=name,
        drivers=drivers,
        migrated_plugins=str(anns.get(ANN_MIGRATED_PLUGINS) or ""),
    )


def csi_driver_from_dict(raw: Mapping[str, Any]) -> CSIDriverInfo:
    _, name = object_name(raw, "csidriver")
    spec = raw.get("spec") or {}
    return CSIDriverInfo(
        name=name,
        storage_capacity=bool(spec.get("storageCapacity")),
        prevent_scheduling_if_missing=bool(spec.get("preventPodSchedulingIfMissing")),
    )


def csi_storage_capacity_from_dict(raw: Mapping[str, Any]) -> CSIStorageCapacityInfo:
    meta, name = object_name(raw, "csistoragecapacity")
    topo = raw.get("nodeTopology")
    return CSIStorageCapacityInfo(
        namespace=str(meta.get("namespace") or ""),
        name=name,
        storage_class_name=str(raw.get("storageClassName") or ""),
        node_topology=parse_label_selector(topo, "nodeTopology") if topo is not None else None,
        capacity=_quantity(raw.get("capacity"), "capacity"),
        maximum_volume_size=_quantity(raw.get("maximumVolumeSize"), "maximumVolumeSize"),
    )


def volume_attachment_from_dict(raw: Mapping[str, Any]) -> VolumeAttachmentInfo:
    _, name = object_name(raw, "volumeattachment")
    spec = raw.get("spec") or {}
    pv = (spec.get("source") or {}).get("persistentVolumeName")
    return VolumeAttachmentInfo(
        name=name,
        node_name=str(spec.get("nodeName") or ""),
        attacher=str(spec.get("attacher") or ""),
        pv_name=str(pv) if pv else None,
    )
