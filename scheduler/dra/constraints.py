"""A claim's device constraints: all devices of the named requests share one attribute
value (matchAttribute), or no two have the same (distinctAttribute)
(k8s.io/dynamic-resource-allocation@v0.37.2/structured/internal/incubating/
allocator_incubating.go matchAttributeConstraint, constraint.go
distinctAttributeConstraint). A constraint without requests applies to all of them; a
subrequest is named as "request" or "request/subrequest".
"""

from __future__ import annotations

from typing import Protocol

from scheduler.dra.resources import DeviceRecord
from scheduler.dra.selector import AttributeValue, VersionText


class Constraint(Protocol):
    def add(self, request: str, subrequest: str, device: DeviceRecord, driver: str) -> bool: ...

    def remove(self, request: str, subrequest: str) -> None: ...


def lookup_attribute(
    device: DeviceRecord, driver: str, name: str
) -> AttributeValue | VersionText | None:
    """lookupAttribute: the fully qualified name as stored, else the driver's own domain
    stripped."""
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, sep, ident = name.partition("/")
    if not sep or domain != driver:
        return None
    return device.attributes.get(ident)


def _kind(value: AttributeValue | VersionText) -> str:
    # the attribute's field: upstream compares values of one field only
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, VersionText):
        return "version"
    return "string"


def _same(a: AttributeValue | VersionText, b: AttributeValue | VersionText) -> bool:
    return _kind(a) == _kind(b) and a == b


class _Applies:
    def __init__(self, requests: tuple[str, ...]) -> None:
        self.requests = frozenset(requests)

    def applies(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        if not subrequest:
            return request in self.requests
        return request in self.requests or f"{request}/{subrequest}" in self.requests


class MatchAttribute(_Applies):
    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        super().__init__(requests)
        self.attribute = attribute
        self.value: AttributeValue | VersionText | None = None
        self.count = 0

    def add(self, request: str, subrequest: str, device: DeviceRecord, driver: str) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup_attribute(device, driver, self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value, self.count = value, 1
            return True
        assert self.value is not None
        if not _same(value, self.value):
            return False
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if self.applies(request, subrequest):
            self.count -= 1


class DistinctAttribute(_Applies):
    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        super().__init__(requests)
        self.attribute = attribute
        self.values: list[AttributeValue | VersionText] = []

    def add(self, request: str, subrequest: str, device: DeviceRecord, driver: str) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup_attribute(device, driver, self.attribute)
        if value is None or any(_same(value, seen) for seen in self.values):
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if self.applies(request, subrequest):
            self.values.pop()
