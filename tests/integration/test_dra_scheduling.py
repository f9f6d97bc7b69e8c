"""Pods with ResourceClaims through the whole path, against the real control plane (the
controller-manager's resourceclaim controller makes each pod's claim from its template):
this scheduler with --feature-gates=DynamicResourceAllocation=true, and upstream
kube-scheduler v1.37.2 (the `env` fixture's params), under the same assertions. Devices
are published as ResourceSlices for kwok nodes through the API, as a driver would.

What must hold for both: a device a DeviceTaintRule taints (NoSchedule) is not given
out until the rule goes; each pod lands on a node whose slice has a free device, its
claim holds that device and is reserved for it, no device is held twice, and the pod
that finds no device is told why in the same words."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kas_dev.cluster.nodes import NodeGroup
from tests.contenders import CONTENDERS, Scheduler, contender_on_cluster
from tests.dra_cluster import RESOURCE, pending_message, publish_devices
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess

pytestmark = pytest.mark.cluster

SCHED = "kube-async-scheduler"
NS = "default"
DRIVER = "gpu.example.com"
GATE = "--feature-gates=DynamicResourceAllocation=true"


@pytest.fixture(scope="module", params=CONTENDERS)
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterHandle, Scheduler]]:
    # kube-scheduler accepts the gate too (GA, locked to its default: on)
    yield from contender_on_cluster(
        request.param,
        tmp_path_factory.mktemp(f"dra-{request.param}"),
        NodeGroup(count=4, name_prefix="dra"),
        [{"schedulerName": SCHED}],
        [GATE],
    )


def _pod(name: str) -> dict[str, Any]:
    manifest = pod_manifest(name, scheduler_name=SCHED)
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    return manifest


def _claims(cluster: ClusterHandle) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.api("GET", f"{RESOURCE}/namespaces/{NS}/resourceclaims")[
        "items"
    ]
    return items


NO_DEVICE = (
    "0/4 nodes are available: 4 cannot allocate all claims. preemption: 0/4 nodes are "
    "available: 4 Preemption is not helpful for scheduling."
)


def test_claim_templates_get_devices_where_they_are_and_the_last_pod_is_told_why(
    env: tuple[ClusterHandle, Scheduler],
) -> None:
    cluster, sched = env
    nodes = sorted(n["metadata"]["name"] for n in cluster.api("GET", "/api/v1/nodes")["items"])
    with_gpus = {nodes[0]: 1, nodes[1]: 2}
    for node, count in with_gpus.items():
        publish_devices(cluster, DRIVER, node, count, {"model": {"string": "a100"}})
    cluster.api(
        "POST",
        f"{RESOURCE}/deviceclasses",
        {
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    cluster.api(
        "POST",
        f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates",
        {
            "metadata": {"name": "one-gpu"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu",
                                    "selectors": [
                                        {
                                            "cel": {
                                                "expression": f'device.attributes["{DRIVER}"]'
                                                '.model == "a100"'
                                            }
                                        }
                                    ],
                                },
                            }
                        ]
                    }
                }
            },
        },
    )
    # an operator takes the first node's only device out of service (DeviceTaintRule)
    cluster.api(
        "POST",
        f"{RESOURCE}/devicetaintrules",
        {
            "metadata": {"name": "maintenance"},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": nodes[0], "device": "gpu-0"},
                "taint": {"key": "maintenance", "effect": "NoSchedule"},
            },
        },
    )
    for i in range(3):
        cluster.create_pod(NS, _pod(f"p{i}"))

    def placements() -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in cluster.list_pods(NS)
            if p["metadata"]["name"].startswith("p")
        }

    def two_bound() -> dict[str, str] | None:
        placed = placements()
        return placed if sum(1 for n in placed.values() if n) == 2 else None

    placed = wait_for(two_bound, timeout=90, what="two pods with claims bound")
    assert sorted(n for n in placed.values() if n) == [nodes[1], nodes[1]]
    waiting = next(name for name, node in placed.items() if not node)
    assert pending_message(cluster, NS, waiting) == NO_DEVICE

    # the rule is lifted: the device is back, the waiting pod gets it
    cluster.api("DELETE", f"{RESOURCE}/devicetaintrules/maintenance")

    def bound() -> dict[str, str] | None:
        placed = placements()
        return placed if len(placed) == 3 and all(placed.values()) else None

    placed = wait_for(bound, timeout=90, what="three pods with claims bound")
    assert sorted(placed.values()) == sorted([nodes[0], nodes[1], nodes[1]])

    # each claim holds one device on its pod's node, is reserved for its pod, once
    pods = {p["metadata"]["name"]: p for p in cluster.list_pods(NS)}
    held = []
    for claim in _claims(cluster):
        owner = claim["metadata"]["ownerReferences"][0]["name"]
        allocation = claim["status"]["allocation"]
        [result] = allocation["devices"]["results"]
        assert result["driver"] == DRIVER
        assert result["pool"] == placed[owner]
        held.append((result["pool"], result["device"]))
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": owner, "uid": pods[owner]["metadata"]["uid"]}
        ]
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    assert sorted(held) == sorted([(nodes[0], "gpu-0"), (nodes[1], "gpu-0"), (nodes[1], "gpu-1")])

    # every device is taken: the fourth pod stays pending, with upstream's words
    cluster.create_pod(NS, _pod("p3"))

    assert pending_message(cluster, NS, "p3") == NO_DEVICE

    # explain (this scheduler only): per node, the request and where its devices went
    if isinstance(sched, SchedulerProcess):
        code, text = sched.get(f"/explain/{NS}/p3?nodes=true")
        assert code == 200, text
        entries = {n["node"]: n for n in json.loads(text)["now"]["nodes"]}
        for node in nodes:
            assert entries[node]["reason"] == "cannot allocate all claims"
            [report] = entries[node]["devices"]
            assert report["request"] == "gpu" and report["wanted"] == "1"
            taken = with_gpus.get(node, 0)
            assert (report["devices"], report["inUse"], report["free"]) == (taken, taken, 0)


ATTACH = "fabric.example.com"


def test_a_device_with_binding_conditions_binds_once_its_driver_says_ready(
    env: tuple[ClusterHandle, Scheduler],
) -> None:
    cluster, _ = env
    node = sorted(n["metadata"]["name"] for n in cluster.api("GET", "/api/v1/nodes")["items"])[2]
    cluster.api(
        "POST",
        f"{RESOURCE}/resourceslices",
        {
            "metadata": {"name": f"{node}-fabric"},
            "spec": {
                "driver": ATTACH,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "link-0",
                        "bindingConditions": ["fabric.example.com/attached"],
                        "bindingFailureConditions": ["fabric.example.com/failed"],
                    }
                ],
            },
        },
    )
    cluster.api(
        "POST",
        f"{RESOURCE}/deviceclasses",
        {
            "metadata": {"name": "fabric"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{ATTACH}"'}}]},
        },
    )
    cluster.api(
        "POST",
        f"{RESOURCE}/namespaces/{NS}/resourceclaims",
        {
            "metadata": {"name": "link"},
            "spec": {
                "devices": {
                    "requests": [{"name": "link", "exactly": {"deviceClassName": "fabric"}}]
                }
            },
        },
    )
    manifest = pod_manifest("attached", scheduler_name=SCHED)
    manifest["spec"]["resourceClaims"] = [{"name": "link", "resourceClaimName": "link"}]
    cluster.create_pod(NS, manifest)

    def allocated() -> dict[str, Any] | None:
        claim: dict[str, Any] = cluster.api(
            "GET", f"{RESOURCE}/namespaces/{NS}/resourceclaims/link"
        )
        return claim if (claim.get("status") or {}).get("allocation") else None

    claim = wait_for(allocated, timeout=60, what="the claim allocated at PreBind")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["bindingConditions"] == ["fabric.example.com/attached"]
    assert "allocationTimestamp" in claim["status"]["allocation"]
    # PreBind waits: the pod is not bound while the driver has not reported
    time.sleep(3)
    assert not (cluster.get_pod(NS, "attached") or {}).get("spec", {}).get("nodeName")

    # the driver reports the device attached (status.devices, as a DRA driver writes it)
    claim["status"]["devices"] = [
        {
            "driver": ATTACH,
            "pool": node,
            "device": "link-0",
            "conditions": [
                {
                    "type": "fabric.example.com/attached",
                    "status": "True",
                    "reason": "Attached",
                    "message": "",
                    "lastTransitionTime": "2026-12-06T00:00:00Z",
                }
            ],
        }
    ]
    cluster.api("PUT", f"{RESOURCE}/namespaces/{NS}/resourceclaims/link/status", claim)

    def bound() -> str | None:
        pod = cluster.get_pod(NS, "attached") or {}
        return pod.get("spec", {}).get("nodeName") or None

    # upstream polls every 5 s: within a few polls
    assert wait_for(bound, timeout=30, what="the pod bound after the condition") == node
