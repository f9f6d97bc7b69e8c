"""A pod's affinity as the scheduler reads it: pod (anti-)affinity terms with their
namespaces resolved for the owning pod, and preferred node-affinity terms.

Parsing follows upstream's leniency (see model.pod): a pod-affinity group whose selector
does not parse is empty, as framework.NewPodInfo leaves it; preferred node-affinity
terms that do not parse are all dropped and their error kept for NodeAffinity's PreScore.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import json_int, json_list, object_entries
from scheduler.model.selectors import (
    LabelSelector,
    NodeSelectorTerm,
    aggregate_message,
    parse_label_selector,
    parse_node_selector_term,
)

_G = TypeVar("_G")


class LabelledPod(Protocol):
    """All a term reads of a pod (PodInfo is one); a Protocol, so this module, which
    PodInfo's own module imports, needs nothing from it."""

    @property
    def namespace(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod (anti-)affinity term with namespaces resolved for the owning pod:
    `namespaces` is the explicit list, or the owner's namespace when both the list
    and namespaceSelector are absent; `namespace_selector` matches nothing when absent."""

    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    topology_key: str

    def matches_namespace(self, namespace: str, ns_labels: Mapping[str, str] | None) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector.match_nothing:
            return False
        return self.namespace_selector.matches(ns_labels or {})

    def matches(self, pod: LabelledPod, ns_labels: Mapping[str, str] | None) -> bool:
        return self.matches_labels(pod.namespace, pod.labels, ns_labels)

    def matches_labels(
        self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None
    ) -> bool:
        """`matches` for a pod known by its namespace and labels (all a term reads)."""
        return self.matches_namespace(namespace, ns_labels) and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    term: NodeSelectorTerm


def parse_affinity_term(raw: Any, path: str, namespace: str) -> AffinityTerm:
    """A v1.PodAffinityTerm. matchLabelKeys / mismatchLabelKeys are NOT merged here: the
    API server merges them into labelSelector when the pod is created
    (MatchLabelKeysInPodAffinity, GA), and upstream's scheduler reads the stored
    selector only; merging again with the pod's current labels would diverge once
    they change."""
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    topo = raw.get("topologyKey")
    if not isinstance(topo, str) or not topo:
        raise InvalidObject(f"{path}.topologyKey", "must be a non-empty string")
    selector = parse_label_selector(raw.get("labelSelector"), f"{path}.labelSelector")
    namespaces = json_list(raw.get("namespaces"), f"{path}.namespaces")
    if not all(isinstance(n, str) for n in namespaces):
        raise InvalidObject(f"{path}.namespaces", "must be a list of strings")
    raw_ns_sel = raw.get("namespaceSelector")
    ns_selector = parse_label_selector(raw_ns_sel, f"{path}.namespaceSelector")
    ns_set = frozenset(namespaces)
    if not ns_set and raw_ns_sel is None:
        ns_set = frozenset((namespace,))
    return AffinityTerm(selector, ns_set, ns_selector, topo)


def parse_weighted_terms(raw: Any, path: str, namespace: str) -> tuple[WeightedAffinityTerm, ...]:
    out = []
    for p, w in object_entries(raw, path):
        weight = json_int(w.get("weight"), f"{p}.weight", 0)
        if not 1 <= weight <= 100:
            raise InvalidObject(f"{p}.weight", "must be in the range 1-100")
        term = parse_affinity_term(w.get("podAffinityTerm"), f"{p}.podAffinityTerm", namespace)
        out.append(WeightedAffinityTerm(weight, term))
    return tuple(out)


def affinity_group(problems: list[str], parse: Callable[[], tuple[_G, ...]]) -> tuple[_G, ...]:
    """One pod (anti-)affinity group. A term whose selector does not parse empties its
    whole group, as upstream's GetAffinityTerms returns no terms on the first error;
    for a pod to be placed the problem is also recorded (upstream fails its PreFilter)."""
    try:
        return parse()
    except InvalidObject as e:
        problems.append(str(e))
        return ()


def parse_preferred_node_affinity(
    raw: Any, path: str
) -> tuple[tuple[PreferredSchedulingTerm, ...], str]:
    """upstream NewPreferredSchedulingTerms: terms with weight 0 or no requirements are
    skipped; if any other term does not parse, no term is kept and the flattened error
    is returned (NodeAffinity's PreScore reports it)."""
    terms: list[PreferredSchedulingTerm] = []
    errors: list[str] = []
    for i, (p, t) in enumerate(object_entries(raw, path)):
        weight = json_int(t.get("weight"), f"{p}.weight", 0)
        term = parse_node_selector_term(
            t.get("preference") or {}, f"{p}.preference", f"[{i}]", strict=False
        )
        if weight == 0 or term.is_empty:
            continue
        errors.extend(term.errors)
        terms.append(PreferredSchedulingTerm(weight, term))
    if errors:
        return (), aggregate_message(errors)
    return tuple(terms), ""
