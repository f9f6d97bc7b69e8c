"""Reading and validating every plugin's arguments (kubescheduler.config.k8s.io/v1);
the typed args themselves and their defaults are scheduler.config.plugin_args.

`parse_plugin_args(name, raw, path)` turns a pluginConfig[].args dict into the plugin's
args dataclass (or None for a plugin without args), raising ConfigError that names the
field path for unknown fields, wrong types and bad values. `default_plugin_args(name)`
gives the defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.config import names
from scheduler.config.errors import ConfigError, brief, type_name
from scheduler.config.k8s_names import qualified_name
from scheduler.config.plugin_args import (
    DEFAULTING_LIST,
    DEFAULTING_SYSTEM,
    LEAST_ALLOCATED,
    MODE_ASYNC,
    MODE_SYNC,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    SCOPE_ALL,
    SCOPE_OWN_PROFILES,
    DefaultPreemptionArgs,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PluginArgs,
    PodTopologySpreadArgs,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
    VolumeBindingArgs,
    default_resources,
)
from scheduler.config.reader import INT64, Fields
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

# the typed args are re-exported: the plugins import them from here
__all__ = [
    "DEFAULTING_LIST",
    "DEFAULTING_SYSTEM",
    "LEAST_ALLOCATED",
    "MODE_ASYNC",
    "MODE_SYNC",
    "MOST_ALLOCATED",
    "REQUESTED_TO_CAPACITY_RATIO",
    "SCOPE_ALL",
    "SCOPE_OWN_PROFILES",
    "DefaultPreemptionArgs",
    "InterPodAffinityArgs",
    "NodeAffinityArgs",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "PluginArgs",
    "PodTopologySpreadArgs",
    "ResourceSpec",
    "ScoringStrategy",
    "UtilizationShapePoint",
    "VolumeBindingArgs",
    "default_plugin_args",
    "parse_plugin_args",
    "plugin_takes_args",
]


def _resources(r: Fields, key: str, *, weight_must_be_one: bool) -> tuple[ResourceSpec, ...] | None:
    """ResourceSpec list; weight int64, 0 (unset) means 1 as upstream's defaulting
    (SetDefaults_NodeResourcesFitArgs / ..BalancedAllocationArgs), then in (0, 100]
    (validateResources) or exactly 1 for BalancedAllocation."""
    if r.raw.get(key) is None:
        r.skip(key)
        return None
    out = []
    seen: set[str] = set()
    for i, item in enumerate(r.list_(key)):
        ir = Fields(item, f"{r.sub(key)}[{i}]", ("name", "weight"))
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


def _shape(r: Fields, key: str) -> tuple[UtilizationShapePoint, ...]:
    """validateFunctionShape: at least one point, utilization in [0, 100] strictly
    increasing, score in [0, 10] (MaxCustomPriorityScore)."""
    points: list[UtilizationShapePoint] = []
    for i, p in enumerate(r.list_(key)):
        pr = Fields(p, f"{r.sub(key)}[{i}]", ("utilization", "score"))
        util = pr.int_("utilization", 0, lo=0, hi=100)
        score = pr.int_("score", 0, lo=0, hi=10)
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
    r = Fields(
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
        sr = Fields(
            r.raw["scoringStrategy"],
            r.sub("scoringStrategy"),
            ("type", "resources", "requestedToCapacityRatio"),
        )
        type_ = sr.choice(
            "type", LEAST_ALLOCATED, (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
        )
        resources = _resources(sr, "resources", weight_must_be_one=False) or default_resources()
        shape: tuple[UtilizationShapePoint, ...] = ()
        rtcr = sr.get("requestedToCapacityRatio")
        if type_ == REQUESTED_TO_CAPACITY_RATIO:
            if rtcr is None:
                raise ConfigError(sr.sub("requestedToCapacityRatio"), "required for this type")
            rr = Fields(rtcr, sr.sub("requestedToCapacityRatio"), ("shape",))
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
    r = Fields(raw, path, ("resources",), args=True)
    resources = _resources(r, "resources", weight_must_be_one=True)
    r.done()
    return NodeResourcesBalancedAllocationArgs(resources or default_resources())


def _inter_pod(raw: Any, path: str) -> InterPodAffinityArgs:
    fields = ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods")
    r = Fields(raw, path, fields, args=True)
    args = InterPodAffinityArgs(
        r.int_("hardPodAffinityWeight", 1, lo=0, hi=100),
        r.bool_("ignorePreferredTermsOfExistingPods", False),
    )
    r.done()
    return args


_NODE_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_INT64_TEXT_RE = re.compile(r"[+-]?[0-9]{1,19}")


def _check_requirements(r: Fields, key: str, *, fields: bool) -> None:
    """NodeSelectorRequirements strictly, as labels.NewRequirement (label selectors) and
    nodeSelectorRequirementsAsFieldSelector (field selectors) in component-helpers'
    nodeaffinity check them: known fields, operator, key and values."""
    for i, item in enumerate(r.list_(key)):
        er = Fields(item, f"{r.sub(key)}[{i}]", ("key", "operator", "values"))
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
    tr = Fields(raw, path, ("matchExpressions", "matchFields"))
    _check_requirements(tr, "matchExpressions", fields=False)
    _check_requirements(tr, "matchFields", fields=True)
    tr.done()


def _check_node_selector(raw: Any, path: str) -> None:
    sr = Fields(raw, path, ("nodeSelectorTerms",))
    for i, term in enumerate(sr.list_("nodeSelectorTerms")):
        _check_node_selector_term(term, f"{sr.sub('nodeSelectorTerms')}[{i}]")
    sr.done()


def _node_affinity(raw: Any, path: str) -> NodeAffinityArgs:
    r = Fields(raw, path, ("addedAffinity",), args=True)
    added = r.get("addedAffinity")
    required: NodeSelector | None = None
    preferred: list[PreferredSchedulingTerm] = []
    if added is not None:
        req_key = "requiredDuringSchedulingIgnoredDuringExecution"
        pref_key = "preferredDuringSchedulingIgnoredDuringExecution"
        ar = Fields(added, r.sub("addedAffinity"), (req_key, pref_key))
        try:
            if ar.get(req_key) is not None:
                _check_node_selector(ar.raw[req_key], ar.sub(req_key))
                required = parse_node_selector(ar.raw[req_key], ar.sub(req_key))
            for i, p in enumerate(ar.list_(pref_key)):
                pr = Fields(p, f"{ar.sub(pref_key)}[{i}]", ("weight", "preference"))
                # int32 as upstream; upstream skips a weight-0 term
                # (nodeaffinity.NewPreferredSchedulingTerms) and puts no bound on the
                # rest. A negative weight gives negative scores, which the framework
                # rejects as out of [0, 100] in every cycle: refused here instead.
                weight = pr.int_("weight", 0, lo=0)
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
    r = Fields(raw, path, ("defaultingType", "defaultConstraints"), args=True)
    defaulting = r.choice("defaultingType", DEFAULTING_SYSTEM, (DEFAULTING_SYSTEM, DEFAULTING_LIST))
    constraints: list[SpreadConstraint] = []
    for i, c in enumerate(r.list_("defaultConstraints")):
        cr = Fields(c, f"{r.sub('defaultConstraints')}[{i}]", _CONSTRAINT_FIELDS)
        max_skew = cr.int_("maxSkew", 0, lo=1)
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
    r = Fields(raw, path, ("bindTimeoutSeconds", "shape"), args=True)
    timeout = r.int_("bindTimeoutSeconds", 600, lo=0, go_type=INT64)
    # StorageCapacityScoring is on by default in 1.37 (beta): a given shape is validated
    # (validateFunctionShape) and scores volumes; empty means the default shape.
    args = VolumeBindingArgs(timeout)
    if r.raw.get("shape"):  # empty: defaulted upstream (SetDefaults_VolumeBindingArgs)
        args = VolumeBindingArgs(timeout, _shape(r, "shape"))
    r.skip("shape")
    r.done()
    return args


def _preemption(raw: Any, path: str) -> DefaultPreemptionArgs:
    r = Fields(
        raw,
        path,
        ("minCandidateNodesPercentage", "minCandidateNodesAbsolute", "mode", "victimScope"),
        args=True,
    )
    pct = r.int_("minCandidateNodesPercentage", 10, lo=0, hi=100)
    absolute = r.int_("minCandidateNodesAbsolute", 100, lo=0)
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
        # (whether `name` is a plugin at all, the loader asked the plugin classes first)
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
