"""`cluster up --generic-workload`: the local control plane serves v1.37.2's Workload and
PodGroup API (scheduling.k8s.io/v1beta1) as gangs need it, and only when asked.

What is checked is the API server's and controller manager's behaviour the scheduler will
rely on (docs/plans/gangs.md section 1-2): the resources are served, a pod keeps
spec.schedulingGroup (the API server drops it with the gate off), the Priority admission
plugin resolves a PodGroup's priorityClassName into spec.priority, disruptionMode defaults
to single, and a deleted PodGroup goes away (its protection finalizer is removed by the
controller manager's podgroup-protection-controller, which runs only with the gate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.kube import ClusterHandle, pod_manifest, wait_for

pytestmark = pytest.mark.cluster

GROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"


def _pod_group(name: str, min_count: int, priority_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_the_gate_serves_pod_groups_and_pods_keep_their_group(
    make_cluster: Callable[..., ClusterHandle],
) -> None:
    c = make_cluster(0, generic_workload=True)
    assert c.local.status()["feature_gates"] == ["GenericWorkload=true"]
    ns = c.create_namespace("gangs")
    c.api(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"metadata": {"name": "gang-high"}, "value": 1000},
    )

    def create_group() -> dict[str, Any] | None:
        # the Priority admission plugin reads PriorityClasses from its informer, which
        # may not hold the class just created yet (seen under load): it refuses until it
        # does, as it would for any client
        status, out = c.admin.request(
            "POST", GROUPS.format(ns=ns), _pod_group("trainers", 3, "gang-high")
        )
        if status == 403 and "no PriorityClass with name gang-high" in str(out):
            return None
        assert status < 300, f"POST podgroups: HTTP {status}: {out}"
        return dict(out)

    made = wait_for(create_group, timeout=60, what="admission to know the PriorityClass")
    spec = made["spec"]
    assert spec["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert spec["priority"] == 1000  # the Priority admission plugin resolved the class
    assert spec["disruptionMode"] == {"single": {}}  # the API's default
    assert "scheduling.k8s.io/podgroup-protection" in made["metadata"].get("finalizers", [])

    pod = pod_manifest("trainer-0", scheduler_name="kube-async-scheduler")
    pod["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}
    created = c.create_pod(ns, pod)
    assert created["spec"].get("schedulingGroup") == {"podGroupName": "trainers"}

    # with no active pod naming it, the controller manager lifts the finalizer
    c.api("DELETE", f"/api/v1/namespaces/{ns}/pods/trainer-0?gracePeriodSeconds=0")
    c.api("DELETE", GROUPS.format(ns=ns) + "/trainers")
    wait_for(
        lambda: c.admin.request("GET", GROUPS.format(ns=ns) + "/trainers")[0] == 404,
        timeout=60,
        what="the deleted PodGroup to be gone",
    )


def test_without_the_flag_there_is_no_pod_group_api(cluster: ClusterHandle) -> None:
    # the shared cluster is started without --generic-workload, as the scheduler's other
    # tests and upstream's defaults run
    status, _ = cluster.admin.request("GET", GROUPS.format(ns="default"))
    assert status == 404
    assert cluster.local.status()["feature_gates"] == []
    ns = cluster.create_namespace("no-gangs")
    pod = pod_manifest("solo", scheduler_name="nobody")
    pod["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}
    created = cluster.create_pod(ns, pod)
    assert "schedulingGroup" not in created["spec"]  # dropped: the field is gated
