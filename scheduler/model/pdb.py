"""The slim PodDisruptionBudget record (policy/v1), as the preemption evaluator reads it.

Only what upstream's filterPodsWithPDBViolation looks at is kept: namespace, selector,
status.disruptionsAllowed and the names in status.disruptedPods (pods the API server has
already counted against the budget, which must not spend it again).

Selector semantics follow the scheduler, not the disruption controller: upstream's
preemption treats a nil or empty selector as matching nothing, and skips a PDB whose
selector does not parse. `pdb_from_dict` therefore never fails on the selector; it turns
an absent, empty or invalid one into `LabelSelector.nothing()`. Other malformed fields
raise InvalidObject naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import object_name
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import LabelSelector, parse_label_selector

__all__ = ["PDBInfo", "pdb_from_dict"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PDBInfo:
    namespace: str
    name: str
    selector: LabelSelector = field(default_factory=LabelSelector.nothing)
    disruptions_allowed: int = 0
    disrupted_pods: frozenset[str] = frozenset()  # pod names (status.disruptedPods keys)
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def matches(self, pod: PodInfo) -> bool:
        """The budget covers this pod: same namespace, and the selector matches its
        labels. A pod without labels matches no PDB (as upstream, which skips it)."""
        return (
            pod.namespace == self.namespace
            and bool(pod.labels)
            and self.selector.matches(pod.labels)
        )


def _selector(raw: Any) -> LabelSelector:
    try:
        selector = parse_label_selector(raw, "spec.selector")
    except InvalidObject:
        return LabelSelector.nothing()  # upstream: an invalid selector matches no pod
    if selector.is_everything:
        return LabelSelector.nothing()  # upstream: an empty selector matches no pod
    return selector


def pdb_from_dict(raw: Mapping[str, Any]) -> PDBInfo:
    """Build a PDBInfo from a raw policy/v1 PodDisruptionBudget dict."""
    meta, name = object_name(raw, "poddisruptionbudget")
    namespace = str(meta.get("namespace") or "default")
    key = f"{namespace}/{name}"
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    if not isinstance(spec, Mapping):
        raise InvalidObject("spec", "must be an object", key)
    if not isinstance(status, Mapping):
        raise InvalidObject("status", "must be an object", key)
    allowed = status.get("disruptionsAllowed", 0)
    if allowed is None:
        allowed = 0
    if isinstance(allowed, bool) or not isinstance(allowed, int):
        raise InvalidObject(
            "status.disruptionsAllowed", f"must be an integer, got {allowed!r}", key
        )
    disrupted = status.get("disruptedPods") or {}
    if not isinstance(disrupted, Mapping):
        raise InvalidObject("status.disruptedPods", "must be a map", key)
    return PDBInfo(
        namespace=namespace,
        name=name,
        selector=_selector(spec.get("selector")),
        disruptions_allowed=allowed,
        disrupted_pods=frozenset(str(k) for k in disrupted),
        resource_version=str(meta.get("resourceVersion") or ""),
    )
