"""The resource.k8s.io/v1 objects the allocator reads, as immutable records built once
from the API server's JSON (k8s.io/api@v0.37.2/resource/v1/types.go): ResourceSlices and
their devices, DeviceClasses, ResourceClaims (a template's spec is a claim's spec).

Only what allocation reads is kept. Each device carries its `selector.Device`, the view
CEL selectors see, built here once: a new slice revision gives new records, which is
what the selectors' result cache relies on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from scheduler.dra.selector import AttributeValue, Device, VersionText
from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import json_list, parse_time
from scheduler.model.quantity import parse_quantity
from scheduler.model.selectors import NodeSelector, parse_node_selector

ALLOCATION_MODE_EXACT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
# types.go: AllocationResultsMaxSize, FirstAvailableDeviceRequestMaxSize
ALLOCATION_RESULTS_MAX_SIZE = 32
FIRST_AVAILABLE_MAX_SIZE = 8

TAINT_NO_SCHEDULE = "NoSchedule"
TAINT_NO_EXECUTE = "NoExecute"


# --- devices and slices ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapacityRange:
    min: Fraction | None = None
    max: Fraction | None = None
    step: Fraction | None = None


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    valid_range: CapacityRange | None = None


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Fraction
    request_policy: RequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, Fraction]


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, eq=False, slots=True)
class DeviceRecord:
    name: str
    # the attribute values as the API has them (a version stays text): constraints
    # compare them as upstream does, type by type
    attributes: Mapping[str, AttributeValue | VersionText]
    capacity: Mapping[str, DeviceCapacity]
    consumes_counters: tuple[CounterConsumption, ...]
    node_name: str
    node_selector: NodeSelector | None
    all_nodes: bool
    taints: tuple[DeviceTaint, ...]
    # the selector as the API has it: an allocation result copies its requirements
    node_selector_raw: Mapping[str, Any] | None
    binds_to_node: bool
    binding_conditions: tuple[str, ...]
    binding_failure_conditions: tuple[str, ...]
    allow_multiple_allocations: bool | None
    # the view CEL selectors see
    selector_view: Device


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Fraction]


@dataclass(frozen=True, eq=False, slots=True)
class SliceRecord:
    name: str
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_name: str
    node_selector: NodeSelector | None
    node_selector_raw: Mapping[str, Any] | None
    all_nodes: bool
    per_device_node_selection: bool
    devices: tuple[DeviceRecord, ...]
    shared_counters: tuple[CounterSet, ...]
    # a device consumes counters with compatibility groups (DRADeviceCompatibilityGroups,
    # off in v1.37.2: such a slice is ignored, its pool then incomplete)
    uses_compatibility_groups: bool = False


def _obj(raw: Any, path: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    return raw


def _str(raw: Any, path: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise InvalidObject(path, "must be a string")
    return raw


def _int(raw: Any, path: str) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidObject(path, "must be an integer")
    return raw


def _bool(raw: Any, path: str) -> bool | None:
    if raw is None:
        return None
    if not isinstance(raw, bool):
        raise InvalidObject(path, "must be a boolean")
    return raw


def _quantity(raw: Any, path: str) -> Fraction:
    try:
        return parse_quantity(raw)
    except InvalidObject as err:
        raise InvalidObject(path, str(err)) from err


def _attribute(raw: Any, path: str) -> AttributeValue | VersionText:
    # exactly one of int, bool, string, version (validation.go); the list forms belong
    # to DRAListTypeAttributes, off in v1.37.2
    value = _obj(raw, path)
    if "int" in value:
        return _int(value["int"], f"{path}.int")
    if "bool" in value:
        flag = _bool(value["bool"], f"{path}.bool")
        return bool(flag)
    if "string" in value:
        return _str(value["string"], f"{path}.string")
    if "version" in value:
        return VersionText(_str(value["version"], f"{path}.version"))
    raise InvalidObject(path, "exactly one value must be specified")


def _request_policy(raw: Any, path: str) -> RequestPolicy | None:
    if raw is None:
        return None
    policy = _obj(raw, path)
    valid_range = None
    if policy.get("validRange") is not None:
        r = _obj(policy["validRange"], f"{path}.validRange")
        valid_range = CapacityRange(
            *(
                _quantity(r[k], f"{path}.validRange.{k}") if r.get(k) is not None else None
                for k in ("min", "max", "step")
            )
        )
    return RequestPolicy(
        default=(
            _quantity(policy["default"], f"{path}.default")
            if policy.get("default") is not None
            else None
        ),
        valid_values=tuple(
            _quantity(v, f"{path}.validValues[{i}]")
            for i, v in enumerate(json_list(policy.get("validValues"), f"{path}.validValues"))
        ),
        valid_range=valid_range,
    )


def _counters(raw: Any, path: str) -> dict[str, Fraction]:
    return {
        str(name): _quantity(_obj(c, f"{path}.{name}").get("value"), f"{path}.{name}.value")
        for name, c in _obj(raw, path).items()
    }


def _node_selector(raw: Any, path: str) -> NodeSelector | None:
    return None if raw is None else parse_node_selector(raw, path)


def _names(obj: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
    """A list of strings (condition names), absent read as empty."""
    return tuple(_str(c, f"{path}.{key}") for c in json_list(obj.get(key), f"{path}.{key}"))


def _taint(t: dict[str, Any], path: str) -> DeviceTaint:
    return DeviceTaint(
        _str(t.get("key"), f"{path}.key"),
        _str(t.get("value"), f"{path}.value"),
        _str(t.get("effect"), f"{path}.effect"),
    )


def device_from_dict(raw: Any, driver: str, path: str) -> DeviceRecord:
    d = _obj(raw, path)
    attributes = {
        str(name): _attribute(value, f"{path}.attributes[{name}]")
        for name, value in _obj(d.get("attributes"), f"{path}.attributes").items()
    }
    capacity = {
        str(name): DeviceCapacity(
            _quantity(_obj(c, f"{path}.capacity[{name}]").get("value"), f"{path}.capacity[{name}]"),
            _request_policy(c.get("requestPolicy"), f"{path}.capacity[{name}].requestPolicy"),
        )
        for name, c in _obj(d.get("capacity"), f"{path}.capacity").items()
    }
    consumes = tuple(
        CounterConsumption(
            _str(_obj(c, f"{path}.consumesCounters[{i}]").get("counterSet"), f"{path}.counterSet"),
            _counters(c.get("counters"), f"{path}.consumesCounters[{i}].counters"),
        )
        for i, c in enumerate(json_list(d.get("consumesCounters"), f"{path}.consumesCounters"))
    )
    taints = tuple(
        _taint(t, f"{path}.taints[{i}]")
        for i, t in enumerate(json_list(d.get("taints"), f"{path}.taints"))
        if isinstance(t, dict)
    )
    allow_multiple = _bool(d.get("allowMultipleAllocations"), f"{path}.allowMultipleAllocations")
    return DeviceRecord(
        name=_str(d.get("name"), f"{path}.name"),
        attributes=attributes,
        capacity=capacity,
        consumes_counters=consumes,
        node_name=_str(d.get("nodeName"), f"{path}.nodeName"),
        node_selector=_node_selector(d.get("nodeSelector"), f"{path}.nodeSelector"),
        all_nodes=bool(_bool(d.get("allNodes"), f"{path}.allNodes")),
        taints=taints,
        node_selector_raw=d.get("nodeSelector"),
        binds_to_node=bool(_bool(d.get("bindsToNode"), f"{path}.bindsToNode")),
        binding_conditions=_names(d, "bindingConditions", path),
        binding_failure_conditions=_names(d, "bindingFailureConditions", path),
        allow_multiple_allocations=allow_multiple,
        selector_view=Device(
            driver=driver,
            attributes=attributes,
            capacity={name: c.value for name, c in capacity.items()},
            allow_multiple_allocations=bool(allow_multiple),
        ),
    )


def slice_from_dict(raw: Any) -> SliceRecord:
    obj = _obj(raw, "")
    name = _str(_obj(obj.get("metadata"), "metadata").get("name"), "metadata.name")
    spec = _obj(obj.get("spec"), "spec")
    driver = _str(spec.get("driver"), "spec.driver")
    pool = _obj(spec.get("pool"), "spec.pool")
    raw_devices = json_list(spec.get("devices"), "spec.devices")
    compat = any(
        isinstance(d, dict)
        and any(
            isinstance(c, dict) and c.get("compatibilityGroups")
            for c in json_list(d.get("consumesCounters"), "")
        )
        for d in raw_devices
    )
    return SliceRecord(
        name=name,
        driver=driver,
        pool=_str(pool.get("name"), "spec.pool.name"),
        generation=_int(pool.get("generation"), "spec.pool.generation"),
        resource_slice_count=_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount"),
        node_name=_str(spec.get("nodeName"), "spec.nodeName"),
        node_selector=_node_selector(spec.get("nodeSelector"), "spec.nodeSelector"),
        node_selector_raw=spec.get("nodeSelector"),
        all_nodes=bool(_bool(spec.get("allNodes"), "spec.allNodes")),
        per_device_node_selection=bool(
            _bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection")
        ),
        devices=tuple(
            device_from_dict(d, driver, f"spec.devices[{i}]") for i, d in enumerate(raw_devices)
        ),
        shared_counters=tuple(
            CounterSet(
                _str(_obj(c, f"spec.sharedCounters[{i}]").get("name"), "name"),
                _counters(c.get("counters"), f"spec.sharedCounters[{i}].counters"),
            )
            for i, c in enumerate(json_list(spec.get("sharedCounters"), "spec.sharedCounters"))
        ),
        uses_compatibility_groups=compat,
    )


# --- device taint rules ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """resource.k8s.io/v1 DeviceTaintRule (DRADeviceTaintRules, GA and on in v1.37.2): a
    taint added to every device its selector names. No selector selects nothing; an
    empty one, every device; driver, pool and device narrow it (all must match)."""

    name: str
    has_selector: bool
    driver: str | None
    pool: str | None
    device: str | None
    taint: DeviceTaint

    def applies_to(self, slice_: SliceRecord) -> bool:
        return (
            self.has_selector
            and (self.driver is None or self.driver == slice_.driver)
            and (self.pool is None or self.pool == slice_.pool)
        )


def _optional_str(raw: Any, path: str) -> str | None:
    return None if raw is None else _str(raw, path)


def device_taint_rule_from_dict(raw: Any) -> DeviceTaintRule:
    obj = _obj(raw, "")
    spec = _obj(obj.get("spec"), "spec")
    selector = spec.get("deviceSelector")
    sel = _obj(selector, "spec.deviceSelector")
    return DeviceTaintRule(
        name=_str(_obj(obj.get("metadata"), "metadata").get("name"), "metadata.name"),
        has_selector=selector is not None,
        driver=_optional_str(sel.get("driver"), "spec.deviceSelector.driver"),
        pool=_optional_str(sel.get("pool"), "spec.deviceSelector.pool"),
        device=_optional_str(sel.get("device"), "spec.deviceSelector.device"),
        taint=_taint(_obj(spec.get("taint"), "spec.taint"), "spec.taint"),
    )


def with_taint_rules(slice_: SliceRecord, rules: Iterable[DeviceTaintRule]) -> SliceRecord:
    """The slice as the allocator sees it: each device with the taints of the rules that
    select it appended (upstream's resourceslice tracker, applyPatches); the same object
    when no rule applies. A patched device keeps its selector view, so selector results
    cached for it stay valid (taints are not part of what a selector sees)."""
    applying = [r for r in rules if r.applies_to(slice_)]
    if not applying:
        return slice_
    devices = []
    changed = False
    for d in slice_.devices:
        extra = tuple(r.taint for r in applying if r.device is None or r.device == d.name)
        if extra:
            changed = True
            devices.append(replace(d, taints=(*d.taints, *extra)))
        else:
            devices.append(d)
    return replace(slice_, devices=tuple(devices)) if changed else slice_


# --- classes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClassRecord:
    name: str
    selectors: tuple[str, ...]  # CEL expressions ("" for a selector that is not CEL)
    # the raw config entries (copied into an allocation result as they are)
    config: tuple[Mapping[str, Any], ...] = ()
    extended_resource_name: str = ""
    # metadata.creationTimestamp (seconds since the epoch; 0 when absent): the newer of
    # two classes naming one extended resource wins it (dra/class_resolver.py)
    created: float = 0.0


def _selectors(raw: Any, path: str) -> tuple[str, ...]:
    return tuple(
        _str(_obj(_obj(s, f"{path}[{i}]").get("cel"), f"{path}[{i}].cel").get("expression"), path)
        for i, s in enumerate(json_list(raw, path))
    )


def device_class_from_dict(raw: Any) -> DeviceClassRecord:
    obj = _obj(raw, "")
    spec = _obj(obj.get("spec"), "spec")
    meta = _obj(obj.get("metadata"), "metadata")
    return DeviceClassRecord(
        name=_str(meta.get("name"), "metadata.name"),
        selectors=_selectors(spec.get("selectors"), "spec.selectors"),
        config=tuple(_obj(c, "spec.config") for c in json_list(spec.get("config"), "spec.config")),
        extended_resource_name=_str(spec.get("extendedResourceName"), "spec.extendedResourceName"),
        created=parse_time(meta.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0,
    )


# --- claims ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)

    def tolerates(self, taint: DeviceTaint) -> bool:
        """resourceclaim.ToleratesTaint (k8s.io/dynamic-resource-allocation@v0.37.2/
        resourceclaim/devicetoleration.go): effect empty or equal, key empty or equal,
        then Exists, or Equal (the default) with equal values."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


@dataclass(frozen=True, slots=True)
class SubRequest:
    """A request's device part: the request itself (exactly) or one of its alternatives."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...]
    allocation_mode: str
    count: int
    admin_access: bool | None
    tolerations: tuple[DeviceToleration, ...]
    capacity_requests: Mapping[str, Fraction] | None
    has_derived_attributes: bool = False


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: SubRequest | None
    first_available: tuple[SubRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...]
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    requests: tuple[str, ...]
    raw: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    share_id: str = ""
    consumed_capacity: Mapping[str, Fraction] = field(default_factory=dict)
    # DRADeviceBindingConditions: the conditions the device's driver must report True in
    # the claim's status.devices before the pod may bind, and those that mean it failed
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceCondition:
    """One condition of a device's status in the claim (metav1.Condition's parts read)."""

    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerReference:
    api_group: str
    resource: str
    name: str
    uid: str


@dataclass(frozen=True, eq=False, slots=True)
class ClaimRecord:
    namespace: str
    name: str
    uid: str
    resource_version: str
    deleting: bool
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[DeviceConstraint, ...]
    config: tuple[ClaimConfig, ...]
    # status.allocation (None: not allocated) and what it holds
    allocated: bool = False
    allocated_devices: tuple[AllocatedDevice, ...] = ()
    allocation_node_selector: NodeSelector | None = None
    reserved_for: tuple[ConsumerReference, ...] = ()
    # the uid of the controlling owner (a template's claim: its pod), for IsForPod
    controller_uid: str = ""
    # status.allocation.allocationTimestamp (seconds since the epoch) and status.devices
    allocation_timestamp: float | None = None
    device_conditions: Mapping[tuple[str, str, str], Mapping[str, DeviceCondition]] = field(
        default_factory=dict
    )
    # the object as the API server sent it: PreBind writes a copy of it back (upstream
    # DeepCopy + Update / UpdateStatus), so that nothing the scheduler does not read is lost
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _toleration(raw: Any, path: str) -> DeviceToleration:
    t = _obj(raw, path)
    return DeviceToleration(
        key=_str(t.get("key"), f"{path}.key"),
        operator=_str(t.get("operator"), f"{path}.operator") or "Equal",
        value=_str(t.get("value"), f"{path}.value"),
        effect=_str(t.get("effect"), f"{path}.effect"),
        raw=t,
    )


def _sub_request(raw: dict[str, Any], name: str, path: str, *, exactly: bool) -> SubRequest:
    capacity = raw.get("capacity")
    requests = None
    if capacity is not None:
        requests = {
            str(k): _quantity(v, f"{path}.capacity.requests[{k}]")
            for k, v in _obj(
                _obj(capacity, f"{path}.capacity").get("requests"), f"{path}.capacity.requests"
            ).items()
        }
    mode = _str(raw.get("allocationMode"), f"{path}.allocationMode") or ALLOCATION_MODE_EXACT
    count = _int(raw.get("count"), f"{path}.count")
    if mode == ALLOCATION_MODE_EXACT and raw.get("count") is None:
        count = 1  # defaulted by the API server (defaults.go)
    return SubRequest(
        name=name,
        device_class_name=_str(raw.get("deviceClassName"), f"{path}.deviceClassName"),
        selectors=_selectors(raw.get("selectors"), f"{path}.selectors"),
        allocation_mode=mode,
        count=count,
        # a DeviceSubRequest has no adminAccess (resource/v1 types.go): only `exactly`
        # carries it, and the allocator's subrequest accessor answers false
        admin_access=_bool(raw.get("adminAccess"), f"{path}.adminAccess") if exactly else None,
        tolerations=tuple(
            _toleration(t, f"{path}.tolerations[{i}]")
            for i, t in enumerate(json_list(raw.get("tolerations"), f"{path}.tolerations"))
        ),
        capacity_requests=requests,
        has_derived_attributes=bool(raw.get("derivedAttributes")),
    )


def claim_spec_from_dict(
    raw: Any, path: str = "spec"
) -> tuple[tuple[DeviceRequest, ...], tuple[DeviceConstraint, ...], tuple[ClaimConfig, ...]]:
    devices = _obj(_obj(raw, path).get("devices"), f"{path}.devices")
    requests = []
    for i, r in enumerate(json_list(devices.get("requests"), f"{path}.devices.requests")):
        rp = f"{path}.devices.requests[{i}]"
        req = _obj(r, rp)
        name = _str(req.get("name"), f"{rp}.name")
        exactly = req.get("exactly")
        requests.append(
            DeviceRequest(
                name=name,
                exactly=(
                    _sub_request(
                        _obj(exactly, f"{rp}.exactly"), name, f"{rp}.exactly", exactly=True
                    )
                    if exactly is not None
                    else None
                ),
                first_available=tuple(
                    _sub_request(
                        _obj(s, f"{rp}.firstAvailable[{j}]"),
                        _str(s.get("name"), f"{rp}.firstAvailable[{j}].name"),
                        f"{rp}.firstAvailable[{j}]",
                        exactly=False,
                    )
                    for j, s in enumerate(
                        json_list(req.get("firstAvailable"), f"{rp}.firstAvailable")
                    )
                ),
            )
        )
    constraints = tuple(
        DeviceConstraint(
            requests=tuple(
                json_list(c.get("requests"), f"{path}.devices.constraints[{i}].requests")
            ),
            match_attribute=_str(c.get("matchAttribute"), "matchAttribute"),
            distinct_attribute=_str(c.get("distinctAttribute"), "distinctAttribute"),
        )
        for i, c in enumerate(json_list(devices.get("constraints"), f"{path}.devices.constraints"))
        if isinstance(c, dict)
    )
    config = tuple(
        ClaimConfig(
            tuple(json_list(c.get("requests"), "requests")),
            {k: v for k, v in c.items() if k != "requests"},  # the DeviceConfiguration
        )
        for c in json_list(devices.get("config"), f"{path}.devices.config")
        if isinstance(c, dict)
    )
    return tuple(requests), constraints, config


def _allocated_device(raw: Any, path: str) -> AllocatedDevice:
    r = _obj(raw, path)
    return AllocatedDevice(
        request=_str(r.get("request"), f"{path}.request"),
        driver=_str(r.get("driver"), f"{path}.driver"),
        pool=_str(r.get("pool"), f"{path}.pool"),
        device=_str(r.get("device"), f"{path}.device"),
        admin_access=bool(_bool(r.get("adminAccess"), f"{path}.adminAccess")),
        share_id=_str(r.get("shareID"), f"{path}.shareID"),
        consumed_capacity={
            str(k): _quantity(v, f"{path}.consumedCapacity[{k}]")
            for k, v in _obj(r.get("consumedCapacity"), f"{path}.consumedCapacity").items()
        },
        binding_conditions=_names(r, "bindingConditions", path),
        binding_failure_conditions=_names(r, "bindingFailureConditions", path),
    )


def _device_conditions(
    raw: Any, path: str
) -> dict[tuple[str, str, str], dict[str, DeviceCondition]]:
    """status.devices: each device's conditions by type, keyed (driver, pool, device) as
    upstream's getAllocatedDeviceStatus finds them (the first entry of a device wins)."""
    out: dict[tuple[str, str, str], dict[str, DeviceCondition]] = {}
    for i, d in enumerate(json_list(raw, path)):
        entry = _obj(d, f"{path}[{i}]")
        key = (_str(entry.get("driver"), path), _str(entry.get("pool"), path),
               _str(entry.get("device"), path))  # fmt: skip
        if key in out:
            continue
        out[key] = {}
        for c in json_list(entry.get("conditions"), f"{path}[{i}].conditions"):
            if isinstance(c, dict):
                out[key].setdefault(
                    _str(c.get("type"), path),
                    DeviceCondition(
                        _str(c.get("status"), path),
                        _str(c.get("reason"), path),
                        _str(c.get("message"), path),
                    ),
                )
    return out


def claim_from_dict(raw: Any) -> ClaimRecord:
    obj = _obj(raw, "")
    meta = _obj(obj.get("metadata"), "metadata")
    requests, constraints, config = claim_spec_from_dict(obj.get("spec"))
    status = _obj(obj.get("status"), "status")
    allocation = status.get("allocation")
    devices: tuple[AllocatedDevice, ...] = ()
    selector = None
    if allocation is not None:
        a = _obj(allocation, "status.allocation")
        results = _obj(a.get("devices"), "status.allocation.devices").get("results")
        devices = tuple(
            _allocated_device(r, f"status.allocation.devices.results[{i}]")
            for i, r in enumerate(json_list(results, "status.allocation.devices.results"))
        )
        selector = _node_selector(a.get("nodeSelector"), "status.allocation.nodeSelector")
    return ClaimRecord(
        namespace=_str(meta.get("namespace"), "metadata.namespace"),
        name=_str(meta.get("name"), "metadata.name"),
        uid=_str(meta.get("uid"), "metadata.uid"),
        resource_version=_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        deleting=meta.get("deletionTimestamp") is not None,
        requests=requests,
        constraints=constraints,
        config=config,
        allocated=allocation is not None,
        allocated_devices=devices,
        allocation_node_selector=selector,
        reserved_for=tuple(
            ConsumerReference(
                _str(r.get("apiGroup"), "apiGroup"),
                _str(r.get("resource"), "resource"),
                _str(r.get("name"), "name"),
                _str(r.get("uid"), "uid"),
            )
            for r in json_list(status.get("reservedFor"), "status.reservedFor")
            if isinstance(r, dict)
        ),
        allocation_timestamp=(
            parse_time(
                _obj(allocation, "status.allocation").get("allocationTimestamp"),
                "status.allocation.allocationTimestamp",
            )
            if allocation is not None
            else None
        ),
        device_conditions=_device_conditions(status.get("devices"), "status.devices"),
        controller_uid=next(
            (
                _str(o.get("uid"), "metadata.ownerReferences.uid")
                for o in json_list(meta.get("ownerReferences"), "metadata.ownerReferences")
                if isinstance(o, dict) and o.get("controller") is True
            ),
            "",
        ),
        raw=obj,
    )
