"""Without GenericWorkload, a pod that names a PodGroup (spec.schedulingGroup) is refused,
not placed alone.

On a cluster that serves the Workload/PodGroup API (`cluster up --generic-workload`) the
API server keeps a pod's spec.schedulingGroup. With the scheduler's gate off there is no
pod-group cycle (tests/integration/test_gangs.py has it on), and placing members one by
one could bind part of a gang: the
member is refused with PodScheduled=False and a FailedScheduling event naming the group,
as a pod with resource claims is, while a pod of no group beside it is placed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kas_dev.cluster.nodes import NodeGroup
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = pytest.mark.cluster

REFUSAL = (
    'pod belongs to pod group "trainers" (spec.schedulingGroup); workload-aware (gang) '
    "scheduling is off in this scheduler (--feature-gates=GenericWorkload=true turns it on)"
)


def _unscheduled(cluster: ClusterHandle, ns: str, name: str) -> dict[str, Any] | None:
    pod = cluster.get_pod(ns, name) or {}
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return dict(c)
    return None


def test_a_pod_group_member_is_refused_and_a_solo_pod_is_placed(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster([NodeGroup(2)], generic_workload=True)
    ns = cluster.create_namespace("gang-refused")
    cluster.api(
        "POST",
        f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "trainers"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        },
    )
    sched = SchedulerProcess(
        cluster.kubeconfig, write_config(tmp_path / "config.yaml"), tmp_path / "scheduler.log"
    )
    sched.start()
    try:
        for i in range(2):
            member = pod_manifest(f"trainer-{i}")
            member["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}
            cluster.create_pod(ns, member)
        cluster.create_pod(ns, pod_manifest("solo"))
        wait_for(
            lambda: (cluster.get_pod(ns, "solo") or {}).get("spec", {}).get("nodeName"),
            timeout=60,
            what=f"the solo pod bound\n{sched.tail()}",
        )
        for i in range(2):
            cond = wait_for(
                lambda i=i: _unscheduled(cluster, ns, f"trainer-{i}"),
                timeout=60,
                what=f"trainer-{i} refused\n{sched.tail()}",
            )
            assert cond["reason"] == "Unschedulable"
            assert cond["message"] == REFUSAL
        events = wait_for(
            lambda: [
                e
                for e in cluster.events(ns)
                if e.get("reason") == "FailedScheduling"
                and e.get("regarding", {}).get("name") == "trainer-0"
            ],
            timeout=30,
            what="the FailedScheduling event of trainer-0",
        )
        assert events[0]["note"] == REFUSAL
        # nothing of the group was bound
        assert not any(
            (cluster.get_pod(ns, f"trainer-{i}") or {}).get("spec", {}).get("nodeName")
            for i in range(2)
        )
    finally:
        sched.stop()
