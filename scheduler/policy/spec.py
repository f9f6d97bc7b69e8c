"""A PreemptionPolicy object (scheduling.kas.io/v1alpha1) read into a checked record.

The CRD's structural schema refuses wrong types and ranges at admission; what a schema
cannot say (a label selector's operator with the values it needs, label keys that are
qualified names, namespace names) is checked here, and a policy failing it is marked
Ready=False with the message, while the last valid version of it stays in force.

Absent selectors and lists mean "no restriction" (everything matches), unlike a PDB's
selector: a policy narrows preemption only where it says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.config.k8s_names import dns1123_label, qualified_name
from scheduler.model.errors import InvalidObject
from scheduler.model.selectors import LabelSelector, parse_label_selector

__all__ = [
    "DEFAULT_PROTECTED_NAMESPACES",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "PolicyError",
    "PolicySpec",
    "parse_policy",
]

GROUP = "scheduling.kas.io"
VERSION = "v1alpha1"
KIND = "PreemptionPolicy"
PLURAL = "preemptionpolicies"
DEFAULT_PROTECTED_NAMESPACES = ("kube-system",)
MAX_SECONDS = 86_400 * 7  # a week: longer tolerations or cooldowns are certainly typos


class PolicyError(ValueError):
    """The policy cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class PolicySpec:
    name: str
    generation: int
    # which preemptors it applies to
    preemptor_priority_classes: frozenset[str]  # empty: any
    preemptor_namespaces: LabelSelector
    # which pods may be victims
    victim_namespaces: LabelSelector
    victim_labels: LabelSelector
    victim_priority_classes: frozenset[str]  # empty: any
    min_preemptable_priority: int | None
    protected_namespaces: frozenset[str]
    toleration_seconds: int
    cooldown_seconds: int
    max_victims: int | None


def _selector(raw: Any, path: str) -> LabelSelector:
    if raw is None:
        return LabelSelector.everything()
    try:
        sel = parse_label_selector(raw, path)
    except InvalidObject as exc:
        raise PolicyError(str(exc)) from exc
    for req in sel.requirements:
        problem = qualified_name(req.key)
        if problem is not None:
            raise PolicyError(f"{path}: label key {req.key!r}: {problem}")
    return sel


def _names(raw: Any, path: str, *, namespaces: bool = False) -> frozenset[str]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(v, str) and v for v in raw):
        raise PolicyError(f"{path}: must be a list of non-empty strings")
    if namespaces:
        for v in raw:
            problem = dns1123_label(v)
            if problem is not None:
                raise PolicyError(f"{path}: {v!r}: {problem}")
    return frozenset(raw)


def _seconds(raw: Any, path: str) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_SECONDS:
        raise PolicyError(f"{path}: must be an integer from 0 to {MAX_SECONDS}")
    return raw


def _map(raw: Any, path: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{path}: must be an object")
    return raw


def parse_policy(obj: Mapping[str, Any]) -> PolicySpec:
    """Read a PreemptionPolicy object (as the API serves it); PolicyError if unusable."""
    meta = _map(obj.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise PolicyError("metadata.name: must be a non-empty string")
    generation = meta.get("generation", 0)
    spec = _map(obj.get("spec"), "spec")
    pre = _map(spec.get("preemptors"), "spec.preemptors")
    vic = _map(spec.get("victims"), "spec.victims")
    floor = vic.get("minPreemptablePriority")
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, int)):
        raise PolicyError("spec.victims.minPreemptablePriority: must be an integer")
    cap = spec.get("maxVictimsPerPreemption")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise PolicyError("spec.maxVictimsPerPreemption: must be an integer >= 1")
    protected_raw = spec.get("protectedNamespaces")
    protected = (
        frozenset(DEFAULT_PROTECTED_NAMESPACES)
        if protected_raw is None
        else _names(protected_raw, "spec.protectedNamespaces", namespaces=True)
    )
    return PolicySpec(
        name=name,
        generation=int(generation) if isinstance(generation, int) else 0,
        preemptor_priority_classes=_names(
            pre.get("priorityClassNames"), "spec.preemptors.priorityClassNames"
        ),
        preemptor_namespaces=_selector(
            pre.get("namespaceSelector"), "spec.preemptors.namespaceSelector"
        ),
        victim_namespaces=_selector(vic.get("namespaceSelector"), "spec.victims.namespaceSelector"),
        victim_labels=_selector(vic.get("labelSelector"), "spec.victims.labelSelector"),
        victim_priority_classes=_names(
            vic.get("priorityClassNames"), "spec.victims.priorityClassNames"
        ),
        min_preemptable_priority=floor,
        protected_namespaces=protected,
        toleration_seconds=_seconds(spec.get("tolerationSeconds"), "spec.tolerationSeconds"),
        cooldown_seconds=_seconds(spec.get("cooldownSeconds"), "spec.cooldownSeconds"),
        max_victims=cap,
    )
