"""The slim pod record (PodInfo) built once from the API server's raw JSON.

Everything the scheduling algorithm reads is parsed once, up front, so plugins never
look at raw dicts: the effective request vector (as upstream's resource.PodRequests,
sidecar-aware), the non-zero requests used by scoring, host ports, tolerations, node
selector and node affinity, pod (anti-)affinity terms with their namespaces resolved,
topology spread constraints with matchLabelKeys merged into the selector, images,
PVC names, owner references and conditions. Each part is read by its own module
(pod_resource_inputs, pod_ports, taints, pod_affinity, pod_spread, pod_volumes);
pod_from_dict assembles the record. Most watch events of a pod change only its status
or spec.nodeName: pod_update_from_dict reads those with the previous record in hand and
reuses its parsed scheduling part when the inputs of that part are unchanged (their
digest, model.pod_digest), giving the record pod_from_dict would.

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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.container_requests import ContainerRequests, container_requests
from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import (
    Problems,
    json_int,
    json_list,
    object_name,
    parse_time,
    string_map,
)
from scheduler.model.node import NodeInfo, normalize_image
from scheduler.model.pod_affinity import (
    AffinityTerm,
    PreferredSchedulingTerm,
    WeightedAffinityTerm,
    affinity_group,
    parse_affinity_term,
    parse_preferred_node_affinity,
    parse_weighted_terms,
)
from scheduler.model.pod_claims import (
    PodResourceClaim,
    parse_pod_resource_claims,
    parse_resource_claim_statuses,
)
from scheduler.model.pod_digest import scheduling_digest
from scheduler.model.pod_ports import HostPort, parse_host_ports
from scheduler.model.pod_resource_inputs import resource_inputs
from scheduler.model.pod_resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    pod_requests,
)
from scheduler.model.pod_spread import (
    DO_NOT_SCHEDULE,
    POLICY_HONOR,
    POLICY_IGNORE,
    SCHEDULE_ANYWAY,
    SpreadConstraint,
    parse_spread_constraints,
)
from scheduler.model.pod_volumes import PodVolume, parse_pod_volumes
from scheduler.model.selectors import NodeSelector, NodeSelectorTerm, parse_node_selector
from scheduler.model.shared_values import Canonical, shared_labels, shared_string
from scheduler.model.taints import Toleration, parse_tolerations

# the record's parts live in their own modules; these names are re-exported because
# code outside the model imports them from here
__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DO_NOT_SCHEDULE",
    "POLICY_HONOR",
    "POLICY_IGNORE",
    "SCHEDULE_ANYWAY",
    "AffinityTerm",
    "HostPort",
    "OwnerRef",
    "PodCondition",
    "PodInfo",
    "PreferredSchedulingTerm",
    "SpreadConstraint",
    "WeightedAffinityTerm",
    "parse_time",
    "pod_from_dict",
    "pod_update_from_dict",
]

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

CONDITION_DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

ResourceVector = Mapping[str, int]


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
    start_time: float | None = None
    deletion_timestamp: float | None = None
    nominated_node_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    requests: ResourceVector = field(default_factory=dict)
    # per container (init containers first), for extended resources backed by DRA;
    # empty unless some container requests a domain-qualified resource
    container_requests: tuple[ContainerRequests, ...] = ()
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
    # spec.resourceClaims (dynamic resource allocation), and status.resourceClaimStatuses:
    # the claims the resourceclaim controller made from templates (read on every event)
    resource_claims: tuple[PodResourceClaim, ...] = ()
    resource_claim_statuses: tuple[tuple[str, str | None], ...] = ()
    # spec.schedulingGroup.podGroupName: the PodGroup (scheduling.k8s.io/v1beta1, gangs)
    # the pod belongs to; "" for a pod scheduled on its own. The API server keeps the field
    # only with the GenericWorkload gate on (pkg/api/pod/util.go).
    pod_group: str = ""
    # what the scheduler could not read (each "path: detail"); see refusal()
    problems: tuple[str, ...] = ()
    # how the scheduling part was read (model.pod_digest, pod_update_from_dict): the
    # digest of its inputs (b"": none, always parse in full) and how many of `problems`,
    # at their head, came from it. Bookkeeping, not part of the pod's value.
    scheduling_digest: bytes = field(default=b"", compare=False, repr=False)
    scheduling_problem_count: int = field(default=0, compare=False, repr=False)

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
    def preempted_by_scheduler(self) -> bool:
        """Terminating because a scheduler preempted it (DisruptionTarget=True,
        reason PreemptionByScheduler)."""
        return any(
            c.type == CONDITION_DISRUPTION_TARGET
            and c.status == "True"
            and c.reason == REASON_PREEMPTION_BY_SCHEDULER
            for c in self.conditions
        )

    def refusal(self, *, gangs: bool = False, dra: bool = False) -> str:
        """Why this scheduler must not place the pod ("" when it may): parts it cannot
        read, resource claims when dynamic resource allocation is off (`dra`: the
        DynamicResourceAllocation gate; placing such a pod without allocating its claims
        would be wrong), or a pod group when the pod-group cycle is off (`gangs`: the
        GenericWorkload gate)."""
        if self.problems:
            return "the scheduler cannot read this pod: " + "; ".join(self.problems)
        if self.resource_claims and not dra:
            return (
                "pod has resource claims (spec.resourceClaims: "
                + ", ".join(c.name for c in self.resource_claims)
                + "); dynamic resource allocation is off in this scheduler "
                "(--feature-gates=DynamicResourceAllocation=true turns it on)"
            )
        if self.pod_group and not gangs:
            # placing members one by one could bind part of a gang, which holds nodes and
            # is worth nothing: refused until the pod-group cycle exists (docs/plans/gangs.md)
            return (
                f'pod belongs to pod group "{self.pod_group}" (spec.schedulingGroup); '
                "workload-aware (gang) scheduling is off in this scheduler "
                "(--feature-gates=GenericWorkload=true turns it on)"
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


# The fields of PodInfo parsed from the pod's scheduling inputs (model.pod_digest): an
# update whose inputs have the same digest reuses them from the previous record. Every
# other field is read from the object on every event (metadata and status fields that
# no parse depends on, spec.nodeName).
_SCHEDULING_FIELDS = (
    "priority",
    "preemption_policy",
    "priority_class_name",
    "scheduler_name",
    "scheduling_gates",
    "requests",
    "container_requests",
    "non_zero_cpu",
    "non_zero_memory",
    "fit_score_cpu",
    "fit_score_memory",
    "host_ports",
    "tolerations",
    "node_selector",
    "required_node_affinity",
    "preferred_node_affinity",
    "preferred_node_affinity_error",
    "required_affinity",
    "required_anti_affinity",
    "preferred_affinity",
    "preferred_anti_affinity",
    "spread_constraints",
    "images",
    "pvc_names",
    "volumes",
    "resource_claims",
    "pod_group",
)


# Scheduling parts by digest, across pods: the replicas of one template (a Deployment,
# a Job, a benchmark's pods) have equal scheduling inputs and so one digest
# (model.pod_digest), and each after the first is read without parsing its spec. In the
# 500-node arrival benchmark the parse of each new pod was about 3% of the scheduler's
# CPU. The parts are immutable and already shared between a pod's versions; bounded,
# the oldest template goes first.
TEMPLATES_KEPT = 256
_templates: dict[bytes, tuple[dict[str, Any], tuple[str, ...]]] = {}


_owner_refs: Canonical[tuple[tuple[str, str, str, bool], ...], tuple[OwnerRef, ...]] = Canonical()
_conditions: Canonical[tuple[tuple[str, str, str, str], ...], tuple[PodCondition, ...]] = (
    Canonical()
)


def _remember_template(digest: bytes, part: dict[str, Any], problems: tuple[str, ...]) -> None:
    if len(_templates) >= TEMPLATES_KEPT:
        del _templates[next(iter(_templates))]
    _templates[digest] = (part, problems)


def pod_from_dict(raw: Mapping[str, Any]) -> PodInfo:
    """Build a PodInfo from a raw v1.Pod dict (managedFields and everything the
    scheduler does not read are dropped). Raises InvalidObject only when the pod has no
    name; anything else it cannot read lands in `problems`."""
    return _read_pod(raw, None)


def pod_update_from_dict(raw: Mapping[str, Any], previous: PodInfo) -> PodInfo:
    """The record pod_from_dict(raw) builds, equal in every field, but reusing the
    parsed scheduling part of `previous` (the record of an earlier version of the same
    pod) when the inputs it was parsed from are unchanged: the bind, the kubelet's
    status updates and our own status patches are then read without parsing the spec
    again."""
    return _read_pod(raw, previous)


def _read_pod(raw: Mapping[str, Any], previous: PodInfo | None) -> PodInfo:
    meta, name = object_name(raw, "pod")
    namespace = str(meta.get("namespace") or "default")
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    digest = scheduling_digest(namespace, name, meta, spec, status)
    # the labels are read on every event: binding adds the node's topology labels
    label_problems: list[str] = []
    labels = Problems(label_problems).read(
        string_map, meta.get("labels"), "metadata.labels", default={}
    )
    scheduling: dict[str, Any]
    if previous is not None and digest and digest == previous.scheduling_digest:
        scheduling = {f: getattr(previous, f) for f in _SCHEDULING_FIELDS}
        found = list(previous.problems[: previous.scheduling_problem_count])
    elif digest and (template := _templates.get(digest)) is not None:
        scheduling, template_problems = template
        found = list(template_problems)
    else:
        found = []
        scheduling = _scheduling_part(name, namespace, labels, spec, status, found)
        if digest:
            _remember_template(digest, scheduling, tuple(found))
    count = len(found)
    found.extend(label_problems)
    problems = Problems(found)
    if not isinstance(spec, dict):
        spec = {}
    if not isinstance(status, dict):
        status = {}
    # replicas repeat their owner and, once running, their conditions: one shared copy
    # of each (model.shared_values)
    owner_fields = tuple(
        (
            str(o.get("kind") or ""),
            str(o.get("name") or ""),
            str(o.get("uid") or ""),
            bool(o.get("controller", False)),
        )
        for o in problems.objects(meta.get("ownerReferences"), "metadata.ownerReferences")
    )
    owners = _owner_refs.get(owner_fields, lambda: tuple(OwnerRef(*f) for f in owner_fields))
    condition_fields = tuple(
        (
            str(c.get("type") or ""),
            str(c.get("status") or ""),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
        )
        for c in problems.objects(status.get("conditions"), "status.conditions")
    )
    conditions = _conditions.get(
        condition_fields, lambda: tuple(PodCondition(*f) for f in condition_fields)
    )
    start_time = problems.read(
        parse_time, status.get("startTime"), "status.startTime", default=None
    )
    deletion_timestamp = problems.read(
        parse_time, meta.get("deletionTimestamp"), "metadata.deletionTimestamp", default=None
    )
    claim_statuses = problems.read(
        parse_resource_claim_statuses,
        status.get("resourceClaimStatuses"),
        "status.resourceClaimStatuses",
        default=(),
    )
    return PodInfo(
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        namespace=shared_string(namespace),
        name=name,
        node_name=shared_string(str(spec.get("nodeName") or "")),
        phase=shared_string(str(status.get("phase") or "Pending")),
        start_time=start_time,
        deletion_timestamp=deletion_timestamp,
        nominated_node_name=str(status.get("nominatedNodeName") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=shared_labels(labels),
        owner_refs=owners,
        conditions=conditions,
        resource_claim_statuses=claim_statuses,
        problems=tuple(found),
        scheduling_digest=digest,
        scheduling_problem_count=count,
        **scheduling,
    )


def _pod_group_name(raw: Any, path: str) -> str:
    """spec.schedulingGroup (core/v1 PodSchedulingGroup, a union whose one member today is
    podGroupName); absent reads as "". The API server validates it, so anything else is a
    pod this scheduler cannot read."""
    if raw is None:
        return ""
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    name = raw.get("podGroupName")
    if not isinstance(name, str) or not name:
        raise InvalidObject(f"{path}.podGroupName", "must be a non-empty string")
    return name


def _scheduling_part(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    raw_spec: Any,
    raw_status: Any,
    found: list[str],
) -> dict[str, Any]:
    """The _SCHEDULING_FIELDS of the record, parsed from the pod's scheduling inputs;
    what cannot be read is appended to `found`."""
    problems = Problems(found)
    spec: dict[str, Any] = raw_spec
    status: dict[str, Any] = raw_status
    if not isinstance(spec, dict):
        problems.add("spec", "must be an object")
        spec = {}
    if not isinstance(status, dict):
        problems.add("status", "must be an object")
        status = {}
    containers = [c for c in problems.objects(spec.get("containers"), "spec.containers")]
    inits = [c for c in problems.objects(spec.get("initContainers"), "spec.initContainers")]
    inputs = resource_inputs(spec, status, found)
    resources = pod_requests(inputs)

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
        problems.add("spec.affinity", "must be an object")
        affinity = {}
    node_aff = affinity.get("nodeAffinity") or {}
    if not isinstance(node_aff, dict):
        problems.add("spec.affinity.nodeAffinity", "must be an object")
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
        parse_preferred_node_affinity,
        node_aff.get(pref),
        f"spec.affinity.nodeAffinity.{pref}",
        default=((), ""),
    )
    pa = affinity.get("podAffinity") or {}
    paa = affinity.get("podAntiAffinity") or {}
    if not isinstance(pa, dict) or not isinstance(paa, dict):
        problems.add("spec.affinity", "pod (anti-)affinity must be objects")
        pa = pa if isinstance(pa, dict) else {}
        paa = paa if isinstance(paa, dict) else {}

    def required_terms(group: Mapping[str, Any], path: str) -> tuple[AffinityTerm, ...]:
        return tuple(
            parse_affinity_term(t, f"{path}[{i}]", namespace)
            for i, t in enumerate(json_list(group.get(req), path))
        )

    ppath, papath = "spec.affinity.podAffinity", "spec.affinity.podAntiAffinity"
    required_affinity = affinity_group(found, lambda: required_terms(pa, f"{ppath}.{req}"))
    required_anti = affinity_group(found, lambda: required_terms(paa, f"{papath}.{req}"))
    preferred_affinity = affinity_group(
        found, lambda: parse_weighted_terms(pa.get(pref), f"{ppath}.{pref}", namespace)
    )
    preferred_anti = affinity_group(
        found, lambda: parse_weighted_terms(paa.get(pref), f"{papath}.{pref}", namespace)
    )

    volumes = problems.read(parse_pod_volumes, spec.get("volumes"), name, default=())
    gates = tuple(
        str(g.get("name"))
        for g in problems.objects(spec.get("schedulingGates"), "spec.schedulingGates")
    )
    claims = problems.read(
        parse_pod_resource_claims,
        spec.get("resourceClaims"),
        "spec.resourceClaims",
        default=(),
    )
    pod_group = problems.read(
        _pod_group_name, spec.get("schedulingGroup"), "spec.schedulingGroup", default=""
    )
    policy = spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        problems.add("spec.preemptionPolicy", f"unsupported value {policy!r}")
        policy = PREEMPT_LOWER_PRIORITY

    return {
        "priority": problems.read(json_int, spec.get("priority"), "spec.priority", 0, default=0),
        "preemption_policy": policy,
        "priority_class_name": str(spec.get("priorityClassName") or ""),
        "scheduler_name": str(spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME),
        "scheduling_gates": gates,
        "requests": resources.requests,
        "container_requests": container_requests(inputs),
        "non_zero_cpu": resources.non_zero_cpu,
        "non_zero_memory": resources.non_zero_memory,
        "fit_score_cpu": resources.fit_score_cpu,
        "fit_score_memory": resources.fit_score_memory,
        "host_ports": parse_host_ports(port_sources, found),
        "tolerations": problems.read(
            parse_tolerations, spec.get("tolerations"), "spec.tolerations", default=()
        ),
        "node_selector": problems.read(
            string_map, spec.get("nodeSelector"), "spec.nodeSelector", default={}
        ),
        "required_node_affinity": required_na,
        "preferred_node_affinity": preferred_na,
        "preferred_node_affinity_error": preferred_error,
        "required_affinity": required_affinity,
        "required_anti_affinity": required_anti,
        "preferred_affinity": preferred_affinity,
        "preferred_anti_affinity": preferred_anti,
        "spread_constraints": problems.read(
            parse_spread_constraints,
            spec.get("topologySpreadConstraints"),
            "spec.topologySpreadConstraints",
            labels,
            default=(),
        ),
        "images": images,
        "pvc_names": tuple(v.claim_name for v in volumes if v.claim_name),
        "volumes": volumes,
        "resource_claims": claims,
        "pod_group": pod_group,
    }
