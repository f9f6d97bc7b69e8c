"""The slim pod record (PodInfo) built once from the API server's raw JSON.

Everything the scheduling algorithm reads is parsed here, up front, so plugins never
look at raw dicts: the effective request vector (as upstream's resource.PodRequests,
sidecar-aware), the non-zero requests used by scoring, host ports, tolerations, node
selector and node affinity, pod (anti-)affinity terms with their namespaces resolved,
topology spread constraints with matchLabelKeys merged into the selector, images,
PVC names, owner references and conditions.

Nothing the API server accepts makes a pod unreadable (upstream keeps every pod it
receives): a node-affinity term that does not parse fails alone, lazily, as upstream's
(see model.selectors); a pod-affinity group that does not parse is empty, as upstream's
framework.NewPodInfo leaves it. JSON the scheduler cannot understand at all (wrong
shapes the API server never stores) is recorded in `PodInfo.problems` and the rest of the
pod is still read, so its requests and ports keep counting on its node; a pending pod
with problems is refused with an event (eventhandlers). Only a pod without a name raises
InvalidObject.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, cast

from scheduler.model.errors import InvalidObject
from scheduler.model.node import NodeInfo, normalize_image
from scheduler.model.pod_resources import (
    CONDITION_RESIZE_PENDING,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    REASON_INFEASIBLE,
    ContainerResources,
    PodResourceInputs,
    parse_resource_list,
    pod_requests,
)
from scheduler.model.pod_volumes import PodVolume, parse_pod_volumes
from scheduler.model.selectors import (
    IN,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
    aggregate_message,
    parse_label_selector,
    parse_node_selector,
    parse_node_selector_term,
)
from scheduler.model.taints import Toleration

__all__ = ["DEFAULT_MEMORY_REQUEST", "DEFAULT_MILLI_CPU_REQUEST"]

_T = TypeVar("_T")
_G = TypeVar("_G")

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
POLICY_HONOR = "Honor"
POLICY_IGNORE = "Ignore"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

CONDITION_DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

ResourceVector = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    host_ip: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """Same protocol and port, and either side binds every address or both bind
        the same address (upstream HostPortInfo)."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.host_ip in ("0.0.0.0", other.host_ip) or other.host_ip == "0.0.0.0"


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

    def matches(self, pod: PodInfo, ns_labels: Mapping[str, str] | None) -> bool:
        return self.matches_namespace(pod.namespace, ns_labels) and self.selector.matches(
            pod.labels
        )


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = POLICY_HONOR
    node_taints_policy: str = POLICY_IGNORE


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


@dataclass(frozen=True, slots=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""  # compared before the scheduler rewrites PodScheduled


@dataclass(frozen=True, slots=True, kw_only=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    priority: int = 0
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    node_name: str = ""
    phase: str = "Pending"
    scheduling_gates: tuple[str, ...] = ()
    creation_timestamp: float = 0.0
    start_time: float | None = None
    deletion_timestamp: float | None = None
    nominated_node_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    requests: ResourceVector = field(default_factory=dict)
    non_zero_cpu: int = DEFAULT_MILLI_CPU_REQUEST
    non_zero_memory: int = DEFAULT_MEMORY_REQUEST
    # the pod's cpu/memory as NodeResourcesFit's score counts an incoming pod: non-zero
    # defaults, pod-level resources NOT applied (see model.pod_resources)
    fit_score_cpu: int = DEFAULT_MILLI_CPU_REQUEST
    fit_score_memory: int = DEFAULT_MEMORY_REQUEST
    host_ports: tuple[HostPort, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_affinity: NodeSelector | None = None
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    images: tuple[str, ...] = ()  # normalized, one per (init and app) container
    pvc_names: tuple[str, ...] = ()
    volumes: tuple[PodVolume, ...] = ()  # for the volume plugins (model/pod_volumes.py)
    owner_refs: tuple[OwnerRef, ...] = ()
    conditions: tuple[PodCondition, ...] = ()
    priority_class_name: str = ""  # spec.priorityClassName (PreemptionPolicy matches on it)
    # upstream NewPreferredSchedulingTerms' error for the preferred node-affinity terms
    # (they are then all dropped, and NodeAffinity's PreScore fails with this text)
    preferred_node_affinity_error: str = ""
    # names of spec.resourceClaims (dynamic resource allocation)
    resource_claims: tuple[str, ...] = ()
    # what the scheduler could not read (each "path: detail"); see refusal()
    problems: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def has_pod_affinity(self) -> bool:
        """Any pod affinity or anti-affinity term (upstream PodsWithAffinity)."""
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )

    @property
    def has_required_anti_affinity(self) -> bool:
        return bool(self.required_anti_affinity)

    @property
    def preempted_by_scheduler(self) -> bool:
        """Terminating because a scheduler preempted it (DisruptionTarget=True,
        reason PreemptionByScheduler)."""
        return any(
            c.type == CONDITION_DISRUPTION_TARGET
            and c.status == "True"
            and c.reason == REASON_PREEMPTION_BY_SCHEDULER
            for c in self.conditions
        )

    def refusal(self) -> str:
        """Why this scheduler must not place the pod ("" when it may): parts it cannot
        read, or resource claims (dynamic resource allocation is not implemented, and
        placing such a pod without allocating its claims would be wrong)."""
        if self.problems:
            return "the scheduler cannot read this pod: " + "; ".join(self.problems)
        if self.resource_claims:
            return (
                "pod has resource claims (spec.resourceClaims: "
                + ", ".join(self.resource_claims)
                + "); this scheduler does not implement dynamic resource allocation"
            )
        return ""

    def condition(self, type_: str) -> PodCondition | None:
        for c in self.conditions:
            if c.type == type_:
                return c
        return None

    def matches_required_node_affinity(self, node: NodeInfo) -> bool:
        """nodeSelector and required node affinity (upstream GetRequiredNodeAffinity)."""
        for k, v in self.node_selector.items():
            if node.labels.get(k) != v:
                return False
        if self.required_node_affinity is not None:
            return self.required_node_affinity.matches(node.labels, node.name)
        return True


# ---------------------------------------------------------------- parsing helpers


def parse_time(value: Any, path: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidObject(path, "must be an RFC 3339 timestamp")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError as e:
        raise InvalidObject(path, f"invalid timestamp {value!r}") from e


def _str_map(raw: Any, path: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise InvalidObject(path, "must be a map of strings")
    return dict(raw)


def _list(raw: Any, path: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidObject(path, "must be a list")
    return raw


def _int(raw: Any, path: str, default: int) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidObject(path, f"must be an integer, got {raw!r}")
    return raw


class _Problems:
    """Collects what could not be read, so one bad field costs only itself."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def read(self, fn: Callable[..., _T], *args: Any, default: Any) -> _T:
        """fn(*args), or `default` (which must be a _T) with the problem recorded."""
        try:
            return fn(*args)
        except InvalidObject as e:
            self.found.append(str(e))
            return cast(_T, default)


def _container_resources(
    c: Any, path: str, statuses: Mapping[str, Any], problems: list[str]
) -> ContainerResources:
    if not isinstance(c, dict):
        problems.append(str(InvalidObject(path, "must be an object")))
        return ContainerResources("", None)
    name = str(c.get("name") or "")
    resources = c.get("resources") or {}
    if not isinstance(resources, dict):
        problems.append(str(InvalidObject(f"{path}.resources", "must be an object")))
        resources = {}
    raw = resources.get("requests")
    if raw is None:
        # the API server defaults requests to limits; a record built elsewhere may not
        raw = resources.get("limits")
    spec = parse_resource_list(raw, f"{path}.resources.requests", problems)
    allocated = actuated = None
    cs = statuses.get(name)
    if isinstance(cs, dict):
        allocated = parse_resource_list(
            cs.get("allocatedResources"),
            f"status.containerStatuses[{name}].allocatedResources",
            problems,
        )
        res = cs.get("resources")
        if isinstance(res, dict):
            actuated = parse_resource_list(
                res.get("requests"),
                f"status.containerStatuses[{name}].resources.requests",
                problems,
            )
    return ContainerResources(name, spec, c.get("restartPolicy") == "Always", allocated, actuated)


def _container_statuses(status: Mapping[str, Any]) -> dict[str, Any]:
    """Container name -> status; app containers' statuses win over init containers'
    (upstream findContainerStatus looks there first)."""
    out: dict[str, Any] = {}
    for field_name in ("initContainerStatuses", "containerStatuses"):
        entries = status.get(field_name)
        if isinstance(entries, list):
            for cs in entries:
                if isinstance(cs, dict) and isinstance(cs.get("name"), str):
                    out[cs["name"]] = cs
    return out


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    """upstream IsPodResizeInfeasible: the first PodResizePending condition says
    Infeasible."""
    conditions = status.get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, dict) and c.get("type") == CONDITION_RESIZE_PENDING:
            return bool(c.get("reason") == REASON_INFEASIBLE)
    return False


def resource_inputs(
    spec: Mapping[str, Any], status: Mapping[str, Any], problems: list[str]
) -> PodResourceInputs:
    """Everything PodRequests reads from a pod, parsed once."""
    statuses = _container_statuses(status)
    containers = spec.get("containers")
    inits = spec.get("initContainers")
    pod_res = spec.get("resources")
    status_res = status.get("resources")
    return PodResourceInputs(
        containers=tuple(
            _container_resources(c, f"spec.containers[{i}]", statuses, problems)
            for i, c in enumerate(containers if isinstance(containers, list) else ())
        ),
        init_containers=tuple(
            _container_resources(c, f"spec.initContainers[{i}]", statuses, problems)
            for i, c in enumerate(inits if isinstance(inits, list) else ())
        ),
        overhead=parse_resource_list(spec.get("overhead"), "spec.overhead", problems) or {},
        pod_level=parse_resource_list(
            pod_res.get("requests") if isinstance(pod_res, dict) else None,
            "spec.resources.requests",
            problems,
        ),
        status_allocated=parse_resource_list(
            status.get("allocatedResources"), "status.allocatedResources", problems
        ),
        status_actuated=parse_resource_list(
            status_res.get("requests") if isinstance(status_res, dict) else None,
            "status.resources.requests",
            problems,
        ),
        status_resources_set=isinstance(status_res, dict),
        resize_infeasible=_resize_infeasible(status),
    )


def _merge_match_label_keys(
    selector: LabelSelector, labels: Mapping[str, str], match: Iterable[str]
) -> LabelSelector:
    """Topology spread's matchLabelKeys: the pod's current value of each key it has
    (upstream's scheduler merges these itself, unlike pod affinity's)."""
    extra = tuple(Requirement(k, IN, frozenset((labels[k],))) for k in match if k in labels)
    return selector.with_requirements(extra)


def _affinity_term(raw: Any, path: str, namespace: str) -> AffinityTerm:
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
    namespaces = _list(raw.get("namespaces"), f"{path}.namespaces")
    if not all(isinstance(n, str) for n in namespaces):
        raise InvalidObject(f"{path}.namespaces", "must be a list of strings")
    raw_ns_sel = raw.get("namespaceSelector")
    ns_selector = parse_label_selector(raw_ns_sel, f"{path}.namespaceSelector")
    ns_set = frozenset(namespaces)
    if not ns_set and raw_ns_sel is None:
        ns_set = frozenset((namespace,))
    return AffinityTerm(selector, ns_set, ns_selector, topo)


def _weighted_terms(raw: Any, path: str, namespace: str) -> tuple[WeightedAffinityTerm, ...]:
    out = []
    for i, w in enumerate(_list(raw, path)):
        p = f"{path}[{i}]"
        if not isinstance(w, dict):
            raise InvalidObject(p, "must be an object")
        weight = _int(w.get("weight"), f"{p}.weight", 0)
        if not 1 <= weight <= 100:
            raise InvalidObject(f"{p}.weight", "must be in the range 1-100")
        term = _affinity_term(w.get("podAffinityTerm"), f"{p}.podAffinityTerm", namespace)
        out.append(WeightedAffinityTerm(weight, term))
    return tuple(out)


def _spread_constraints(
    raw: Any, path: str, labels: Mapping[str, str]
) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, c in enumerate(_list(raw, path)):
        p = f"{path}[{i}]"
        if not isinstance(c, dict):
            raise InvalidObject(p, "must be an object")
        max_skew = _int(c.get("maxSkew"), f"{p}.maxSkew", 0)
        if max_skew < 1:
            raise InvalidObject(f"{p}.maxSkew", "must be greater than zero")
        topo = c.get("topologyKey")
        if not isinstance(topo, str) or not topo:
            raise InvalidObject(f"{p}.topologyKey", "must be a non-empty string")
        when = c.get("whenUnsatisfiable", DO_NOT_SCHEDULE)
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise InvalidObject(f"{p}.whenUnsatisfiable", f"unsupported value {when!r}")
        min_domains = _int(c.get("minDomains"), f"{p}.minDomains", 1)
        if min_domains < 1:
            raise InvalidObject(f"{p}.minDomains", "must be greater than zero")
        naff = c.get("nodeAffinityPolicy") or POLICY_HONOR
        ntaint = c.get("nodeTaintsPolicy") or POLICY_IGNORE
        for name, v in (("nodeAffinityPolicy", naff), ("nodeTaintsPolicy", ntaint)):
            if v not in (POLICY_HONOR, POLICY_IGNORE):
                raise InvalidObject(f"{p}.{name}", f"unsupported value {v!r}")
        selector = parse_label_selector(c.get("labelSelector"), f"{p}.labelSelector")
        keys = _list(c.get("matchLabelKeys"), f"{p}.matchLabelKeys")
        if not all(isinstance(k, str) for k in keys):  # `k in labels` hashes each key
            raise InvalidObject(f"{p}.matchLabelKeys", "must be a list of strings")
        selector = _merge_match_label_keys(selector, labels, keys)
        out.append(SpreadConstraint(max_skew, topo, when, selector, min_domains, naff, ntaint))
    return tuple(out)


def _host_ports(containers: Iterable[tuple[Any, str]], problems: list[str]) -> tuple[HostPort, ...]:
    """Every host port; one that cannot be read is reported and skipped, the others
    still count."""
    out: list[HostPort] = []
    for c, path in containers:
        ports = c.get("ports")
        if ports is None:
            continue
        if not isinstance(ports, list):
            problems.append(str(InvalidObject(f"{path}.ports", "must be a list")))
            continue
        for j, p in enumerate(ports):
            hp = p.get("hostPort") if isinstance(p, dict) else None
            if not isinstance(p, dict) or (
                hp is not None and (isinstance(hp, bool) or not isinstance(hp, int))
            ):
                problems.append(str(InvalidObject(f"{path}.ports[{j}]", "unreadable port")))
                continue
            if not hp or hp <= 0:
                continue
            out.append(
                HostPort(str(p.get("protocol") or "TCP"), str(p.get("hostIP") or "0.0.0.0"), hp)
            )
    return tuple(out)


def _tolerations(raw: Any, path: str) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(_list(raw, path)):
        if not isinstance(t, dict):
            raise InvalidObject(f"{path}[{i}]", "must be an object")
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise InvalidObject(f"{path}[{i}].operator", f"unsupported operator {op!r}")
        secs = t.get("tolerationSeconds")
        out.append(
            Toleration(
                str(t.get("key") or ""),
                op,
                str(t.get("value") or ""),
                str(t.get("effect") or ""),
                secs if isinstance(secs, int) else None,
            )
        )
    return tuple(out)


def pod_from_dict(raw: Mapping[str, Any]) -> PodInfo:
    """Build a PodInfo from a raw v1.Pod dict (managedFields and everything the
    scheduler does not read are dropped). Raises InvalidObject only when the pod has no
    name; anything else it cannot read lands in `problems`."""
    if not isinstance(raw, Mapping):
        raise InvalidObject("", "pod must be an object")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InvalidObject("metadata", "must be an object")
    name = meta.get("name")
    namespace = meta.get("namespace") or "default"
    if not isinstance(name, str) or not name:
        raise InvalidObject("metadata.name", "must be a non-empty string")
    return _pod_from_dict(raw, meta, name, str(namespace))


def _preferred_node_affinity(
    raw: Any, path: str
) -> tuple[tuple[PreferredSchedulingTerm, ...], str]:
    """upstream NewPreferredSchedulingTerms: terms with weight 0 or no requirements are
    skipped; if any other term does not parse, no term is kept and the flattened error
    is returned (NodeAffinity's PreScore reports it)."""
    terms: list[PreferredSchedulingTerm] = []
    errors: list[str] = []
    for i, t in enumerate(_list(raw, path)):
        if not isinstance(t, dict):
            raise InvalidObject(f"{path}[{i}]", "must be an object")
        weight = _int(t.get("weight"), f"{path}[{i}].weight", 0)
        term = parse_node_selector_term(
            t.get("preference") or {}, f"{path}[{i}].preference", f"[{i}]", strict=False
        )
        if weight == 0 or term.is_empty:
            continue
        errors.extend(term.errors)
        terms.append(PreferredSchedulingTerm(weight, term))
    if errors:
        return (), aggregate_message(errors)
    return tuple(terms), ""


def _affinity_group(
    problems: list[str],
    parse: Callable[[], tuple[_G, ...]],
) -> tuple[_G, ...]:
    """One pod (anti-)affinity group. A term whose selector does not parse empties its
    whole group, as upstream's GetAffinityTerms returns no terms on the first error;
    for a pod to be placed the problem is also recorded (upstream fails its PreFilter)."""
    try:
        return parse()
    except InvalidObject as e:
        problems.append(str(e))
        return ()


def _pod_from_dict(
    raw: Mapping[str, Any], meta: dict[str, Any], name: str, namespace: str
) -> PodInfo:
    problems = _Problems()
    found = problems.found
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    if not isinstance(spec, dict):
        found.append(str(InvalidObject("spec", "must be an object")))
        spec = {}
    if not isinstance(status, dict):
        found.append(str(InvalidObject("status", "must be an object")))
        status = {}
    labels = problems.read(_str_map, meta.get("labels"), "metadata.labels", default={})

    containers = [
        c
        for c in problems.read(_list, spec.get("containers"), "spec.containers", default=[])
        if isinstance(c, dict)
    ]
    inits = [
        c
        for c in problems.read(_list, spec.get("initContainers"), "spec.initContainers", default=[])
        if isinstance(c, dict)
    ]
    resources = pod_requests(resource_inputs(spec, status, found))

    port_sources = [(c, f"spec.containers[{i}]") for i, c in enumerate(containers)]
    port_sources += [
        (c, f"spec.initContainers[{i}]")
        for i, c in enumerate(inits)
        if c.get("restartPolicy") == "Always"
    ]
    images = tuple(
        normalize_image(str(c.get("image") or "")) for c in [*inits, *containers] if c.get("image")
    )

    affinity = spec.get("affinity") or {}
    if not isinstance(affinity, dict):
        found.append(str(InvalidObject("spec.affinity", "must be an object")))
        affinity = {}
    node_aff = affinity.get("nodeAffinity") or {}
    if not isinstance(node_aff, dict):
        found.append(str(InvalidObject("spec.affinity.nodeAffinity", "must be an object")))
        node_aff = {}
    required_na: NodeSelector | None = None
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    if node_aff.get(req) is not None:
        # a required selector we cannot read at all matches no node (never too many)
        required_na = problems.read(
            lambda: parse_node_selector(
                node_aff[req], f"spec.affinity.nodeAffinity.{req}", strict=False
            ),
            default=NodeSelector((NodeSelectorTerm(errors=("unreadable",)),)),
        )
    preferred_na, preferred_error = problems.read(
        _preferred_node_affinity,
        node_aff.get(pref),
        f"spec.affinity.nodeAffinity.{pref}",
        default=((), ""),
    )
    pa = affinity.get("podAffinity") or {}
    paa = affinity.get("podAntiAffinity") or {}
    if not isinstance(pa, dict) or not isinstance(paa, dict):
        found.append(str(InvalidObject("spec.affinity", "pod (anti-)affinity must be objects")))
        pa = pa if isinstance(pa, dict) else {}
        paa = paa if isinstance(paa, dict) else {}

    def required_terms(group: Mapping[str, Any], path: str) -> tuple[AffinityTerm, ...]:
        return tuple(
            _affinity_term(t, f"{path}[{i}]", namespace)
            for i, t in enumerate(_list(group.get(req), path))
        )

    ppath, papath = "spec.affinity.podAffinity", "spec.affinity.podAntiAffinity"
    required_affinity = _affinity_group(found, lambda: required_terms(pa, f"{ppath}.{req}"))
    required_anti = _affinity_group(found, lambda: required_terms(paa, f"{papath}.{req}"))
    preferred_affinity = _affinity_group(
        found, lambda: _weighted_terms(pa.get(pref), f"{ppath}.{pref}", namespace)
    )
    preferred_anti = _affinity_group(
        found, lambda: _weighted_terms(paa.get(pref), f"{papath}.{pref}", namespace)
    )

    pvcs = problems.read(_pvc_names, spec.get("volumes"), name, default=[])
    volumes = problems.read(parse_pod_volumes, spec.get("volumes"), name, default=())
    owners = tuple(
        OwnerRef(
            str(o.get("kind") or ""),
            str(o.get("name") or ""),
            str(o.get("uid") or ""),
            bool(o.get("controller", False)),
        )
        for o in problems.read(
            _list, meta.get("ownerReferences"), "metadata.ownerReferences", default=[]
        )
        if isinstance(o, dict)
    )
    conditions = tuple(
        PodCondition(
            str(c.get("type") or ""),
            str(c.get("status") or ""),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
        )
        for c in problems.read(_list, status.get("conditions"), "status.conditions", default=[])
        if isinstance(c, dict)
    )
    gates = tuple(
        str(g.get("name"))
        for g in problems.read(
            _list, spec.get("schedulingGates"), "spec.schedulingGates", default=[]
        )
        if isinstance(g, dict)
    )
    claims = tuple(
        str(c.get("name") or "")
        for c in problems.read(_list, spec.get("resourceClaims"), "spec.resourceClaims", default=[])
        if isinstance(c, dict)
    )
    policy = spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        found.append(str(InvalidObject("spec.preemptionPolicy", f"unsupported value {policy!r}")))
        policy = PREEMPT_LOWER_PRIORITY

    return PodInfo(
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        namespace=namespace,
        name=name,
        priority=problems.read(_int, spec.get("priority"), "spec.priority", 0, default=0),
        preemption_policy=policy,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        scheduler_name=str(spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME),
        node_name=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        scheduling_gates=gates,
        creation_timestamp=problems.read(
            parse_time, meta.get("creationTimestamp"), "metadata.creationTimestamp", default=None
        )
        or 0.0,
        start_time=problems.read(
            parse_time, status.get("startTime"), "status.startTime", default=None
        ),
        deletion_timestamp=problems.read(
            parse_time, meta.get("deletionTimestamp"), "metadata.deletionTimestamp", default=None
        ),
        nominated_node_name=str(status.get("nominatedNodeName") or ""),
        labels=labels,
        resource_version=str(meta.get("resourceVersion") or ""),
        requests=resources.requests,
        non_zero_cpu=resources.non_zero_cpu,
        non_zero_memory=resources.non_zero_memory,
        fit_score_cpu=resources.fit_score_cpu,
        fit_score_memory=resources.fit_score_memory,
        host_ports=_host_ports(port_sources, found),
        tolerations=problems.read(
            _tolerations, spec.get("tolerations"), "spec.tolerations", default=()
        ),
        node_selector=problems.read(
            _str_map, spec.get("nodeSelector"), "spec.nodeSelector", default={}
        ),
        required_node_affinity=required_na,
        preferred_node_affinity=preferred_na,
        preferred_node_affinity_error=preferred_error,
        required_affinity=required_affinity,
        required_anti_affinity=required_anti,
        preferred_affinity=preferred_affinity,
        preferred_anti_affinity=preferred_anti,
        spread_constraints=problems.read(
            _spread_constraints,
            spec.get("topologySpreadConstraints"),
            "spec.topologySpreadConstraints",
            labels,
            default=(),
        ),
        images=images,
        pvc_names=tuple(pvcs),
        volumes=volumes,
        owner_refs=owners,
        conditions=conditions,
        resource_claims=claims,
        problems=tuple(found),
    )


def _pvc_names(raw: Any, pod_name: str) -> list[str]:
    pvcs: list[str] = []
    for i, v in enumerate(_list(raw, "spec.volumes")):
        if not isinstance(v, dict):
            raise InvalidObject(f"spec.volumes[{i}]", "must be an object")
        claim = v.get("persistentVolumeClaim")
        if isinstance(claim, dict):
            cn = claim.get("claimName")
            if not isinstance(cn, str) or not cn:
                raise InvalidObject(
                    f"spec.volumes[{i}].persistentVolumeClaim.claimName", "must be set"
                )
            pvcs.append(cn)
        elif isinstance(v.get("ephemeral"), dict):
            pvcs.append(f"{pod_name}-{v.get('name')}")
    return pvcs
