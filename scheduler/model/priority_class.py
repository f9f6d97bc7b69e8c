"""The slim PriorityClass record (scheduling.k8s.io/v1).

Pods carry their resolved priority in spec.priority (the Priority admission plugin sets
it), so the scheduler rarely needs these; they serve diagnostics and the case where a
pod was created without admission (priority then resolves through the class name, or
the global default class). A malformed class raises InvalidObject naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import object_name
from scheduler.model.pod import PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER

__all__ = ["PriorityClassInfo", "priority_class_from_dict", "resolve_priority"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorityClassInfo:
    name: str
    value: int = 0
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    resource_version: str = ""


def priority_class_from_dict(raw: Mapping[str, Any]) -> PriorityClassInfo:
    meta, name = object_name(raw, "priorityclass")
    value = raw.get("value", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObject("value", f"must be an integer, got {value!r}", name)
    global_default = raw.get("globalDefault", False)
    if global_default is None:
        global_default = False
    if not isinstance(global_default, bool):
        raise InvalidObject("globalDefault", f"must be a boolean, got {global_default!r}", name)
    policy = raw.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        raise InvalidObject("preemptionPolicy", f"unsupported value {policy!r}", name)
    return PriorityClassInfo(
        name=name,
        value=value,
        global_default=global_default,
        preemption_policy=policy,
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def resolve_priority(class_name: str, classes: Iterable[PriorityClassInfo]) -> int:
    """The priority admission would give a pod naming `class_name` ("" = none): the
    class's value, else the global default class's value (the highest if several claim
    it, as upstream picks the one with the highest value), else 0."""
    default: PriorityClassInfo | None = None
    for pc in classes:
        if class_name and pc.name == class_name:
            return pc.value
        if pc.global_default and (default is None or pc.value > default.value):
            default = pc
    return default.value if default is not None else 0
