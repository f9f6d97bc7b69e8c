"""What upstream's PodRequests reads from a pod, taken from its raw JSON once: every
container's spec requests with the kubelet's allocated and actuated amounts (in-place
resize), overhead, pod-level requests and the pod-level status (model.pod_resources
does the arithmetic). An amount that cannot be read is reported in `problems` and left
out; the rest still counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.pod_resources import (
    CONDITION_RESIZE_PENDING,
    REASON_INFEASIBLE,
    ContainerResources,
    PodResourceInputs,
    parse_resource_list,
)


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
