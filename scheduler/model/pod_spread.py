"""A pod's topology spread constraints (v1.TopologySpreadConstraint) as PodTopologySpread
reads them, with matchLabelKeys merged into the selector."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import json_int, json_list, object_entries
from scheduler.model.selectors import IN, LabelSelector, Requirement, parse_label_selector

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
POLICY_HONOR = "Honor"
POLICY_IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = POLICY_HONOR
    node_taints_policy: str = POLICY_IGNORE


def merge_match_label_keys(
    selector: LabelSelector, labels: Mapping[str, str], match: Iterable[str]
) -> LabelSelector:
    """Topology spread's matchLabelKeys: the pod's current value of each key it has
    (upstream's scheduler merges these itself, unlike pod affinity's)."""
    extra = tuple(Requirement(k, IN, frozenset((labels[k],))) for k in match if k in labels)
    return selector.with_requirements(extra)


def parse_spread_constraints(
    raw: Any, path: str, labels: Mapping[str, str]
) -> tuple[SpreadConstraint, ...]:
    out = []
    for p, c in object_entries(raw, path):
        max_skew = json_int(c.get("maxSkew"), f"{p}.maxSkew", 0)
        if max_skew < 1:
            raise InvalidObject(f"{p}.maxSkew", "must be greater than zero")
        topo = c.get("topologyKey")
        if not isinstance(topo, str) or not topo:
            raise InvalidObject(f"{p}.topologyKey", "must be a non-empty string")
        when = c.get("whenUnsatisfiable", DO_NOT_SCHEDULE)
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise InvalidObject(f"{p}.whenUnsatisfiable", f"unsupported value {when!r}")
        min_domains = json_int(c.get("minDomains"), f"{p}.minDomains", 1)
        if min_domains < 1:
            raise InvalidObject(f"{p}.minDomains", "must be greater than zero")
        naff = c.get("nodeAffinityPolicy") or POLICY_HONOR
        ntaint = c.get("nodeTaintsPolicy") or POLICY_IGNORE
        for name, v in (("nodeAffinityPolicy", naff), ("nodeTaintsPolicy", ntaint)):
            if v not in (POLICY_HONOR, POLICY_IGNORE):
                raise InvalidObject(f"{p}.{name}", f"unsupported value {v!r}")
        selector = parse_label_selector(c.get("labelSelector"), f"{p}.labelSelector")
        keys = json_list(c.get("matchLabelKeys"), f"{p}.matchLabelKeys")
        if not all(isinstance(k, str) for k in keys):  # `k in labels` hashes each key
            raise InvalidObject(f"{p}.matchLabelKeys", "must be a list of strings")
        selector = merge_match_label_keys(selector, labels, keys)
        out.append(SpreadConstraint(max_skew, topo, when, selector, min_domains, naff, ntaint))
    return tuple(out)
