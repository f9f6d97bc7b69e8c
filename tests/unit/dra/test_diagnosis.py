"""Explain's account of a node's devices, request by request (dra/diagnosis.py), and how
the explain command prints it."""

from __future__ import annotations

from typing import Any

from scheduler.dra.allocator import AllocatedState
from scheduler.dra.diagnosis import request_reports
from scheduler.dra.pools import Node
from scheduler.dra.resources import claim_from_dict, device_class_from_dict, slice_from_dict
from scheduler.dra.selector_cache import SelectorCache
from scheduler.explain_cli import format_table

DRIVER = "gpu.example.com"


def _slice(node: str, devices: list[dict[str, Any]], count: int = 1) -> Any:
    return slice_from_dict(
        {
            "metadata": {"name": f"{node}-s"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
                "devices": devices,
            },
        }
    )


def _claim(*requests: dict[str, Any]) -> Any:
    return claim_from_dict(
        {
            "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
            "spec": {"devices": {"requests": list(requests)}},
        }
    )


CLASSES = {
    "gpu": device_class_from_dict(
        {
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
}


def test_each_device_is_counted_where_the_allocator_rules_it_out() -> None:
    devices = [
        {"name": "d0", "attributes": {"model": {"string": "l4"}}},  # not selected
        {"name": "d1", "attributes": {"model": {"string": "a100"}}},  # in use
        {"name": "d2", "attributes": {"model": {"string": "a100"}},
         "taints": [{"key": "broken", "effect": "NoSchedule"}]},  # tainted
        {"name": "d3", "attributes": {"model": {"string": "a100"}}},  # free
    ]  # fmt: skip
    request = {
        "name": "r",
        "exactly": {
            "deviceClassName": "gpu",
            "count": 2,
            "selectors": [
                {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a100"'}}
            ],
        },
    }
    held = AllocatedState(devices={(DRIVER, "n1", "d1")})
    [report] = request_reports(
        Node("n1"), [_claim(request)], [_slice("n1", devices)], CLASSES, held, SelectorCache()
    )
    assert report.as_dict() == {
        "claim": "ns/c", "request": "r", "wanted": "2", "devices": 4,
        "notSelected": 1, "inUse": 1, "tainted": 1, "free": 1,
    }  # fmt: skip
    # another node: none of this node's devices; an incomplete pool counts none either
    [elsewhere] = request_reports(
        Node("n2"), [_claim(request)], [_slice("n1", devices)], CLASSES, held, SelectorCache()
    )
    assert elsewhere.devices == 0
    [partial] = request_reports(
        Node("n1"), [_claim(request)], [_slice("n1", devices, count=2)], CLASSES, held,
        SelectorCache(),
    )  # fmt: skip
    assert partial.devices == 0


def test_alternatives_missing_classes_and_erring_selectors_are_reported() -> None:
    request = {
        "name": "r",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "huge"},
            {"name": "any", "deviceClassName": "gpu", "allocationMode": "All",
             "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "x"'}}]},
        ],
    }  # fmt: skip
    reports = request_reports(
        Node("n1"), [_claim(request)], [_slice("n1", [{"name": "d0"}])], CLASSES,
        AllocatedState(), SelectorCache(),
    )  # fmt: skip
    assert [r.request for r in reports] == ["r/big", "r/any"]
    assert reports[0].problem == "device class huge does not exist"
    assert reports[1].wanted == "all"
    assert reports[1].not_selected == 1
    assert reports[1].problem.startswith(f"{DRIVER}/n1/d0: selector #0: no such key: model")


def test_the_explain_command_prints_the_devices_per_node_and_request() -> None:
    body = {
        "pod": "ns/p", "priority": 0, "schedulerName": "s", "queue": "unschedulable",
        "nominatedNode": None, "lastAttempt": None,
        "now": {
            "result": "Unschedulable", "message": "0/2 nodes are available", "preemption": None,
            "nodes": [
                {"node": "n1", "code": "UNSCHEDULABLE_AND_UNRESOLVABLE",
                 "plugin": "DynamicResources", "reason": "cannot allocate all claims",
                 "devices": [{"claim": "ns/c", "request": "r", "wanted": "1", "devices": 2,
                              "notSelected": 0, "inUse": 2, "tainted": 0, "free": 0}]},
                {"node": "n2", "code": "UNSCHEDULABLE_AND_UNRESOLVABLE",
                 "plugin": "DynamicResources", "reason": "resourceclaim not available on the node",
                 "devices": [{"claim": "ns/d", "allocatedElsewhere": True}]},
            ],
        },
    }  # fmt: skip
    text = format_table(body)
    lines = text.splitlines()
    at = lines.index("Devices:")
    assert lines[at + 1].split() == [
        "NODE", "CLAIM", "REQUEST", "WANTED", "FREE", "IN", "USE", "TAINTED", "NOT",
        "SELECTED", "PROBLEM",
    ]  # fmt: skip
    assert lines[at + 2].split() == ["n1", "ns/c", "r", "1", "0", "2", "0", "0", "-"]
    assert "allocated on other nodes" in lines[at + 3]
