"""The slim pod record (PodInfo) built once from the API server's raw JSON.

Everything the scheduling algorithm reads is parsed here, up front, so plugins never
look at raw dicts: the effective request vector (as upstream's resource.PodRequests,
sidecar-aware), the non-zero requests used by scoring, host ports, tolerations, node
selector and node affinity, pod (anti-)affinity terms with their namespaces resolved,
topology spread constraints with matchLabelKeys merged into the selector, images,
PVC names, owner references and conditions.

A malformed pod raises InvalidObject naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.node import NodeInfo, normalize_image
from scheduler.model.quantity import CPU, MEMORY, parse_resource
from scheduler.model.selectors import (
    IN,
    NOT_IN,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
    parse_label_selector,
    parse_node_selector,
    parse_node_selector_term,
)
from scheduler.model.taints import Toleration

# upstream schedutil.DefaultMilliCPURequest / DefaultMemoryRequest, used for scoring only
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

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
    owner_refs: tuple[OwnerRef, ...] = ()
    conditions: tuple[PodCondition, ...] = ()
    priority_class_name: str = ""  # spec.priorityClassName (PreemptionPolicy matches on it)

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


def _container_requests(c: Any, path: str) -> dict[str, int]:
    if not isinstance(c, dict):
        raise InvalidObject(path, "must be an object")
    resources = c.get("resources") or {}
    if not isinstance(resources, dict):
        raise InvalidObject(f"{path}.resources", "must be an object")
    raw = resources.get("requests")
    if raw is None:
        # the API server defaults requests to limits; a record built elsewhere may not
        raw = resources.get("limits") or {}
    if not isinstance(raw, dict):
        raise InvalidObject(f"{path}.resources.requests", "must be a map")
    out: dict[str, int] = {}
    for name, q in raw.items():
        try:
            out[name] = parse_resource(name, q)
        except InvalidObject as e:
            raise InvalidObject(f"{path}.resources.requests.{name}", e.detail) from e
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max_into(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _with_defaults(reqs: Mapping[str, int]) -> dict[str, int]:
    out = dict(reqs)
    out.setdefault(CPU, DEFAULT_MILLI_CPU_REQUEST)
    out.setdefault(MEMORY, DEFAULT_MEMORY_REQUEST)
    return out


def compute_requests(
    containers: list[dict[str, int]],
    init_containers: list[tuple[dict[str, int], bool]],
    overhead: Mapping[str, int],
    non_missing_defaults: bool = False,
) -> dict[str, int]:
    """upstream resource.PodRequests: max(sum(app containers) + sum(sidecars),
    max over init containers of (its request + sidecars started before it)) + overhead.
    With `non_missing_defaults`, unset cpu/memory of each container count as
    100m/200Mi (upstream NonMissingContainerRequests, used by scoring)."""
    fix = _with_defaults if non_missing_defaults else dict
    reqs: dict[str, int] = {}
    for c in containers:
        _add(reqs, fix(c))
    restartable: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c, is_sidecar in init_containers:
        creqs = fix(c)
        if is_sidecar:
            _add(reqs, creqs)
            _add(restartable, creqs)
            effective = dict(restartable)
        else:
            effective = dict(creqs)
            _add(effective, restartable)
        _max_into(init_max, effective)
    _max_into(reqs, init_max)
    _add(reqs, overhead)
    return {k: v for k, v in reqs.items() if v or k in (CPU, MEMORY)}


def _merge_match_label_keys(
    selector: LabelSelector,
    labels: Mapping[str, str],
    match: Iterable[str],
    mismatch: Iterable[str],
) -> LabelSelector:
    extra: list[Requirement] = []
    for k in match:
        if k in labels:
            extra.append(Requirement(k, IN, frozenset((labels[k],))))
    for k in mismatch:
        if k in labels:
            extra.append(Requirement(k, NOT_IN, frozenset((labels[k],))))
    return selector.with_requirements(tuple(extra))


def _affinity_term(raw: Any, path: str, namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    topo = raw.get("topologyKey")
    if not isinstance(topo, str) or not topo:
        raise InvalidObject(f"{path}.topologyKey", "must be a non-empty string")
    selector = parse_label_selector(raw.get("labelSelector"), f"{path}.labelSelector")
    selector = _merge_match_label_keys(
        selector,
        labels,
        _list(raw.get("matchLabelKeys"), f"{path}.matchLabelKeys"),
        _list(raw.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys"),
    )
    namespaces = _list(raw.get("namespaces"), f"{path}.namespaces")
    if not all(isinstance(n, str) for n in namespaces):
        raise InvalidObject(f"{path}.namespaces", "must be a list of strings")
    raw_ns_sel = raw.get("namespaceSelector")
    ns_selector = parse_label_selector(raw_ns_sel, f"{path}.namespaceSelector")
    ns_set = frozenset(namespaces)
    if not ns_set and raw_ns_sel is None:
        ns_set = frozenset((namespace,))
    return AffinityTerm(selector, ns_set, ns_selector, topo)


def _weighted_terms(
    raw: Any, path: str, namespace: str, labels: Mapping[str, str]
) -> tuple[WeightedAffinityTerm, ...]:
    out = []
    for i, w in enumerate(_list(raw, path)):
        p = f"{path}[{i}]"
        if not isinstance(w, dict):
            raise InvalidObject(p, "must be an object")
        weight = _int(w.get("weight"), f"{p}.weight", 0)
        if not 1 <= weight <= 100:
            raise InvalidObject(f"{p}.weight", "must be in the range 1-100")
        term = _affinity_term(w.get("podAffinityTerm"), f"{p}.podAffinityTerm", namespace, labels)
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
        selector = _merge_match_label_keys(
            selector, labels, _list(c.get("matchLabelKeys"), f"{p}.matchLabelKeys"), ()
        )
        out.append(SpreadConstraint(max_skew, topo, when, selector, min_domains, naff, ntaint))
    return tuple(out)


def _host_ports(containers: Iterable[tuple[Any, str]]) -> tuple[HostPort, ...]:
    out: list[HostPort] = []
    for c, path in containers:
        for j, p in enumerate(_list(c.get("ports"), f"{path}.ports")):
            if not isinstance(p, dict):
                raise InvalidObject(f"{path}.ports[{j}]", "must be an object")
            hp = _int(p.get("hostPort"), f"{path}.ports[{j}].hostPort", 0)
            if hp <= 0:
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
    scheduler does not read are dropped). Raises InvalidObject."""
    if not isinstance(raw, Mapping):
        raise InvalidObject("", "pod must be an object")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InvalidObject("metadata", "must be an object")
    name = meta.get("name")
    namespace = meta.get("namespace") or "default"
    if not isinstance(name, str) or not name:
        raise InvalidObject("metadata.name", "must be a non-empty string")
    key = f"{namespace}/{name}"
    try:
        return _pod_from_dict(raw, meta, name, str(namespace))
    except InvalidObject as e:
        if e.key:
            raise
        raise InvalidObject(e.path, e.detail, key) from e


def _pod_from_dict(
    raw: Mapping[str, Any], meta: dict[str, Any], name: str, namespace: str
) -> PodInfo:
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    if not isinstance(spec, dict):
        raise InvalidObject("spec", "must be an object")
    if not isinstance(status, dict):
        raise InvalidObject("status", "must be an object")
    labels = _str_map(meta.get("labels"), "metadata.labels")

    containers = _list(spec.get("containers"), "spec.containers")
    inits = _list(spec.get("initContainers"), "spec.initContainers")
    app_reqs = [_container_requests(c, f"spec.containers[{i}]") for i, c in enumerate(containers)]
    init_reqs = [
        (_container_requests(c, f"spec.initContainers[{i}]"), c.get("restartPolicy") == "Always")
        for i, c in enumerate(inits)
    ]
    overhead: dict[str, int] = {}
    for res, q in (spec.get("overhead") or {}).items():
        try:
            overhead[res] = parse_resource(res, q)
        except InvalidObject as e:
            raise InvalidObject(f"spec.overhead.{res}", e.detail) from e
    requests = compute_requests(app_reqs, init_reqs, overhead)
    non_zero = compute_requests(app_reqs, init_reqs, overhead, non_missing_defaults=True)

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
        raise InvalidObject("spec.affinity", "must be an object")
    node_aff = affinity.get("nodeAffinity") or {}
    required_na: NodeSelector | None = None
    if node_aff.get("requiredDuringSchedulingIgnoredDuringExecution") is not None:
        required_na = parse_node_selector(
            node_aff["requiredDuringSchedulingIgnoredDuringExecution"],
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )
    preferred_na = []
    ppath = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for i, t in enumerate(
        _list(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), ppath)
    ):
        if not isinstance(t, dict):
            raise InvalidObject(f"{ppath}[{i}]", "must be an object")
        weight = _int(t.get("weight"), f"{ppath}[{i}].weight", 0)
        if not 1 <= weight <= 100:
            raise InvalidObject(f"{ppath}[{i}].weight", "must be in the range 1-100")
        preferred_na.append(
            PreferredSchedulingTerm(
                weight,
                parse_node_selector_term(t.get("preference") or {}, f"{ppath}[{i}].preference"),
            )
        )
    pa = affinity.get("podAffinity") or {}
    paa = affinity.get("podAntiAffinity") or {}
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    required_affinity = tuple(
        _affinity_term(t, f"spec.affinity.podAffinity.{req}[{i}]", namespace, labels)
        for i, t in enumerate(_list(pa.get(req), f"spec.affinity.podAffinity.{req}"))
    )
    required_anti = tuple(
        _affinity_term(t, f"spec.affinity.podAntiAffinity.{req}[{i}]", namespace, labels)
        for i, t in enumerate(_list(paa.get(req), f"spec.affinity.podAntiAffinity.{req}"))
    )

    volumes = _list(spec.get("volumes"), "spec.volumes")
    pvcs: list[str] = []
    for i, v in enumerate(volumes):
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
            pvcs.append(f"{name}-{v.get('name')}")

    owners = tuple(
        OwnerRef(
            str(o.get("kind") or ""),
            str(o.get("name") or ""),
            str(o.get("uid") or ""),
            bool(o.get("controller", False)),
        )
        for o in _list(meta.get("ownerReferences"), "metadata.ownerReferences")
        if isinstance(o, dict)
    )
    conditions = tuple(
        PodCondition(
            str(c.get("type") or ""),
            str(c.get("status") or ""),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
        )
        for c in _list(status.get("conditions"), "status.conditions")
        if isinstance(c, dict)
    )
    gates = tuple(
        str(g.get("name"))
        for g in _list(spec.get("schedulingGates"), "spec.schedulingGates")
        if isinstance(g, dict)
    )
    policy = spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        raise InvalidObject("spec.preemptionPolicy", f"unsupported value {policy!r}")

    return PodInfo(
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        namespace=namespace,
        name=name,
        priority=_int(spec.get("priority"), "spec.priority", 0),
        preemption_policy=policy,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        scheduler_name=str(spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME),
        node_name=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        scheduling_gates=gates,
        creation_timestamp=parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
        or 0.0,
        start_time=parse_time(status.get("startTime"), "status.startTime"),
        deletion_timestamp=parse_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        nominated_node_name=str(status.get("nominatedNodeName") or ""),
        labels=labels,
        resource_version=str(meta.get("resourceVersion") or ""),
        requests=requests,
        non_zero_cpu=non_zero.get(CPU, 0),
        non_zero_memory=non_zero.get(MEMORY, 0),
        host_ports=_host_ports(port_sources),
        tolerations=_tolerations(spec.get("tolerations"), "spec.tolerations"),
        node_selector=_str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        required_node_affinity=required_na,
        preferred_node_affinity=tuple(preferred_na),
        required_affinity=required_affinity,
        required_anti_affinity=required_anti,
        preferred_affinity=_weighted_terms(
            pa.get(pref), f"spec.affinity.podAffinity.{pref}", namespace, labels
        ),
        preferred_anti_affinity=_weighted_terms(
            paa.get(pref), f"spec.affinity.podAntiAffinity.{pref}", namespace, labels
        ),
        spread_constraints=_spread_constraints(
            spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints", labels
        ),
        images=images,
        pvc_names=tuple(pvcs),
        owner_refs=owners,
        conditions=conditions,
    )
