"""A pod's resource requests, as upstream counts them (k8s.io/component-helpers
resource.PodRequests, v0.37.2, with the options kube-scheduler v1.37.2 passes).

The rule, per resource:
- containers: sum(app containers) + sum(restartable init containers, "sidecars"), then
  the max with every regular init container's request plus the sidecars started before
  it;
- in-place resize (InPlacePodVerticalScaling, GA): the container aggregate is the max of
  what the spec asks, what the kubelet allocated (containerStatuses[].allocatedResources)
  and what is actuated (containerStatuses[].resources.requests), each aggregated the same
  way; when the pod carries pod-level status (status.allocatedResources and
  status.resources.requests, InPlacePodLevelResourcesVerticalScaling, beta on) those two
  are used whole. A resize the kubelet marked Infeasible (condition PodResizePending,
  reason Infeasible) drops the spec from the max: the pod keeps what it has;
- pod-level resources (spec.resources, PodLevelResources, beta on since 1.34): where
  spec.resources.requests names cpu, memory or hugepages-*, that value replaces the
  container aggregate for that resource (max'ed with the pod-level status while a
  pod-level resize is in flight); other resources keep the container aggregate;
- spec.overhead is added last.

Amounts are kept exact as integer nano-units (resource.ParseQuantity rounds every
quantity up to 10^-9, so integers in that unit are exact and sums are plain int
additions) until the end, then rounded up to the unit the scheduler counts in (cpu in
millicores) as upstream rounds the summed Quantity (MilliValue / Value).

Non-zero requests (scoring): each container's missing cpu/memory counts as 100m/200Mi
before aggregation. For an assigned pod (upstream PodInfo.CalculateResource) the
defaults apply only to resources missing from the pod's requests when pod-level
requests are set; otherwise both apply.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.quantity import CPU, MEMORY, parse_quantity

# upstream schedutil.DefaultMilliCPURequest / DefaultMemoryRequest, used for scoring only
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
NANO = 10**9
_NON_MISSING = {
    CPU: DEFAULT_MILLI_CPU_REQUEST * NANO // 1000,
    MEMORY: DEFAULT_MEMORY_REQUEST * NANO,
}

HUGEPAGES_PREFIX = "hugepages-"
CONDITION_RESIZE_PENDING = "PodResizePending"
REASON_INFEASIBLE = "Infeasible"

Exact = dict[str, int]  # resource -> amount in nano-units


def is_pod_level_resource(name: str) -> bool:
    """upstream IsSupportedPodLevelResource: cpu, memory and hugepages-*."""
    return name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX)


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """One container's request lists as read from the pod (None = field absent)."""

    name: str
    spec: Exact | None
    sidecar: bool = False
    allocated: Exact | None = None  # containerStatuses[].allocatedResources
    actuated: Exact | None = None  # containerStatuses[].resources.requests


@dataclass(frozen=True, slots=True)
class PodResourceInputs:
    containers: tuple[ContainerResources, ...]
    init_containers: tuple[ContainerResources, ...]
    overhead: Exact
    pod_level: Exact | None  # spec.resources.requests
    status_allocated: Exact | None  # status.allocatedResources (pod level)
    status_actuated: Exact | None  # status.resources.requests (pod level)
    status_resources_set: bool  # status.resources is present
    resize_infeasible: bool

    @property
    def has_resize_status(self) -> bool:
        """Any allocated/actuated amounts reported, or an Infeasible resize (which
        drops the spec): only then can the count differ from the spec."""
        return (
            self.resize_infeasible
            or self.status_allocated is not None
            or self.status_actuated is not None
            or any(
                c.allocated is not None or c.actuated is not None
                for c in (*self.containers, *self.init_containers)
            )
        )

    @property
    def pod_level_requests_set(self) -> bool:
        """upstream IsPodLevelRequestsSet."""
        return self.pod_level is not None and any(is_pod_level_resource(r) for r in self.pod_level)


@dataclass(frozen=True, slots=True)
class PodRequests:
    requests: dict[str, int]
    non_zero_cpu: int
    non_zero_memory: int
    fit_score_cpu: int
    fit_score_memory: int


def _add(into: Exact, other: Mapping[str, int] | None) -> None:
    for k, v in (other or {}).items():
        into[k] = into.get(k, 0) + v


def _max_into(into: Exact, other: Mapping[str, int] | None) -> None:
    for k, v in (other or {}).items():
        if k not in into or v > into[k]:
            into[k] = v


def _max(first: Mapping[str, int] | None, *rest: Mapping[str, int] | None) -> Exact:
    out: Exact = dict(first or {})
    for r in rest:
        _max_into(out, r)
    return out


def _with_defaults(reqs: Mapping[str, int] | None, defaults: Mapping[str, int]) -> Exact:
    """upstream applyNonMissing: a default for each resource the container lacks."""
    out: Exact = dict(reqs or {})
    for k, v in defaults.items():
        if k not in out:
            out[k] = v
    return out


def _spec(c: ContainerResources, infeasible: bool) -> Exact | None:
    return c.spec


def _allocated(c: ContainerResources, infeasible: bool) -> Exact | None:
    if c.allocated is not None:
        return c.allocated
    return None if infeasible else c.spec


def _actuated(c: ContainerResources, infeasible: bool) -> Exact | None:
    if c.actuated is not None:
        return c.actuated
    if c.allocated is not None:
        return c.allocated
    return None if infeasible else c.spec


def _aggregate(pod: PodResourceInputs, pick: Any, defaults: Mapping[str, int] | None) -> Exact:
    """upstream aggregateContainerResourcesByFn."""
    infeasible = pod.resize_infeasible
    result: Exact = {}
    for c in pod.containers:
        reqs = pick(c, infeasible)
        _add(result, _with_defaults(reqs, defaults) if defaults else reqs)
    restartable: Exact = {}
    init_max: Exact = {}
    for c in pod.init_containers:
        reqs = pick(c, infeasible)
        if defaults:
            reqs = _with_defaults(reqs, defaults)
        if c.sidecar:
            _add(result, reqs)
            _add(restartable, reqs)
            effective = restartable
        else:
            effective = dict(reqs or {})
            _add(effective, restartable)
        _max_into(init_max, effective)
    _max_into(result, init_max)
    return result


def _resized(
    pod: PodResourceInputs, spec: Exact, allocated: Exact | None, actuated: Exact | None
) -> Exact:
    if pod.resize_infeasible:
        return _max(actuated, allocated)
    return _max(spec, actuated, allocated)


def exact_pod_requests(pod: PodResourceInputs, defaults: Mapping[str, int] | None = None) -> Exact:
    """upstream PodRequests with UseStatusResources and
    InPlacePodLevelResourcesVerticalScalingEnabled (both on in v1.37.2)."""
    spec = _aggregate(pod, _spec, defaults)
    if not pod.has_resize_status:
        # nothing allocated or actuated is reported: both read the spec, the max is it
        reqs = spec
    elif pod.status_allocated is not None and pod.status_actuated is not None:
        reqs = _resized(pod, spec, pod.status_allocated, pod.status_actuated)
    else:
        allocated = _aggregate(pod, _allocated, defaults)
        actuated = _aggregate(pod, _actuated, defaults)
        reqs = _resized(pod, spec, allocated, actuated)
    if pod.pod_level_requests_set:
        effective: Mapping[str, int] = pod.pod_level or {}
        if pod.status_resources_set:
            effective = _max(
                None if pod.resize_infeasible else pod.pod_level,
                pod.status_actuated,
                pod.status_allocated,
            )
        for name, amount in effective.items():
            if is_pod_level_resource(name):
                reqs[name] = amount
    _add(reqs, pod.overhead)
    return reqs


def _away_from_zero(value: int, unit: int) -> int:
    return -((-value) // unit) if value >= 0 else value // unit


def to_units(name: str, nanos: int) -> int:
    """Quantity.MilliValue() for cpu, Value() for everything else (both round away
    from zero)."""
    return _away_from_zero(nanos, NANO // 1000) if name == CPU else _away_from_zero(nanos, NANO)


def pod_requests(pod: PodResourceInputs) -> PodRequests:
    exact = exact_pod_requests(pod)
    if pod.pod_level_requests_set:
        # upstream getNonMissingContainerRequests: with pod-level requests, a default
        # only for what the pod's requests lack altogether
        defaults = {k: v for k, v in _NON_MISSING.items() if k not in exact}
    else:
        defaults = _NON_MISSING
    non_zero = exact_pod_requests(pod, defaults) if defaults else exact
    requests = {k: to_units(k, v) for k, v in exact.items()}
    # zero amounts carry no weight; cpu and memory stay for the plugins that list them
    requests = {k: v for k, v in requests.items() if v or k in (CPU, MEMORY)}
    # NodeResourcesFit's scorer (LeastAllocated, MostAllocated, RequestedToCapacityRatio)
    # is built by upstream's getScorer without the feature flags (v1.37.2 fit.go), so it
    # reads the incoming pod with SkipPodLevelResources and without status resources:
    # the containers' requests with the non-zero defaults, plus overhead.
    fit_score = _aggregate(pod, _spec, _NON_MISSING)
    _add(fit_score, pod.overhead)
    return PodRequests(
        requests,
        to_units(CPU, non_zero.get(CPU, 0)),
        to_units(MEMORY, non_zero.get(MEMORY, 0)),
        to_units(CPU, fit_score.get(CPU, 0)),
        to_units(MEMORY, fit_score.get(MEMORY, 0)),
    )


def parse_resource_list(raw: Any, path: str, problems: list[str]) -> Exact | None:
    """A v1.ResourceList; None when absent. An amount that does not parse (the API
    server never stores one) is left out and reported in `problems`."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.append(str(InvalidObject(path, "must be a map")))
        return None
    out: Exact = {}
    for name, q in raw.items():
        try:
            out[str(name)] = _quantity(q) if isinstance(q, str) else _nanos(parse_quantity(q))
        except InvalidObject as e:
            problems.append(str(InvalidObject(f"{path}.{name}", e.detail)))
    return out


def _nanos(value: Fraction) -> int:
    """ParseQuantity's rounding: up to a whole nano-unit, away from zero."""
    scaled = value * NANO
    return -((-scaled.numerator) // scaled.denominator) if scaled >= 0 else scaled.__floor__()


@functools.lru_cache(maxsize=4096)
def _quantity(text: str) -> int:
    """Quantities repeat across pods ("100m", "64Mi"): parse each text once."""
    return _nanos(parse_quantity(text))
