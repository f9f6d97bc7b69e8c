"""The slim PodGroup record (scheduling.k8s.io/v1beta1, GenericWorkload), as the gang cycle
will read it (docs/plans/gangs.md section 2).

Kept: the scheduling policy (basic, or gang with its minCount), the disruption mode
(single pod or all members together), the group's priority and priority class, and the
workload it was made for. Semantics from k8s.io/api@v0.37.2 scheduling/v1beta1/types.go:
- `spec.schedulingPolicy` is a union of `basic: {}` and `gang: {minCount}`; a basic group
  behaves as a gang of minCount 1 (framework/plugins/gangscheduling/gangscheduling.go);
- `spec.disruptionMode` is a union of `single: {}` and `all: {}`, defaulted to single by
  the API server (pkg/apis/scheduling/v1beta1 defaults);
- the group's priority is `spec.priority`, absent counting as 0 (pkg/scheduler/util/
  utils.go); the Priority admission plugin fills it from `spec.priorityClassName`.
The API server validates all of it, so a shape it never stores is InvalidObject naming
the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import json_int, object_name

__all__ = ["INITIALLY_SCHEDULED", "GroupCondition", "PodGroupInfo", "pod_group_from_dict"]

# the one condition the scheduler writes on a PodGroup (scheduling/v1beta1 types.go)
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"


@dataclass(frozen=True, slots=True)
class GroupCondition:
    """status.conditions[type=PodGroupInitiallyScheduled] as last read."""

    status: str
    reason: str
    message: str
    last_transition_time: str  # as the API server holds it (RFC 3339), kept on rewrites
    observed_generation: int = 0

Policy = Literal["basic", "gang"]
DisruptionMode = Literal["single", "all"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PodGroupInfo:
    namespace: str
    name: str
    uid: str = ""
    policy: Policy = "basic"
    min_count: int = 1  # the gang's minCount; 1 for a basic group
    disruption_mode: DisruptionMode = "single"
    priority: int = 0
    priority_class_name: str = ""
    workload_name: str = ""  # spec.workloadRef.workloadName ("" when none)
    workload_template: str = ""  # spec.workloadRef.templateName
    resource_version: str = ""
    generation: int = 0
    initially_scheduled: GroupCondition | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_gang(self) -> bool:
        return self.policy == "gang"


def _one_of(raw: Any, path: str, members: tuple[str, ...]) -> tuple[str, Mapping[str, Any]]:
    """A union object: exactly one of `members` set, to an object."""
    if not isinstance(raw, Mapping):
        raise InvalidObject(path, "must be an object")
    set_ = [m for m in members if raw.get(m) is not None]
    if len(set_) != 1:
        raise InvalidObject(path, f"must set exactly one of {', '.join(members)}")
    value = raw[set_[0]]
    if not isinstance(value, Mapping):
        raise InvalidObject(f"{path}.{set_[0]}", "must be an object")
    return set_[0], value


def pod_group_from_dict(raw: Mapping[str, Any]) -> PodGroupInfo:
    meta, name = object_name(raw, "PodGroup")
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        raise InvalidObject("spec", "must be an object")
    kind, policy = _one_of(spec.get("schedulingPolicy"), "spec.schedulingPolicy", ("basic", "gang"))
    min_count = 1
    if kind == "gang":
        min_count = json_int(policy.get("minCount"), "spec.schedulingPolicy.gang.minCount", 0)
        if min_count < 1:
            raise InvalidObject("spec.schedulingPolicy.gang.minCount", "must be at least 1")
    mode = "single"
    if spec.get("disruptionMode") is not None:
        mode, _ = _one_of(spec.get("disruptionMode"), "spec.disruptionMode", ("single", "all"))
    ref = spec.get("workloadRef") or {}
    if not isinstance(ref, Mapping):
        raise InvalidObject("spec.workloadRef", "must be an object")
    return PodGroupInfo(
        generation=json_int(meta.get("generation"), "metadata.generation", 0),
        initially_scheduled=_initially_scheduled(raw.get("status")),
        namespace=str(meta.get("namespace") or ""),
        name=name,
        uid=str(meta.get("uid") or ""),
        policy="gang" if kind == "gang" else "basic",
        min_count=min_count,
        disruption_mode="all" if mode == "all" else "single",
        priority=json_int(spec.get("priority"), "spec.priority", 0),
        priority_class_name=str(spec.get("priorityClassName") or ""),
        workload_name=str(ref.get("workloadName") or ""),
        workload_template=str(ref.get("templateName") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def _initially_scheduled(status: Any) -> GroupCondition | None:
    """The scheduler's own condition; anything malformed reads as absent (it is only used
    to skip a write that would change nothing)."""
    if not isinstance(status, Mapping):
        return None
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == INITIALLY_SCHEDULED:
            return GroupCondition(
                status=str(c.get("status") or ""),
                reason=str(c.get("reason") or ""),
                message=str(c.get("message") or ""),
                last_transition_time=str(c.get("lastTransitionTime") or ""),
                observed_generation=(
                    g if isinstance(g := c.get("observedGeneration"), int) else 0
                ),
            )
    return None
