"""The device requests of the claim the scheduler makes for a pod's extended resources
backed by DRA, and which container's resource each request serves (the pod's
status.extendedResourceClaimStatus.requestMappings): kubernetes@v1.37.2 pkg/scheduler/
framework/plugins/dynamicresources/extendeddynamicresources.go
createRequestsAndMappings, partitionContainerIndices, createResourceRequestAndMappings.

Per resource (in name order), each long-lived container (an app container or a sidecar)
that asks for it gets a request `container-<i>-request-<j>` for its amount: i the
container's index among init containers then app containers, j the resource's index
among the container's requests sorted by name. A regular init container runs before the
long-lived containers after it exist, so it first reuses their requests (mapped to them)
and asks only for what is still missing; of all regular init containers' requests only
the largest is kept (the first of equal ones), and every init container whose request was
dropped is mapped to that one. The requests end sorted by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.dra.class_resolver import DeviceClassResolver
from scheduler.model.container_requests import ContainerRequests

ALLOCATION_MODE_EXACT_COUNT = "ExactCount"


@dataclass(frozen=True, slots=True)
class ExtendedDeviceRequest:
    """One request of the claim: `count` devices of the class."""

    name: str
    device_class_name: str
    count: int

    def as_api(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "exactly": {
                "deviceClassName": self.device_class_name,
                "allocationMode": ALLOCATION_MODE_EXACT_COUNT,
                "count": self.count,
            },
        }


@dataclass(frozen=True, slots=True)
class RequestMapping:
    """core/v1 ContainerExtendedResourceRequest."""

    container_name: str
    resource_name: str
    request_name: str

    def as_api(self) -> dict[str, str]:
        return {
            "containerName": self.container_name,
            "resourceName": self.resource_name,
            "requestName": self.request_name,
        }


def _container_request(
    index: int,
    container: ContainerRequests,
    resource: str,
    class_name: str,
    reusable: Sequence[ExtendedDeviceRequest | None],
) -> tuple[ExtendedDeviceRequest | None, list[RequestMapping]]:
    """createResourceRequestAndMappings: the container's own request for `resource`
    (None when it asks for none, or the reusable requests cover it) and its mappings."""
    if resource not in container.names:
        return None, []
    wanted = container.whole.get(resource, 0)
    if wanted == 0:  # a fractional amount (AsInt64 refuses it) or zero
        return None, []
    mappings: list[RequestMapping] = []
    covered = 0
    for other in reusable:
        if other is None:
            continue
        covered += other.count
        mappings.append(RequestMapping(container.name, resource, other.name))
        if covered >= wanted:
            return None, mappings
    name = f"container-{index}-request-{container.names.index(resource)}"
    mappings.append(RequestMapping(container.name, resource, name))
    return ExtendedDeviceRequest(name, class_name, wanted - covered), mappings


def requests_and_mappings(
    containers: Sequence[ContainerRequests],
    resources: Mapping[str, int],
    resolver: DeviceClassResolver,
) -> tuple[list[ExtendedDeviceRequest], list[RequestMapping]]:
    """createRequestsAndMappings for the extended resources `resources` names (the ones
    the node leaves to DRA); a resource no class backs any more is skipped."""
    long_lived = [i for i, c in enumerate(containers) if not c.init or c.sidecar]
    short_lived = [i for i, c in enumerate(containers) if c.init and not c.sidecar]
    requests: list[ExtendedDeviceRequest] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        device_class = resolver.device_class(resource)
        if device_class is None:
            continue
        by_container: list[ExtendedDeviceRequest | None] = [None] * len(containers)
        long_mappings: list[RequestMapping] = []
        for i in long_lived:
            request, found = _container_request(i, containers[i], resource, device_class.name, ())
            by_container[i] = request
            long_mappings.extend(found)
        largest: ExtendedDeviceRequest | None = None
        short_names: set[str] = set()
        short_mappings: list[RequestMapping] = []
        for i in short_lived:
            request, found = _container_request(
                i, containers[i], resource, device_class.name, by_container[i:]
            )
            if request is not None:
                short_names.add(request.name)
                if largest is None or largest.count < request.count:
                    largest = request
            short_mappings.extend(found)
        if largest is not None and len(short_names) > 1:
            dropped = short_names - {largest.name}
            short_mappings = [
                RequestMapping(m.container_name, m.resource_name, largest.name)
                if m.request_name in dropped
                else m
                for m in short_mappings
            ]
        if largest is not None:
            requests.append(largest)
        requests.extend(r for r in by_container if r is not None)
        mappings.extend(long_mappings)
        mappings.extend(short_mappings)
    requests.sort(key=lambda r: r.name)
    return requests, mappings
