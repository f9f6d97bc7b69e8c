"""The DynamicResources plugin's cycle against the real API server and controllers: the
informers fill the device state, PreEnqueue / PreFilter / Filter / Reserve / PreBind run
as the scheduling and binding cycles run them, and the claims in the API show what
PreBind wrote (allocation, finalizer, reservation), one device per claim, never twice.
A claim template goes through kube-controller-manager's resourceclaim controller, which
creates the pod's claim and names it in the pod's status."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler.cache.node_view import NodeView
from scheduler.client.connection import Connection
from scheduler.client.dispatcher import Dispatcher
from scheduler.dra.claim_writes import FINALIZER
from scheduler.dra.device_state import DeviceState
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.model.node import node_from_dict
from scheduler.model.pod import PodInfo, pod_from_dict
from scheduler.plugins.dynamic_resources import DynamicResources
from tests.dra_cluster import RESOURCE, cluster_scoped, running_dra_informers
from tests.kube import ClusterHandle, pod_manifest, until

pytestmark = pytest.mark.cluster


@pytest.fixture
async def dispatcher(cluster: ClusterHandle) -> AsyncIterator[Dispatcher]:
    conn = await Connection.from_kubeconfig(cluster.kubeconfig)
    yield Dispatcher(conn)
    await conn.close()


def _claim_spec(device_class: str) -> dict[str, Any]:
    return {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}
    }


def _pod(name: str, claims: list[dict[str, Any]]) -> dict[str, Any]:
    manifest = pod_manifest(name, scheduler_name="nobody")  # nothing else places them
    manifest["spec"]["resourceClaims"] = claims
    return manifest


async def test_claims_are_allocated_written_and_never_shared(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    suffix = uuid.uuid4().hex[:6]
    ns = cluster.create_namespace(f"drap-{suffix}")
    driver = f"gpu-{suffix}.example.com"
    device_class = f"gpu-{suffix}"
    nodes = [node_from_dict(n) for n in cluster.api("GET", "/api/v1/nodes")["items"]]
    assert len(nodes) >= 2
    target = nodes[0].name
    cluster.api(
        "POST",
        f"{RESOURCE}/deviceclasses",
        {
            "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    cluster.api(
        "POST",
        f"{RESOURCE}/resourceslices",
        {
            "metadata": {"name": f"{target}-{suffix}"},
            "spec": {
                "driver": driver,
                "nodeName": target,
                "pool": {"name": target, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
            },
        },
    )
    for name in ("first", "third"):
        cluster.api(
            "POST",
            f"{RESOURCE}/namespaces/{ns}/resourceclaims",
            {"metadata": {"name": name}, "spec": _claim_spec(device_class)},
        )
    cluster.api(
        "POST",
        f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates",
        {"metadata": {"name": "per-pod"}, "spec": {"spec": _claim_spec(device_class)}},
    )
    raw_first = cluster.create_pod(ns, _pod("p1", [{"name": "gpu", "resourceClaimName": "first"}]))
    raw_tmpl = cluster.create_pod(
        ns, _pod("p2", [{"name": "gpu", "resourceClaimTemplateName": "per-pod"}])
    )
    raw_third = cluster.create_pod(ns, _pod("p3", [{"name": "gpu", "resourceClaimName": "third"}]))
    raw_missing = cluster.create_pod(
        ns, _pod("p4", [{"name": "gpu", "resourceClaimName": "missing"}])
    )

    state = DeviceState()
    plugin = DynamicResources(Handle(device_state=state, resource_claim_api=dispatcher))

    async def place(pod: PodInfo) -> dict[str, str]:
        """One pod through PreFilter and Filter on every node; Reserve and PreBind on
        the node that fits. The reasons per node that does not."""
        cycle = CycleState()
        _, status = plugin.pre_filter(cycle, pod, None)  # type: ignore[arg-type]
        assert status.code == Code.SUCCESS, status
        reasons = {}
        fits = []
        for node in nodes:
            verdict = plugin.filter(cycle, pod, NodeView(node))
            if verdict.ok:
                fits.append(node.name)
            else:
                reasons[node.name] = "; ".join(verdict.reasons)
        if fits:
            assert fits == [target]
            assert plugin.reserve(cycle, pod, target).ok
            bound = await plugin.pre_bind(cycle, pod, target)
            assert bound.ok, bound
        return reasons

    with cluster_scoped(
        cluster, f"deviceclasses/{device_class}", f"resourceslices/{target}-{suffix}"
    ):
        async with running_dra_informers(dispatcher.connection, state):
            await until(lambda: state.get_claim(ns, "third") is not None)

            # a claim that does not exist: the pod waits at PreEnqueue, upstream's words
            missing = plugin.pre_enqueue(pod_from_dict(raw_missing))
            assert missing.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            assert missing.reasons == (f'could not find ResourceClaim "{ns}/missing"',)

            # the first pod gets gpu-0 on the node of the slice, nowhere else
            first = pod_from_dict(raw_first)
            assert plugin.pre_enqueue(first).ok
            reasons = await place(first)
            assert set(reasons) == {n.name for n in nodes} - {target}
            assert set(reasons.values()) == {"cannot allocate all claims"}
            written = cluster.api("GET", f"{RESOURCE}/namespaces/{ns}/resourceclaims/first")
            assert FINALIZER in written["metadata"]["finalizers"]
            [result] = written["status"]["allocation"]["devices"]["results"]
            assert (result["driver"], result["pool"], result["device"]) == (driver, target, "gpu-0")
            assert written["status"]["reservedFor"] == [
                {"resource": "pods", "name": "p1", "uid": first.uid}
            ]
            selector = written["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
            assert selector == [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [target]}]}
            ]
            assert "allocationTimestamp" in written["status"]["allocation"]

            # the template's claim: made by the controller, named in the pod's status
            tmpl_pod: dict[str, Any] = {}

            def claim_named() -> bool:
                tmpl_pod.update(cluster.api("GET", f"/api/v1/namespaces/{ns}/pods/p2"))
                return bool(tmpl_pod.get("status", {}).get("resourceClaimStatuses"))

            await until(claim_named, 60)
            with_claim = pod_from_dict(tmpl_pod)
            claim_name = with_claim.resource_claim_statuses[0][1]
            assert claim_name is not None
            await until(lambda: state.get_claim(ns, claim_name) is not None)
            before = pod_from_dict(raw_tmpl)  # as first seen: no status yet
            waiting = plugin.pre_enqueue(before)
            assert waiting.reasons == (f'pod "{ns}/p2": ResourceClaim not created yet',)
            assert plugin.pre_enqueue(with_claim).ok
            await place(with_claim)
            made = cluster.api("GET", f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim_name}")
            assert made["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-1"

            # both devices are taken: the third pod fits nowhere, and no device is held twice
            third = pod_from_dict(raw_third)
            reasons = await place(third)
            assert reasons == {n.name: "cannot allocate all claims" for n in nodes}
            assert state.holders() == {(driver, target, "gpu-0"): 1, (driver, target, "gpu-1"): 1}
            claims = cluster.api("GET", f"{RESOURCE}/namespaces/{ns}/resourceclaims")["items"]
            held = [
                r["device"]
                for c in claims
                for r in (
                    (c.get("status") or {}).get("allocation") or {"devices": {"results": []}}
                )["devices"]["results"]
            ]
            assert sorted(held) == ["gpu-0", "gpu-1"]
