"""A pod with a ResourceClaimTemplate through the whole path, onto a real node: the
controller-manager makes its claim, the scheduler allocates a device of the ResourceSlice
that a DRA driver on the real node published (hack/dra-test-driver, beside the kubelet:
kas_dev/cluster/dra_driver.py), reserves the claim for the pod and binds it; the kubelet
has the driver prepare the claim (NodePrepareResources) and runs the pod; once the pod is
deleted the kubelet has the claim unprepared and the controller deletes it.

The same assertions hold for this scheduler (--feature-gates=DynamicResourceAllocation=true)
and for upstream kube-scheduler v1.37.2 with the same profile (tests/contenders.py), one
after the other on the real-node cluster of the session. The pod runs the pause image the
real node already has, so the scheduler's image is not built for this file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kas_dev.cluster import dra_driver
from kas_dev.cluster.dra_driver import DriverOnNode
from kas_dev.cluster.pause_image import PAUSE_IMAGE
from kas_dev.cluster.realnode import REAL_NODE_LABEL
from tests.contenders import CONTENDERS, Scheduler, UpstreamScheduler
from tests.dra_cluster import RESOURCE, cluster_scoped
from tests.e2e.conftest import RealCluster
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

# a profile name of its own: the chart tests' scheduler (kube-async-scheduler) and the
# cluster's default kube-scheduler leave these pods alone
SCHED = "kas-dra-e2e"
GATE = "--feature-gates=DynamicResourceAllocation=true"
CLASS = "kas-test-device"
TEMPLATE = "one-device"
DEVICES = 2


@pytest.fixture(scope="module")
def driver(real_node_cluster: RealCluster) -> Iterator[DriverOnNode]:
    """The driver on the real node, and a DeviceClass that selects its devices by CEL."""
    rc = real_node_cluster
    on_node = dra_driver.start(rc.local, rc.real_node, devices=DEVICES)
    try:
        with cluster_scoped(rc.handle, f"deviceclasses/{CLASS}"):
            rc.handle.api(
                "POST",
                f"{RESOURCE}/deviceclasses",
                {
                    "metadata": {"name": CLASS},
                    "spec": {
                        "selectors": [
                            {"cel": {"expression": f'device.driver == "{on_node.driver}"'}}
                        ]
                    },
                },
            )
            yield on_node
    finally:
        dra_driver.stop(rc.local, rc.real_node)


@pytest.fixture(params=CONTENDERS)
def contender(
    request: pytest.FixtureRequest,
    real_node_cluster: RealCluster,
    tmp_path: Path,
) -> Iterator[tuple[str, Scheduler]]:
    """This scheduler or upstream kube-scheduler v1.37.2, with profile SCHED and the DRA
    gate, and a namespace of its own holding the claim template."""
    cluster = real_node_cluster.handle
    config = write_config(tmp_path / "config.yaml", [{"schedulerName": SCHED}])
    sched: Scheduler
    if request.param == "ours":
        sched = SchedulerProcess(
            cluster.kubeconfig, config, tmp_path / "scheduler.log", extra_args=[GATE]
        ).start()
    else:
        sched = UpstreamScheduler(
            cluster.bin_dir, cluster.kubeconfig, config, tmp_path / "upstream.log", [GATE]
        )
        sched.start()
    ns = cluster.create_namespace(f"dra-{request.param}")
    cluster.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", _template())
    try:
        yield ns, sched
    finally:
        sched.stop()


def _template() -> dict[str, Any]:
    """One device of the class, picked by an attribute the driver publishes."""
    request = {
        "name": "dev",
        "exactly": {
            "deviceClassName": CLASS,
            "selectors": [
                {"cel": {"expression": f'device.attributes["{dra_driver.DRIVER}"].index >= 0'}}
            ],
        },
    }
    return {
        "metadata": {"name": TEMPLATE},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def _pod(name: str) -> dict[str, Any]:
    pod = pod_manifest(
        name,
        scheduler_name=SCHED,
        cpu="10m",
        memory="16Mi",
        # the real node, not the kwok nodes of the session's cluster (which have no
        # devices anyway); its network namespace, as there is no pod network here
        nodeSelector={REAL_NODE_LABEL: "true"},
        hostNetwork=True,
        terminationGracePeriodSeconds=2,
        resourceClaims=[{"name": "dev", "resourceClaimTemplateName": TEMPLATE}],
    )
    container = pod["spec"]["containers"][0]
    # the sandbox image the real node was given: nothing can be pulled here
    container["image"] = PAUSE_IMAGE
    container["imagePullPolicy"] = "Never"
    container["resources"]["claims"] = [{"name": "dev"}]
    return pod


def _claim(cluster: ClusterHandle, ns: str, name: str) -> dict[str, Any] | None:
    status, body = cluster.admin.request("GET", f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}")
    if status == 404:
        return None
    assert status == 200, body
    return dict(body)


def _scheduled_by(cluster: ClusterHandle, ns: str, pod: str) -> set[str]:
    """Who reported the pod's Scheduled event: each profile reports as its own name."""
    return {
        str(ev.get("reportingController"))
        for ev in cluster.events(ns)
        if ev.get("regarding", {}).get("name") == pod and ev.get("reason") == "Scheduled"
    }


def test_a_claim_template_pod_runs_on_the_real_node_with_a_device_of_its_driver(
    real_node_cluster: RealCluster,
    driver: DriverOnNode,
    contender: tuple[str, Scheduler],
) -> None:
    cluster, node = real_node_cluster.handle, real_node_cluster.real_node
    ns, sched = contender
    created = cluster.create_pod(ns, _pod("with-device"))

    def running() -> dict[str, Any] | None:
        pod = cluster.get_pod(ns, "with-device")
        return pod if pod and pod.get("status", {}).get("phase") == "Running" else None

    pod = wait_for(running, timeout=180, interval=0.5, what="the pod Running")
    assert pod["spec"]["nodeName"] == node
    assert wait_for(
        lambda: _scheduled_by(cluster, ns, "with-device"), timeout=30, what="Scheduled event"
    ) == {SCHED}

    # the claim the resourceclaim controller made from the template, owned by the pod
    [claim_status] = pod["status"]["resourceClaimStatuses"]
    assert claim_status["name"] == "dev"
    claim_name = claim_status["resourceClaimName"]
    claim = _claim(cluster, ns, claim_name)
    assert claim is not None
    assert [o["uid"] for o in claim["metadata"]["ownerReferences"]] == [created["metadata"]["uid"]]
    # allocated by the scheduler: one device of the real node's slice, for this node only
    allocation = claim["status"]["allocation"]
    [result] = allocation["devices"]["results"]
    assert result["request"] == "dev"
    assert result["driver"] == driver.driver
    assert result["pool"] == node
    assert result["device"] in driver.devices
    [term] = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": [node]}]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "with-device", "uid": created["metadata"]["uid"]}
    ]
    # the kubelet had the driver prepare it before it started the container
    assert f"{ns}/{claim_name}" in driver.prepared_claims()

    # the pod goes: the kubelet has the claim unprepared, the controller deletes it
    cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/with-device")
    wait_for(lambda: cluster.get_pod(ns, "with-device") is None, timeout=120, what="pod gone")
    wait_for(lambda: _claim(cluster, ns, claim_name) is None, timeout=60, what="claim deleted")
    assert f"{ns}/{claim_name}" in driver.unprepared_claims()
    if isinstance(sched, SchedulerProcess):
        assert sched.proc is not None and sched.proc.poll() is None, sched.tail()
    else:
        assert sched.alive(), sched.tail()
