"""A bind answered 409 because the pod is being deleted is logged as such (issue 10,
item 4), not as "already bound".

A webhook holds the pods/binding call; meanwhile the pod is deleted (a finalizer keeps
it terminating), so when the API server goes on with the binding it refuses with
'pod ... is being deleted, cannot be assigned to a host' (pkg/registry/core/pod/storage).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kas_dev.cluster.nodes import NodeGroup
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess, write_config
from tests.webhook import BindingWebhook

pytestmark = pytest.mark.cluster

FINALIZER = "tests.kube-async-scheduler.io/hold"


def test_a_bind_refused_because_the_pod_is_being_deleted_is_logged_as_such(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster([NodeGroup(1)])
    ns = cluster.create_namespace(f"bind409-{uuid.uuid4().hex[:6]}")
    hook = BindingWebhook(cluster, ns)
    hook.start()
    hook.delay = 3.0
    sched = SchedulerProcess(
        cluster.kubeconfig, write_config(tmp_path / "config.yaml"), tmp_path / "scheduler.log"
    )
    sched.start()
    try:
        pod = pod_manifest("doomed")
        pod["metadata"]["finalizers"] = [FINALIZER]
        cluster.create_pod(ns, pod)
        wait_for(lambda: hook.deletes["doomed"] >= 1, timeout=30, what="the bind at the webhook")
        cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/doomed")
        wait_for(
            lambda: "bind conflict pod=" in sched.log_path.read_text(errors="replace"),
            timeout=30,
            what=f"the bind's answer\n{sched.tail()}",
        )
        lines = [
            line
            for line in sched.log_path.read_text(errors="replace").splitlines()
            if "bind conflict" in line
        ]
        assert len(lines) == 1, lines
        assert f"pod={ns}/doomed" in lines[0] and lines[0].endswith("pod is being deleted")
        current = cluster.get_pod(ns, "doomed")
        assert current is not None and not current["spec"].get("nodeName")
    finally:
        sched.stop()
        hook.stop()
        cluster.api(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/doomed",
            {"metadata": {"finalizers": None}},
            content_type="application/merge-patch+json",
        )
