"""Extended resources backed by DRA against the real control plane: a DeviceClass names
`example.com/gpu` as its extendedResourceName, no node advertises that resource, and
drivers publish devices as ResourceSlices for two kwok nodes. This scheduler (with
--feature-gates=DynamicResourceAllocation=true) and upstream kube-scheduler v1.37.2
(the `env` fixture's params) run under the same assertions.

What must hold for both: a pod whose containers ask for two GPUs in all lands on the
one node with two devices; the scheduler creates its claim for the pod with upstream's
shape (generated name, annotation, the pod as controller, one request per container,
the init container mapped to a later container's request), allocated there and reserved
for the pod, and records the mappings in the pod's status.extendedResourceClaimStatus;
the next one-GPU pod goes where a device is still free; a pod asking for more than any
node has is told why in the same words."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kas_dev.cluster.nodes import NodeGroup
from tests.contenders import CONTENDERS, Scheduler, contender_on_cluster
from tests.dra_cluster import RESOURCE, pending_message, publish_devices
from tests.kube import ClusterHandle, pod_manifest, wait_for

pytestmark = pytest.mark.cluster

SCHED = "kube-async-scheduler"
NS = "default"
DRIVER = "gpu.example.com"
GPU = "example.com/gpu"
GATE = "--feature-gates=DynamicResourceAllocation=true"

TOO_MANY = (
    "0/4 nodes are available: 4 cannot allocate all claims. preemption: 0/4 nodes are "
    "available: 4 Preemption is not helpful for scheduling."
)


@pytest.fixture(scope="module", params=CONTENDERS)
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterHandle, Scheduler]]:
    yield from contender_on_cluster(
        request.param,
        tmp_path_factory.mktemp(f"dra-ext-{request.param}"),
        NodeGroup(count=4, name_prefix="ext"),
        [{"schedulerName": SCHED}],
        [GATE],
    )


def _container(name: str, gpus: int) -> dict[str, Any]:
    # an extended resource's request must equal its limit (API validation)
    amounts = {"cpu": "10m", GPU: str(gpus)}
    return {
        "name": name,
        "image": "registry.local/pause:3.10",
        "resources": {"requests": amounts, "limits": {GPU: str(gpus)}},
    }


def _pod(name: str, *gpus: int, init: int = 0) -> dict[str, Any]:
    manifest = pod_manifest(name, scheduler_name=SCHED)
    manifest["spec"]["containers"] = [_container(f"c{i}", n) for i, n in enumerate(gpus)]
    if init:
        manifest["spec"]["initContainers"] = [_container("init", init)]
    return manifest


def _node_of(cluster: ClusterHandle, name: str) -> str:
    def bound() -> str | None:
        node = ((cluster.get_pod(NS, name) or {}).get("spec") or {}).get("nodeName")
        return str(node) if node else None

    node: str = wait_for(bound, timeout=90, what=f"{name} bound")
    return node


def _claim_of(cluster: ClusterHandle, pod_name: str) -> dict[str, Any]:
    items = cluster.api("GET", f"{RESOURCE}/namespaces/{NS}/resourceclaims")["items"]
    [claim] = [
        c
        for c in items
        if any(o["name"] == pod_name for o in c["metadata"].get("ownerReferences") or ())
    ]
    return dict(claim)


def test_extended_resources_get_devices_through_the_schedulers_own_claim(
    env: tuple[ClusterHandle, Scheduler],
) -> None:
    cluster, _ = env
    nodes = sorted(n["metadata"]["name"] for n in cluster.api("GET", "/api/v1/nodes")["items"])
    publish_devices(cluster, DRIVER, nodes[0], 1)
    publish_devices(cluster, DRIVER, nodes[1], 2)
    cluster.api(
        "POST",
        f"{RESOURCE}/deviceclasses",
        {
            "metadata": {"name": "gpu"},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                "extendedResourceName": GPU,
            },
        },
    )

    # two app containers with one GPU each; the init container's GPU is the first's
    cluster.create_pod(NS, _pod("pair", 1, 1, init=1))
    assert _node_of(cluster, "pair") == nodes[1]
    pod = cluster.get_pod(NS, "pair")
    assert pod is not None
    claim = _claim_of(cluster, "pair")
    meta = claim["metadata"]
    assert meta["name"].startswith("pair-extended-resources-")
    assert meta["generateName"] == "pair-extended-resources-"
    assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "pair",
            "uid": pod["metadata"]["uid"],
            "controller": True,
        }
    ]
    assert "resource.kubernetes.io/delete-protection" in meta["finalizers"]
    # container index counts the init container first; the request index is GPU's
    # place among the container's sorted requests (cpu, example.com/gpu)
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": name,
            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
        }
        for name in ("container-1-request-1", "container-2-request-1")
    ]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted((r["request"], r["pool"]) for r in results) == [
        ("container-1-request-1", nodes[1]),
        ("container-2-request-1", nodes[1]),
    ]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "pair", "uid": pod["metadata"]["uid"]}
    ]
    assert pod["status"]["extendedResourceClaimStatus"] == {
        "resourceClaimName": meta["name"],
        "requestMappings": [
            {"containerName": "c0", "resourceName": GPU, "requestName": "container-1-request-1"},
            {"containerName": "c1", "resourceName": GPU, "requestName": "container-2-request-1"},
            {"containerName": "init", "resourceName": GPU, "requestName": "container-1-request-1"},
        ],
    }

    # the only free device left is on the first node
    cluster.create_pod(NS, _pod("one", 1))
    assert _node_of(cluster, "one") == nodes[0]
    [result] = _claim_of(cluster, "one")["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], result["device"]) == (nodes[0], "gpu-0")

    # more than any node has: the same words from both schedulers
    cluster.create_pod(NS, _pod("many", 3))
    assert pending_message(cluster, NS, "many") == TOO_MANY
