"""Which DeviceClass backs an extended resource: upstream's extended resource cache
rules, event by event (scheduler/dra/class_resolver.py)."""

from __future__ import annotations

import pytest

from scheduler.dra.class_resolver import (
    DeviceClassResolver,
    is_dra_extended_resource_name,
    is_extended_resource_name,
)
from scheduler.dra.device_state import DeviceState
from scheduler.dra.resources import DeviceClassRecord, device_class_from_dict

GPU = "example.com/gpu"


def _class(name: str, resource: str = "", created: float = 0.0) -> DeviceClassRecord:
    return DeviceClassRecord(name, (), extended_resource_name=resource, created=created)


def _holder(resolver: DeviceClassResolver, resource: str) -> str | None:
    found = resolver.device_class(resource)
    return found.name if found is not None else None


@pytest.mark.parametrize(
    ("name", "extended", "dra"),
    [
        ("example.com/gpu", True, True),
        ("cpu", False, False),
        ("hugepages-2Mi", False, False),
        ("kubernetes.io/batteries", False, False),
        ("deviceclass.resource.kubernetes.io/gpu", False, True),
        ("requests.example.com/gpu", False, False),
        ("Example.com/gpu", False, False),  # the domain must be lower case
        ("example.com/" + "g" * 64, False, False),  # the name part is at most 63 long
    ],
)
def test_resource_names_as_upstream_classifies_them(name: str, extended: bool, dra: bool) -> None:
    assert is_extended_resource_name(name) is extended
    assert is_dra_extended_resource_name(name) is dra


def test_a_class_backs_its_explicit_and_its_implicit_name() -> None:
    resolver = DeviceClassResolver()
    assert not resolver
    resolver.on_add(_class("gpu", GPU))
    assert _holder(resolver, GPU) == "gpu"
    assert _holder(resolver, "deviceclass.resource.kubernetes.io/gpu") == "gpu"
    assert _holder(resolver, "example.com/other") is None


def test_of_two_classes_naming_one_resource_the_newer_wins_then_the_lower_name() -> None:
    resolver = DeviceClassResolver()
    resolver.on_add(_class("old", GPU, created=1))
    resolver.on_add(_class("new", GPU, created=2))
    assert _holder(resolver, GPU) == "new"
    resolver.on_add(_class("older", GPU, created=0))
    assert _holder(resolver, GPU) == "new"
    # the loser is not entered at all: not even under its implicit name
    assert _holder(resolver, "deviceclass.resource.kubernetes.io/older") is None
    resolver.on_add(_class("a-tie", GPU, created=2))
    assert _holder(resolver, GPU) == "a-tie"
    resolver.on_add(_class("z-tie", GPU, created=2))
    assert _holder(resolver, GPU) == "a-tie"


def test_deleting_a_class_takes_its_names_out_even_one_another_class_holds() -> None:
    resolver = DeviceClassResolver()
    winner, loser = _class("winner", GPU, created=2), _class("loser", GPU, created=1)
    resolver.on_add(winner)
    resolver.on_add(loser)
    resolver.on_delete(loser)  # upstream drops the explicit name whoever holds it
    assert _holder(resolver, GPU) is None
    assert _holder(resolver, "deviceclass.resource.kubernetes.io/winner") == "winner"


def test_an_update_that_renames_the_resource_moves_it() -> None:
    resolver = DeviceClassResolver()
    before = _class("gpu", GPU)
    resolver.on_add(before)
    resolver.on_update(before, _class("gpu", "example.com/tpu"))
    assert _holder(resolver, GPU) is None
    assert _holder(resolver, "example.com/tpu") == "gpu"


def test_the_device_state_feeds_the_resolver_from_class_events() -> None:
    state = DeviceState()
    raw = {
        "metadata": {"name": "gpu", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"extendedResourceName": GPU},
    }
    state.set_class(device_class_from_dict(raw))
    assert _holder(state.class_resolver, GPU) == "gpu"
    state.set_class(device_class_from_dict({**raw, "spec": {}}))  # the name dropped
    assert _holder(state.class_resolver, GPU) is None
    assert _holder(state.class_resolver, "deviceclass.resource.kubernetes.io/gpu") == "gpu"
    state.drop_class(device_class_from_dict({**raw, "spec": {}}))
    assert not state.class_resolver
