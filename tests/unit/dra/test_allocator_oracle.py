"""scheduler.dra.allocator against upstream's allocator itself: random device scenarios
(scenarios.py) run through hack/dra-oracle (k8s.io/dynamic-resource-allocation@v0.37.2,
built here with kube-scheduler v1.37.2's default features) and through ours; the
outcome must be the same: the same devices for the same requests, the same node
selector and configuration, or "cannot allocate" for both, or the same error message.

CI runs a fixed slice of seeds; `KAS_DRA_ORACLE_SEEDS=0:5000` runs more.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.go_build import build_cached
from scheduler.dra.allocation_json import allocation_to_api
from scheduler.dra.allocator import AllocatedState, AllocationError, AllocationResult, Allocator
from scheduler.dra.pools import Node
from scheduler.dra.resources import claim_from_dict, device_class_from_dict, slice_from_dict
from scheduler.dra.selector_cache import SelectorCache
from scheduler.model.quantity import parse_quantity
from tests.unit.dra.scenarios import scenario

ROOT = Path(__file__).resolve().parents[3]
ORACLE_SOURCE = ROOT / "hack" / "dra-oracle"


def _seeds() -> range:
    start, _, stop = os.environ.get("KAS_DRA_ORACLE_SEEDS", "0:1000").partition(":")
    return range(int(start), int(stop))


@pytest.fixture(scope="module")
def oracle() -> Iterator[subprocess.Popen[str]]:
    try:
        binary = build_cached(ORACLE_SOURCE, "dra-oracle")
    except ClusterError as exc:
        pytest.fail(f"the DRA oracle could not be built: {exc}")
    process = subprocess.Popen(
        [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    yield process
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=30)


def _upstream(oracle: subprocess.Popen[str], case: dict[str, Any]) -> dict[str, Any]:
    assert oracle.stdin is not None and oracle.stdout is not None
    oracle.stdin.write(json.dumps(case) + "\n")
    oracle.stdin.flush()
    answer: dict[str, Any] = json.loads(oracle.stdout.readline())
    return answer


def _ours(case: dict[str, Any]) -> dict[str, Any]:
    allocated = AllocatedState(devices={tuple(d) for d in case["allocatedDevices"]})  # type: ignore[misc]
    classes = {c.name: c for c in map(device_class_from_dict, case["classes"])}
    slices = [slice_from_dict(s) for s in case["slices"]]
    node = case["node"]["metadata"]
    allocator = Allocator(allocated, classes, slices, SelectorCache())
    try:
        results = allocator.allocate(
            Node(node["name"], node.get("labels") or {}),
            [claim_from_dict(c) for c in case["claims"]],
        )
    except AllocationError as err:
        return {"error": str(err)}
    if results is None:
        return {"results": None}
    return {"results": [_ours_result(r) for r in results]}


def _written(case: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Our results as PreBind writes them (allocation_to_api), for a case that allocates."""
    allocated = AllocatedState(devices={tuple(d) for d in case["allocatedDevices"]})  # type: ignore[misc]
    classes = {c.name: c for c in map(device_class_from_dict, case["classes"])}
    node = case["node"]["metadata"]
    allocator = Allocator(
        allocated, classes, [slice_from_dict(s) for s in case["slices"]], SelectorCache()
    )
    try:
        results = allocator.allocate(
            Node(node["name"], node.get("labels") or {}),
            [claim_from_dict(c) for c in case["claims"]],
        )
    except AllocationError:
        return None
    return None if results is None else [allocation_to_api(r, None) for r in results]


def _json_canonical(value: Any, key: str = "") -> Any:
    """The JSON of an allocation with what may differ legitimately made equal: share IDs
    are random, quantities are compared by amount (the suffix follows the request's
    format upstream), node selector values as sets."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "shareID":
                out[k] = "<share>"
            elif k == "consumedCapacity":
                out[k] = {n: str(parse_quantity(q)) for n, q in v.items()}
            else:
                out[k] = _json_canonical(v, k)
        return out
    if isinstance(value, list):
        items = [_json_canonical(v) for v in value]
        return sorted(items) if key == "values" else items
    return value


def _ours_result(result: AllocationResult) -> dict[str, Any]:
    return {
        "devices": [
            {
                "request": d.request,
                "device": f"{d.driver}/{d.pool}/{d.device}",
                "adminAccess": d.admin_access,
                "tolerations": list(d.tolerations),
                "shared": bool(d.share_id),
                "consumedCapacity": dict(d.consumed_capacity),
                "bindingConditions": list(d.binding_conditions),
                "bindingFailureConditions": list(d.binding_failure_conditions),
            }
            for d in result.devices
        ],
        "config": [
            {"source": c.source, "requests": list(c.requests or []), **c.raw} for c in result.config
        ],
        "nodeSelector": result.node_selector,
    }


def _upstream_result(result: dict[str, Any]) -> dict[str, Any]:
    devices = result.get("devices") or {}
    return {
        "devices": [
            {
                "request": d["request"],
                "device": f"{d['driver']}/{d['pool']}/{d['device']}",
                "adminAccess": d.get("adminAccess"),
                "tolerations": d.get("tolerations") or [],
                "shared": bool(d.get("shareID")),
                "consumedCapacity": {
                    k: parse_quantity(v) for k, v in (d.get("consumedCapacity") or {}).items()
                },
                "bindingConditions": d.get("bindingConditions") or [],
                "bindingFailureConditions": d.get("bindingFailureConditions") or [],
            }
            for d in devices.get("results") or []
        ],
        "config": [{**c, "requests": c.get("requests") or []} for c in devices.get("config") or []],
        "nodeSelector": result.get("nodeSelector"),
    }


def _normalized_upstream(answer: dict[str, Any]) -> dict[str, Any]:
    if answer.get("error"):
        return {"error": answer["error"]}
    if answer.get("results") is None:
        return {"results": None}
    return {"results": [_upstream_result(r) for r in answer["results"]]}


def _canonical(value: Any) -> Any:
    """Node selector values compared as sets (upstream's own tests do: ConsistOf)."""
    if isinstance(value, dict):
        out = {k: _canonical(v) for k, v in value.items()}
        if "values" in out and isinstance(out["values"], list):
            out["values"] = sorted(out["values"])
        return out
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, Fraction):
        return str(value)
    return value


def test_oracle_is_upstreams_allocator(oracle: subprocess.Popen[str]) -> None:
    # a scenario whose answer is known (the first matching device in slice order, the
    # node's name as the selector), so that a broken oracle cannot pass everything
    driver = "gpu.example.com"
    case = {
        "node": {"metadata": {"name": "node-a", "labels": {}}},
        "slices": [
            {
                "metadata": {"name": "s"},
                "spec": {
                    "driver": driver,
                    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                    "nodeName": "node-a",
                    "devices": [
                        {"name": "d0", "attributes": {"model": {"string": "l4"}}},
                        {"name": "d1", "attributes": {"model": {"string": "a100"}}},
                        {"name": "d2", "attributes": {"model": {"string": "a100"}}},
                    ],
                },
            }
        ],
        "classes": [{"metadata": {"name": "gpu"}, "spec": {}}],
        "claims": [
            {
                "metadata": {"name": "c", "namespace": "default", "uid": "u"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "r",
                                "exactly": {
                                    "deviceClassName": "gpu",
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                    "selectors": [
                                        {
                                            "cel": {
                                                "expression": f'device.attributes["{driver}"]'
                                                '.model == "a100"'
                                            }
                                        }
                                    ],
                                },
                            }
                        ]
                    }
                },
            }
        ],
        "allocatedDevices": [[driver, "p", "d1"]],
    }
    answer = _normalized_upstream(_upstream(oracle, case))
    assert answer["results"] is not None
    [result] = answer["results"]
    assert [d["device"] for d in result["devices"]] == [f"{driver}/p/d2"]
    assert result["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-a"]
    assert _canonical(_ours(case)) == _canonical(answer)


@pytest.mark.parametrize("seed", _seeds())
def test_allocation_is_upstreams(oracle: subprocess.Popen[str], seed: int) -> None:
    case = scenario(seed)
    answer = _upstream(oracle, case)
    expected = _canonical(_normalized_upstream(answer))
    actual = _canonical(_ours(case))
    assert actual == expected, json.dumps(case)
    if answer.get("results"):
        # what PreBind would write is, field for field, what upstream's allocator returns
        written = _written(case)
        assert written is not None
        assert [_json_canonical(w) for w in written] == [
            _json_canonical(u) for u in answer["results"]
        ], json.dumps(case)
