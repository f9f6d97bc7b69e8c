"""The slim namespace record: its labels, for namespaceSelector in pod affinity."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.errors import InvalidObject


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""


def namespace_from_dict(raw: Mapping[str, Any]) -> NamespaceInfo:
    meta = raw.get("metadata") or {} if isinstance(raw, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject("metadata.name", "must be a non-empty string")
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        raise InvalidObject("metadata.labels", "must be a map of strings", name)
    return NamespaceInfo(
        name=name,
        labels={str(k): str(v) for k, v in labels.items()},
        resource_version=str(meta.get("resourceVersion") or ""),
    )
