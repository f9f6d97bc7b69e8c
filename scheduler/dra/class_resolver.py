"""Which DeviceClass backs an extended resource (DRAExtendedResource, GA in v1.37.2).

A class backs two names: the one its `spec.extendedResourceName` gives, if any
(explicit), and `deviceclass.resource.kubernetes.io/<class name>` (implicit). The map
is kept from the DeviceClass informer's events in their order, with upstream's rules
(k8s.io/dynamic-resource-allocation@v0.37.2 deviceclass/extendedresourcecache/
extendedresourcecache.go, which kube-scheduler's DRA manager serves as its
DeviceClassResolver, kubernetes@v1.37.2 pkg/scheduler/framework/plugins/
dynamicresources/dra_manager.go):

- when two classes name one extended resource, the newer (creationTimestamp) keeps it,
  the lower name on a tie. A class that loses that contest is not entered at all, not
  even under its implicit name, and its old names stay as they were;
- so an update of the class that already holds its explicit name is the same contest
  against itself, which it loses: the entry keeps the earlier copy of the class;
- a deleted class takes both of its names out, even an explicit one that another
  class holds; the loser of an earlier contest is not put back.

These read as accidents of upstream's code, but the decision which class allocates a
pod's extended resource follows from them, so they are kept.
"""

from __future__ import annotations

import re

from scheduler.dra.resources import DeviceClassRecord

# resourceapi.ResourceDeviceClassPrefix
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
_REQUESTS_PREFIX = "requests."  # core DefaultResourceRequestsPrefix
# validation.IsQualifiedName: an optional DNS-subdomain prefix and a name part
_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def _is_qualified_name(value: str) -> bool:
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= 63 and bool(_NAME_PART.match(name))


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: not a native resource (a name without a domain,
    or in kubernetes.io), not `requests.*`, and a qualified name once prefixed with
    `requests.` (as quota would name it)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith(_REQUESTS_PREFIX):
        return False
    return _is_qualified_name(_REQUESTS_PREFIX + name)


def is_dra_extended_resource_name(name: str) -> bool:
    """schedutil.IsDRAExtendedResourceName: an extended resource, or a class's implicit
    name (which is in kubernetes.io, so not an extended resource by the rule above)."""
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX)


class DeviceClassResolver:
    """Extended resource name -> the DeviceClass that backs it. Fed by the device state
    on every DeviceClass event (old copy on an update, the last copy on a delete)."""

    def __init__(self) -> None:
        self._by_resource: dict[str, DeviceClassRecord] = {}

    def __bool__(self) -> bool:
        """Whether any class backs any resource (no class: nothing is ever delegated)."""
        return bool(self._by_resource)

    def device_class(self, resource: str) -> DeviceClassRecord | None:
        """GetDeviceClass."""
        return self._by_resource.get(resource)

    def on_add(self, new: DeviceClassRecord) -> None:
        self._enter(new, None)

    def on_update(self, old: DeviceClassRecord, new: DeviceClassRecord) -> None:
        self._enter(new, old)

    def on_delete(self, gone: DeviceClassRecord) -> None:
        self._by_resource.pop(DEVICE_CLASS_PREFIX + gone.name, None)
        if gone.extended_resource_name:
            self._by_resource.pop(gone.extended_resource_name, None)

    def _enter(self, new: DeviceClassRecord, old: DeviceClassRecord | None) -> None:
        """updateResourceName2class."""
        if new.extended_resource_name:
            holder = self._by_resource.get(new.extended_resource_name)
            if holder is not None and (
                new.created < holder.created
                or (new.created == holder.created and new.name >= holder.name)
            ):
                return  # the holder is newer, or as new with a lower or the same name
        if old is not None:
            self._by_resource.pop(DEVICE_CLASS_PREFIX + old.name, None)
            if old.extended_resource_name:
                self._by_resource.pop(old.extended_resource_name, None)
        if new.extended_resource_name:
            self._by_resource[new.extended_resource_name] = new
        self._by_resource[DEVICE_CLASS_PREFIX + new.name] = new
