"""The selector of the workloads that own a pod, for PodTopologySpread's system defaults.

Upstream's helper.DefaultSelector: the union (AND) of the selectors of every Service,
ReplicationController, ReplicaSet and StatefulSet in the pod's namespace that selects the
pod. PodTopologySpread applies its default constraints (ScheduleAnyway, over zones and
hostnames) with that selector, so replicas of one workload spread out by default; a pod no
workload selects gets no default constraints.

Records are tiny (namespace, name, selector); informers keep them in `WorkloadSelectors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.model import PodInfo
from scheduler.model.errors import InvalidObject
from scheduler.model.selectors import IN, LabelSelector, Requirement, parse_label_selector


@dataclass(frozen=True, slots=True)
class WorkloadSelector:
    kind: str
    namespace: str
    name: str
    selector: LabelSelector

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _meta(raw: Mapping[str, Any]) -> tuple[str, str]:
    meta = raw.get("metadata") or {}
    ns, name = meta.get("namespace"), meta.get("name")
    if not isinstance(ns, str) or not isinstance(name, str):
        raise InvalidObject("metadata", "namespace and name are required")
    return ns, name


def _from_map(selector: Any, path: str) -> LabelSelector:
    """A map selector (Services, ReplicationControllers); empty or absent selects nothing."""
    if not selector:
        return LabelSelector.nothing()
    if not isinstance(selector, dict):
        raise InvalidObject(path, "must be a map")
    return LabelSelector(
        tuple(Requirement(str(k), IN, frozenset({str(v)})) for k, v in sorted(selector.items()))
    )


def service_from_dict(raw: Mapping[str, Any]) -> WorkloadSelector:
    ns, name = _meta(raw)
    return WorkloadSelector(
        "Service", ns, name, _from_map((raw.get("spec") or {}).get("selector"), "spec.selector")
    )


def replication_controller_from_dict(raw: Mapping[str, Any]) -> WorkloadSelector:
    ns, name = _meta(raw)
    sel = _from_map((raw.get("spec") or {}).get("selector"), "spec.selector")
    return WorkloadSelector("ReplicationController", ns, name, sel)


def _label_selector_owner(kind: str) -> Any:
    def transform(raw: Mapping[str, Any]) -> WorkloadSelector:
        ns, name = _meta(raw)
        sel = parse_label_selector((raw.get("spec") or {}).get("selector"), "spec.selector")
        return WorkloadSelector(kind, ns, name, sel)

    return transform


replica_set_from_dict = _label_selector_owner("ReplicaSet")
stateful_set_from_dict = _label_selector_owner("StatefulSet")


class WorkloadSelectors:
    """Implements framework.handle.WorkloadSelectorLister over informer-fed records."""

    def __init__(self) -> None:
        # namespace -> key -> record
        self._by_ns: dict[str, dict[str, WorkloadSelector]] = {}

    # informer handler
    def on_add(self, obj: WorkloadSelector) -> None:
        self._by_ns.setdefault(obj.namespace, {})[f"{obj.kind}/{obj.name}"] = obj

    def on_update(self, old: WorkloadSelector, new: WorkloadSelector) -> None:
        self.on_add(new)

    def on_delete(self, obj: WorkloadSelector) -> None:
        self._by_ns.get(obj.namespace, {}).pop(f"{obj.kind}/{obj.name}", None)

    def default_selector(self, pod: PodInfo) -> LabelSelector | None:
        requirements: list[Requirement] = []
        for w in self._by_ns.get(pod.namespace, {}).values():
            sel = w.selector
            if sel.match_nothing or sel.is_everything or not sel.matches(pod.labels):
                continue
            requirements.extend(sel.requirements)
        if not requirements:
            return None
        return LabelSelector(tuple(dict.fromkeys(requirements)))
