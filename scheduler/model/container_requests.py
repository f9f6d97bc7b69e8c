"""Each container's own requests, kept for extended resources backed by dynamic
resource allocation: the scheduler turns a container's request for such a resource
into a device request named after the container's index and the resource's index among
the container's requests (kubernetes@v1.37.2 pkg/scheduler/framework/plugins/
dynamicresources/extendeddynamicresources.go createResourceRequestAndMappings), so the
pod's totals are not enough there.

Kept only for pods that request some resource with a domain (`example.com/gpu`,
`deviceclass.resource.kubernetes.io/<class>`): no other pod can have one backed by a
DeviceClass, and most pods then carry nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.model.pod_resources import NANO, ContainerResources, PodResourceInputs


@dataclass(frozen=True, slots=True)
class ContainerRequests:
    name: str
    init: bool  # in spec.initContainers
    sidecar: bool  # an init container with restartPolicy Always
    names: tuple[str, ...]  # every resource in its resources.requests, sorted
    # the amounts of its domain-qualified resources that are whole numbers (what
    # Quantity.AsInt64 accepts; a fractional amount yields no device request)
    whole: Mapping[str, int]


def _one(c: ContainerResources, init: bool) -> ContainerRequests:
    spec = c.spec or {}
    return ContainerRequests(
        name=c.name,
        init=init,
        sidecar=init and c.sidecar,
        names=tuple(sorted(spec)),
        whole={r: v // NANO for r, v in spec.items() if "/" in r and v % NANO == 0},
    )


def container_requests(inputs: PodResourceInputs) -> tuple[ContainerRequests, ...]:
    """Init containers first, then app containers: the order whose index names a
    device request. Empty when no container requests a domain-qualified resource."""
    every = (*inputs.init_containers, *inputs.containers)
    if not any("/" in r for c in every for r in c.spec or ()):
        return ()
    return tuple(_one(c, i < len(inputs.init_containers)) for i, c in enumerate(every))
