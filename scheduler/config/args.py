"""Typed arguments for every plugin, with upstream's defaults (kubescheduler.config.k8s.io/v1).

`parse_plugin_args(name, raw, path)` turns a pluginConfig[].args dict into the plugin's
args dataclass (or None for a plugin without args), raising ConfigError that names the
field path for unknown fields, wrong types and bad values. `default_plugin_args(name)`
gives the defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.config import names
from scheduler.config.errors import ConfigError, brief, type_name
from scheduler.config.k8s_names import qualified_name
from scheduler.config.reader import INT32, INT64, check_int
from scheduler.model.errors import InvalidObject
from scheduler.model.pod_affinity import PreferredSchedulingTerm
from scheduler.model.pod_spread import (
    DO_NOT_SCHEDULE,
    POLICY_HONOR,
    POLICY_IGNORE,
    SCHEDULE_ANYWAY,
    SpreadConstraint,
)
from scheduler.model.selectors import (
    LabelSelector,
    NodeSelector,
    parse_node_selector,
    parse_node_selector_term,
)

# ------------------------------------------------------------------ dataclasses

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

MODE_ASYNC = "Async"
MODE_SYNC = "Sync"
SCOPE_OWN_PROFILES = "OwnProfiles"
SCOPE_ALL = "All"

DEFAULTING_SYSTEM = "System"
DEFAULTING_LIST = "List"


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int = 1


@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    utilization: int  # percent, 0..100
    score: int  # 0..10 (MaxCustomPriorityScore)


def _default_resources() -> tuple[ResourceSpec, ...]:
    return (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = field(default_factory=_default_resources)
    shape: tuple[UtilizationShapePoint, ...] = ()  # requestedToCapacityRatio.shape


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)


@dataclass(frozen=True, slots=True)
class NodeResourcesBalancedAllocationArgs:
    resources: tuple[ResourceSpec, ...] = field(default_factory=_default_resources)


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    added_required: NodeSelector | None = None
    added_preferred: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    default_constraints: tuple[SpreadConstraint, ...] = ()
    defaulting_type: str = DEFAULTING_SYSTEM


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    bind_timeout_seconds: int = 600
    # StorageCapacityScoring (beta, on in 1.37): SetDefaults_VolumeBindingArgs' default
    # shape prefers the emptiest volume (utilization 0 -> 10, 100 -> 0)
    shape: tuple[UtilizationShapePoint, ...] = (
        UtilizationShapePoint(0, 10),
        UtilizationShapePoint(100, 0),
    )


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    mode: str = MODE_ASYNC  # this project: Async (default) | Sync
    victim_scope: str = SCOPE_OWN_PROFILES  # this project: OwnProfiles (default) | All


PluginArgs = (
    NodeResourcesFitArgs
    | NodeResourcesBalancedAllocationArgs
    | InterPodAffinityArgs
    | NodeAffinityArgs
    | PodTopologySpreadArgs
    | VolumeBindingArgs
    | DefaultPreemptionArgs
)

# ------------------------------------------------------------------ reading


class _Reader:
    """Reads fields off one raw mapping, remembering which were consumed.

    `fields` are the object's fields: any other is refused at once, before any value is
    looked at, as upstream's strict decoding fails before validation runs (a mis-cased
    "Type" is reported as the unknown field it is, not as a missing "type"). Args objects
    (`args=True`) also carry apiVersion and kind."""

    def __init__(
        self, raw: Any, path: str, fields: tuple[str, ...] = (), *, args: bool = False
    ) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(path, f"must be an object, got {type_name(raw)}")
        for key in raw:
            if not isinstance(key, str):
                raise ConfigError(path, f"a field name must be a string, got {brief(key)}")
        self.raw = raw
        self.path = path
        self.seen: set[str] = {"apiVersion", "kind"} if args else set()
        if fields:
            allowed = {*fields, *self.seen}
            for key in raw:
                if key not in allowed:
                    raise ConfigError(self.sub(brief(key, quote=False)), "unknown field")

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str) -> Any:
        self.seen.add(key)
        return self.raw.get(key)

    def int_(
        self,
        key: str,
        default: int,
        lo: int | None = None,
        hi: int | None = None,
        go_type: tuple[int, int] = INT32,
    ) -> int:
        """An integer of the Go type (int32 unless said), then within [lo, hi]."""
        v = check_int(self.get(key), default, self.sub(key), go_type)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
            raise ConfigError(self.sub(key), f"must be in the range {rng}, got {brief(v)}")
        return v

    def bool_(self, key: str, default: bool) -> bool:
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ConfigError(self.sub(key), f"must be a boolean, got {type_name(v)} {brief(v)}")
        return v

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        v = self.get(key)
        if v is None:
            return default
        if v not in choices:
            raise ConfigError(self.sub(key), f"must be one of {', '.join(choices)}; got {brief(v)}")
        return str(v)

    def list_(self, key: str) -> list[Any]:
        v = self.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise ConfigError(self.sub(key), f"must be a list, got {type_name(v)}")
        return v

    def label_names(self, key: str) -> frozenset[str]:
        """A list of label-style names (metav1validation.ValidateLabelName each)."""
        items = self.list_(key)
        for i, s in enumerate(items):
            if not isinstance(s, str):
                raise ConfigError(f"{self.sub(key)}[{i}]", f"must be a string, got {type_name(s)}")
            problem = qualified_name(s)
            if problem is not None:
                raise ConfigError(f"{self.sub(key)}[{i}]", f"{brief(s)}: {problem}")
        return frozenset(items)

    def done(self) -> None:
        unknown = sorted(set(self.raw) - self.seen)
        if unknown:
            raise ConfigError(self.sub(brief(unknown[0], quote=False)), "unknown field")


def _resources(
    r: _Reader, key: str, *, weight_must_be_one: bool
) -> tuple[ResourceSpec, ...] | None:
    """ResourceSpec list; weight int64, 0 (unset) means 1 as upstream's defaulting
    (SetDefaults_NodeResourcesFitArgs / ..BalancedAllocationArgs), then in (0, 100]
    (validateResources) or exactly 1 for BalancedAllocation."""
    if r.raw.get(key) is None:
        r.seen.add(key)
        return None
    out = []
    seen: set[str] = set()
    for i, item in enumerate(r.list_(key)):
        ir = _Reader(item, f"{r.sub(key)}[{i}]", ("name", "weight"))
        name = ir.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(ir.sub("name"), f"must be a non-empty string, got {brief(name)}")
        if name in seen:
            raise ConfigError(ir.sub("name"), f"duplicate resource {brief(name)}")
        seen.add(name)
        weight = ir.int_("weight", 1, go_type=INT64) or 1
        if weight_must_be_one and weight != 1:
            raise ConfigError(ir.sub("weight"), f"must be 1, got {brief(weight)}")
        if not 0 < weight <= 100:
            raise ConfigError(
                ir.sub("weight"),
                f"resource weight of {brief(name)} not in valid range (0, 100],"
                f" got {brief(weight)}",
            )
        ir.done()
        out.append(ResourceSpec(name, weight))
    return tuple(out)


def _shape(r: _Reader, key: str) -> tuple[UtilizationShapePoint, ...]:
    """validateFunctionShape: at least one point, utilization in [0, 100] strictly
    increasing, score in [0, 10] (MaxCustomPriorityScore)."""
    points: list[UtilizationShapePoint] = []
    for i, p in enumerate(r.list_(key)):
        pr = _Reader(p, f"{r.sub(key)}[{i}]", ("utilization", "score"))
        util = pr.int_("utilization", 0, 0, 100)
        score = pr.int_("score", 0, 0, 10)
        pr.done()
        if points and util <= points[-1].utilization:
            raise ConfigError(
                f"{r.sub(key)}[{i}].utilization", "values must be sorted in increasing order"
            )
        points.append(UtilizationShapePoint(util, score))
    if not points:
        raise ConfigError(r.sub(key), "at least one point must be specified")
    return tuple(points)


def _fit(raw: Any, path: str) -> NodeResourcesFitArgs:
    r = _Reader(
        raw, path, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"), args=True
    )
    ignored = r.label_names("ignoredResources")
    for i, g in enumerate(r.list_("ignoredResourceGroups")):
        if isinstance(g, str) and "/" in g:
            raise ConfigError(
                f"{r.sub('ignoredResourceGroups')}[{i}]",
                f"{brief(g)}: resource group name can't contain '/'",
            )
    groups = r.label_names("ignoredResourceGroups")
    strategy = ScoringStrategy()
    if r.get("scoringStrategy") is not None:
        sr = _Reader(
            r.raw["scoringStrategy"],
            r.sub("scoringStrategy"),
            ("type", "resources", "requestedToCapacityRatio"),
        )
        type_ = sr.choice(
            "type", LEAST_ALLOCATED, (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
        )
        resources = _resources(sr, "resources", weight_must_be_one=False) or _default_resources()
        shape: tuple[UtilizationShapePoint, ...] = ()
        rtcr = sr.get("requestedToCapacityRatio")
        if type_ == REQUESTED_TO_CAPACITY_RATIO:
            if rtcr is None:
                raise ConfigError(sr.sub("requestedToCapacityRatio"), "required for this type")
            rr = _Reader(rtcr, sr.sub("requestedToCapacityRatio"), ("shape",))
            shape = _shape(rr, "shape")
            rr.done()
        elif rtcr is not None:
            raise ConfigError(
                sr.sub("requestedToCapacityRatio"),
                f"only valid with type {REQUESTED_TO_CAPACITY_RATIO}",
            )
        sr.done()
        strategy = ScoringStrategy(type_, resources, shape)
    r.done()
    return NodeResourcesFitArgs(ignored, groups, strategy)


def _balanced(raw: Any, path: str) -> NodeResourcesBalancedAllocationArgs:
    r = _Reader(raw, path, ("resources",), args=True)
    resources = _resources(r, "resources", weight_must_be_one=True)
    r.done()
    return NodeResourcesBalancedAllocationArgs(resources or _default_resources())


def _inter_pod(raw: Any, path: str) -> InterPodAffinityArgs:
    fields = ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods")
    r = _Reader(raw, path, fields, args=True)
    args = InterPodAffinityArgs(
        r.int_("hardPodAffinityWeight", 1, 0, 100),
        r.bool_("ignorePreferredTermsOfExistingPods", False),
    )
    r.done()
    return args


_NODE_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_INT64_TEXT_RE = re.compile(r"[+-]?[0-9]{1,19}")


def _check_requirements(r: _Reader, key: str, *, fields: bool) -> None:
    """NodeSelectorRequirements strictly, as labels.NewRequirement (label selectors) and
    nodeSelectorRequirementsAsFieldSelector (field selectors) in component-helpers'
    nodeaffinity check them: known fields, operator, key and values."""
    for i, item in enumerate(r.list_(key)):
        er = _Reader(item, f"{r.sub(key)}[{i}]", ("key", "operator", "values"))
        k = er.get("key")
        op = er.get("operator")
        values = er.list_("values")
        er.done()
        if not isinstance(k, str):
            raise ConfigError(er.sub("key"), f"must be a string, got {type_name(k)}")
        if op not in (("In", "NotIn") if fields else _NODE_SELECTOR_OPS):
            raise ConfigError(er.sub("operator"), f"unsupported operator {brief(op)}")
        for j, v in enumerate(values):
            if not isinstance(v, str):
                raise ConfigError(
                    f"{er.sub('values')}[{j}]", f"must be a string, got {type_name(v)}"
                )
        if fields:
            if len(values) != 1:
                raise ConfigError(er.sub("values"), "must have one element")
            continue
        problem = qualified_name(k)
        if problem is not None:
            raise ConfigError(er.sub("key"), f"{brief(k)}: {problem}")
        for j, v in enumerate(values):
            if len(v) > 63 or not _LABEL_VALUE_RE.fullmatch(v):
                raise ConfigError(
                    f"{er.sub('values')}[{j}]", f"{brief(v)} is not a valid label value"
                )
        if op in ("Gt", "Lt") and (
            len(values) != 1
            or not _INT64_TEXT_RE.fullmatch(values[0])
            or not INT64[0] <= int(values[0]) <= INT64[1]
        ):
            raise ConfigError(er.sub("values"), f"for {op}, exactly one int64 value is required")


def _check_node_selector_term(raw: Any, path: str) -> None:
    tr = _Reader(raw, path, ("matchExpressions", "matchFields"))
    _check_requirements(tr, "matchExpressions", fields=False)
    _check_requirements(tr, "matchFields", fields=True)
    tr.done()


def _check_node_selector(raw: Any, path: str) -> None:
    sr = _Reader(raw, path, ("nodeSelectorTerms",))
    for i, term in enumerate(sr.list_("nodeSelectorTerms")):
        _check_node_selector_term(term, f"{sr.sub('nodeSelectorTerms')}[{i}]")
    sr.done()


def _node_affinity(raw: Any, path: str) -> NodeAffinityArgs:
    r = _Reader(raw, path, ("addedAffinity",), args=True)
    added = r.get("addedAffinity")
    required: NodeSelector | None = None
    preferred: list[PreferredSchedulingTerm] = []
    if added is not None:
        req_key = "requiredDuringSchedulingIgnoredDuringExecution"
        pref_key = "preferredDuringSchedulingIgnoredDuringExecution"
        ar = _Reader(added, r.sub("addedAffinity"), (req_key, pref_key))
        try:
            if ar.get(req_key) is not None:
                _check_node_selector(ar.raw[req_key], ar.sub(req_key))
                required = parse_node_selector(ar.raw[req_key], ar.sub(req_key))
            for i, p in enumerate(ar.list_(pref_key)):
                pr = _Reader(p, f"{ar.sub(pref_key)}[{i}]", ("weight", "preference"))
                # int32 as upstream; upstream skips a weight-0 term
                # (nodeaffinity.NewPreferredSchedulingTerms) and puts no bound on the
                # rest. A negative weight gives negative scores, which the framework
                # rejects as out of [0, 100] in every cycle: refused here instead.
                weight = pr.int_("weight", 0, 0)
                raw_term = pr.get("preference") or {}
                _check_node_selector_term(raw_term, pr.sub("preference"))
                term = parse_node_selector_term(raw_term, pr.sub("preference"))
                pr.done()
                if weight:
                    preferred.append(PreferredSchedulingTerm(weight, term))
        except InvalidObject as e:
            raise ConfigError(e.path, e.detail) from None
        ar.done()
    r.done()
    return NodeAffinityArgs(required, tuple(preferred))


_CONSTRAINT_FIELDS = (
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "labelSelector",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
)


def _spread(raw: Any, path: str) -> PodTopologySpreadArgs:
    r = _Reader(raw, path, ("defaultingType", "defaultConstraints"), args=True)
    defaulting = r.choice("defaultingType", DEFAULTING_SYSTEM, (DEFAULTING_SYSTEM, DEFAULTING_LIST))
    constraints: list[SpreadConstraint] = []
    for i, c in enumerate(r.list_("defaultConstraints")):
        cr = _Reader(c, f"{r.sub('defaultConstraints')}[{i}]", _CONSTRAINT_FIELDS)
        max_skew = cr.int_("maxSkew", 0, 1)
        if "maxSkew" not in cr.raw:
            raise ConfigError(cr.sub("maxSkew"), "required")
        topo = cr.get("topologyKey")
        if not isinstance(topo, str) or not topo:
            raise ConfigError(cr.sub("topologyKey"), "must be a non-empty string")
        problem = qualified_name(topo)  # validateTopologyKey: ValidateLabelName
        if problem is not None:
            raise ConfigError(cr.sub("topologyKey"), f"{brief(topo)}: {problem}")
        when = cr.choice("whenUnsatisfiable", "", (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY))
        if not when:
            raise ConfigError(cr.sub("whenUnsatisfiable"), "required")
        if cr.get("labelSelector") is not None:
            raise ConfigError(cr.sub("labelSelector"), "must not be set for default constraints")
        naff = cr.choice("nodeAffinityPolicy", POLICY_HONOR, (POLICY_HONOR, POLICY_IGNORE))
        ntaint = cr.choice("nodeTaintsPolicy", POLICY_IGNORE, (POLICY_HONOR, POLICY_IGNORE))
        cr.done()
        if any(x.topology_key == topo and x.when_unsatisfiable == when for x in constraints):
            raise ConfigError(cr.sub("topologyKey"), f"duplicate constraint {brief(topo)}/{when}")
        # the selector is derived per pod from its owners (services, replica sets, ...)
        constraints.append(
            SpreadConstraint(max_skew, topo, when, LabelSelector.nothing(), 1, naff, ntaint)
        )
    if defaulting == DEFAULTING_SYSTEM and constraints:
        raise ConfigError(
            r.sub("defaultConstraints"), "must be empty when defaultingType is System"
        )
    r.done()
    return PodTopologySpreadArgs(tuple(constraints), defaulting)


def _volume_binding(raw: Any, path: str) -> VolumeBindingArgs:
    r = _Reader(raw, path, ("bindTimeoutSeconds", "shape"), args=True)
    timeout = r.int_("bindTimeoutSeconds", 600, 0, go_type=INT64)
    # StorageCapacityScoring is on by default in 1.37 (beta): a given shape is validated
    # (validateFunctionShape) and scores volumes; empty means the default shape.
    args = VolumeBindingArgs(timeout)
    if r.raw.get("shape"):  # empty: defaulted upstream (SetDefaults_VolumeBindingArgs)
        args = VolumeBindingArgs(timeout, _shape(r, "shape"))
    r.seen.add("shape")
    r.done()
    return args


def _preemption(raw: Any, path: str) -> DefaultPreemptionArgs:
    r = _Reader(
        raw,
        path,
        ("minCandidateNodesPercentage", "minCandidateNodesAbsolute", "mode", "victimScope"),
        args=True,
    )
    pct = r.int_("minCandidateNodesPercentage", 10, 0, 100)
    absolute = r.int_("minCandidateNodesAbsolute", 100, 0)
    if pct == 0 and absolute == 0:
        raise ConfigError(
            r.sub("minCandidateNodesAbsolute"),
            "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero",
        )
    args = DefaultPreemptionArgs(
        pct,
        absolute,
        r.choice("mode", MODE_ASYNC, (MODE_ASYNC, MODE_SYNC)),
        r.choice("victimScope", SCOPE_OWN_PROFILES, (SCOPE_OWN_PROFILES, SCOPE_ALL)),
    )
    r.done()
    return args


_ARGS_API_VERSION = "kubescheduler.config.k8s.io/v1"
_PARSERS: dict[str, tuple[str, Callable[[Any, str], PluginArgs]]] = {
    names.NODE_RESOURCES_FIT: ("NodeResourcesFitArgs", _fit),
    names.NODE_RESOURCES_BALANCED_ALLOCATION: ("NodeResourcesBalancedAllocationArgs", _balanced),
    names.INTER_POD_AFFINITY: ("InterPodAffinityArgs", _inter_pod),
    names.NODE_AFFINITY: ("NodeAffinityArgs", _node_affinity),
    names.POD_TOPOLOGY_SPREAD: ("PodTopologySpreadArgs", _spread),
    names.VOLUME_BINDING: ("VolumeBindingArgs", _volume_binding),
    names.DEFAULT_PREEMPTION: ("DefaultPreemptionArgs", _preemption),
}


def plugin_takes_args(name: str) -> bool:
    return name in _PARSERS


def parse_plugin_args(
    name: str, raw: Mapping[str, Any] | None, path: str = ""
) -> PluginArgs | None:
    """Parse one plugin's args. `path` is where the args live in the file
    (e.g. "profiles[0].pluginConfig[2].args"). Returns None for a plugin that takes
    no args (raw must then be empty). Raises ConfigError."""
    if name not in _PARSERS:
        if name not in names.ALL_PLUGINS:
            raise ConfigError(path, f"unknown plugin {brief(name)}")
        if raw:
            extra = [k for k in raw if k not in ("apiVersion", "kind")]
            if extra:
                key = brief(extra[0], quote=False)
                raise ConfigError(
                    f"{path}.{key}" if path else key, f"plugin {name} takes no arguments"
                )
        return None
    if (
        raw is not None
        and isinstance(raw, Mapping)
        and raw.get("apiVersion")
        not in (
            None,
            _ARGS_API_VERSION,
        )
    ):
        # upstream decodes args through its scheme: another group/version is unknown there
        raise ConfigError(
            f"{path}.apiVersion" if path else "apiVersion",
            f"must be {_ARGS_API_VERSION}, got {brief(raw.get('apiVersion'))}",
        )
    kind, parser = _PARSERS[name]
    if raw is not None and isinstance(raw, Mapping) and raw.get("kind") not in (None, kind):
        raise ConfigError(
            f"{path}.kind" if path else "kind", f"must be {kind}, got {brief(raw.get('kind'))}"
        )
    return parser(raw, path)


def default_plugin_args(name: str) -> PluginArgs | None:
    return parse_plugin_args(name, None, "") if name in _PARSERS else None
