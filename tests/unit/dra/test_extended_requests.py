"""The device requests and container mappings of the scheduler's claim for extended
resources backed by DRA, built from pods as the API server stores them
(scheduler/dra/extended_requests.py; upstream createRequestsAndMappings)."""

from __future__ import annotations

from typing import Any

from scheduler.dra.class_resolver import DeviceClassResolver
from scheduler.dra.extended_requests import (
    ExtendedDeviceRequest,
    RequestMapping,
    requests_and_mappings,
)
from scheduler.dra.resources import DeviceClassRecord
from scheduler.model.pod import pod_from_dict

X = "example.com/x"
Y = "example.com/y"


def _resolver(**classes: str) -> DeviceClassResolver:
    """class name -> the extended resource it backs."""
    resolver = DeviceClassResolver()
    for name, resource in classes.items():
        resolver.on_add(DeviceClassRecord(name, (), extended_resource_name=resource))
    return resolver


def _container(name: str, requests: dict[str, str], sidecar: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def _build(
    containers: list[dict[str, Any]],
    inits: list[dict[str, Any]] | None = None,
    resolver: DeviceClassResolver | None = None,
) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, str]]]:
    pod = pod_from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"initContainers": inits or [], "containers": containers},
        }
    )
    wanted = {r: v for r, v in pod.requests.items() if "/" in r}
    requests, mappings = requests_and_mappings(
        pod.container_requests, wanted, resolver or _resolver(cx=X, cy=Y)
    )
    return (
        [(r.name, r.device_class_name, r.count) for r in requests],
        [(m.container_name, m.resource_name, m.request_name) for m in mappings],
    )


def test_each_resource_of_a_container_is_named_by_its_place_among_the_requests() -> None:
    requests, mappings = _build([_container("c", {X: "1", "cpu": "1", Y: "2"})])
    # sorted requests: cpu, example.com/x, example.com/y
    assert requests == [("container-0-request-1", "cx", 1), ("container-0-request-2", "cy", 2)]
    assert mappings == [("c", X, "container-0-request-1"), ("c", Y, "container-0-request-2")]


def test_app_containers_each_get_their_own_request() -> None:
    requests, mappings = _build([_container("a", {X: "1"}), _container("b", {X: "2"})])
    assert requests == [("container-0-request-0", "cx", 1), ("container-1-request-0", "cx", 2)]
    assert mappings == [("a", X, "container-0-request-0"), ("b", X, "container-1-request-0")]


def test_an_init_container_reuses_the_devices_of_later_containers_and_asks_for_the_rest() -> None:
    requests, mappings = _build([_container("app", {X: "1"})], inits=[_container("i", {X: "3"})])
    assert requests == [("container-0-request-0", "cx", 2), ("container-1-request-0", "cx", 1)]
    assert mappings == [
        ("app", X, "container-1-request-0"),
        ("i", X, "container-1-request-0"),
        ("i", X, "container-0-request-0"),
    ]


def test_an_init_container_covered_by_later_containers_asks_for_nothing() -> None:
    requests, mappings = _build([_container("app", {X: "2"})], inits=[_container("i", {X: "1"})])
    assert requests == [("container-1-request-0", "cx", 2)]
    assert mappings == [("app", X, "container-1-request-0"), ("i", X, "container-1-request-0")]


def test_of_the_init_containers_own_requests_only_the_largest_is_kept() -> None:
    requests, mappings = _build(
        [_container("app", {"cpu": "1"})],
        inits=[_container("i0", {X: "2"}), _container("i1", {X: "3"}), _container("i2", {X: "3"})],
    )
    # the first of the largest wins; every init container is mapped to it
    assert requests == [("container-1-request-0", "cx", 3)]
    assert mappings == [
        ("i0", X, "container-1-request-0"),
        ("i1", X, "container-1-request-0"),
        ("i2", X, "container-1-request-0"),
    ]


def test_sidecars_are_long_lived_and_serve_the_init_containers_before_them() -> None:
    requests, mappings = _build(
        [_container("app", {X: "1"})],
        inits=[
            _container("i0", {X: "1"}),
            _container("side", {X: "1"}, sidecar=True),
            _container("i2", {X: "2"}),
        ],
    )
    assert requests == [
        ("container-1-request-0", "cx", 1),
        ("container-2-request-0", "cx", 1),
        ("container-3-request-0", "cx", 1),
    ]
    assert mappings == [
        ("side", X, "container-1-request-0"),
        ("app", X, "container-3-request-0"),
        ("i0", X, "container-1-request-0"),
        ("i2", X, "container-3-request-0"),
        ("i2", X, "container-2-request-0"),
    ]


def test_requests_sort_by_name_as_strings() -> None:
    containers = [_container(f"c{i}", {X: "1"} if i in (2, 10) else {}) for i in range(11)]
    requests, _ = _build(containers)
    assert [r[0] for r in requests] == ["container-10-request-0", "container-2-request-0"]


def test_fractional_amounts_and_resources_no_class_backs_get_no_request() -> None:
    requests, mappings = _build(
        [_container("a", {X: "500m"}), _container("b", {Y: "1"})], resolver=_resolver(cy=Y)
    )
    assert requests == [("container-1-request-0", "cy", 1)]
    assert mappings == [("b", Y, "container-1-request-0")]


def test_the_api_shapes() -> None:
    assert ExtendedDeviceRequest("container-0-request-0", "gpu", 2).as_api() == {
        "name": "container-0-request-0",
        "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
    }
    assert RequestMapping("c", X, "r").as_api() == {
        "containerName": "c",
        "resourceName": X,
        "requestName": "r",
    }
