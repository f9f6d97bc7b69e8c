"""explain changes nothing the scheduling loop reads (issue 21, item 1): an empty node
deleted, explain called before the loop's next cycle, then pods scheduled: none may be
bound to the deleted node.

Before the fix explain built its snapshot through the cache's update_snapshot, which
drops the node tombstones: the loop's own snapshot then never learned of the deletion
and kept offering the (empty, so best-scored) node. Reproduced on the real control
plane: two empty nodes deleted, one explain, 40 pods: 2 bound to the deleted nodes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kas_dev.cluster.nodes import NodeGroup
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = pytest.mark.cluster

PODS = 40
HOSTNAME = "kubernetes.io/hostname"


def test_no_pod_is_bound_to_a_node_deleted_before_an_explain(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster([NodeGroup(2, name_prefix="busy"), NodeGroup(2, name_prefix="empty")])
    ns = cluster.create_namespace(f"ghost-{uuid.uuid4().hex[:6]}")
    sched = SchedulerProcess(
        cluster.kubeconfig, write_config(tmp_path / "config.yaml"), tmp_path / "scheduler.log"
    ).start()
    try:
        # the busy nodes hold a pod each, so the empty ones score best for new pods
        for i in range(2):
            cluster.create_pod(ns, pod_manifest(f"old-{i}", cpu="1", nodeName=f"busy-{i}"))
        # a pod to explain that schedules nothing: gated, and too big for any node (so
        # the answer lists the nodes its dry run saw)
        cluster.create_pod(ns, pod_manifest("asked", cpu="64",
                                            schedulingGates=[{"name": "test/hold"}]))  # fmt: skip

        def now_nodes() -> set[str] | None:
            code, text = sched.get(f"/explain/{ns}/asked?nodes=true")
            if code != 200:
                return None
            return {n["node"] for n in json.loads(text)["now"].get("nodes") or []}

        deleted = ["empty-0", "empty-1"]
        wait_for(lambda: now_nodes() == {"busy-0", "busy-1", *deleted},
                 what="the scheduler's cache holding the four nodes")  # fmt: skip
        # one scheduling cycle, so the loop's own snapshot holds the four nodes (kept off
        # the empty ones, so they stay empty)
        cluster.create_pod(ns, pod_manifest("warm", cpu="10m",
                                            nodeSelector={HOSTNAME: "busy-0"}))  # fmt: skip
        wait_for(lambda: (cluster.get_pod(ns, "warm") or {})["spec"].get("nodeName"),
                 what=f"the warm-up pod bound\n{sched.tail()}")  # fmt: skip
        cluster.delete_nodes(deleted)
        # explain until its dry run no longer sees the deleted nodes: the informer has
        # delivered the deletion and no scheduling cycle ran since (nothing is pending)
        wait_for(lambda: now_nodes() == {"busy-0", "busy-1"},
                 what="explain's dry run seeing the deletion")  # fmt: skip

        for i in range(PODS):
            cluster.create_pod(ns, pod_manifest(f"new-{i}", cpu="10m"))

        def placements() -> dict[str, str] | None:
            pods = [p for p in cluster.list_pods(ns) if p["metadata"]["name"].startswith("new-")]
            nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
            return nodes if len(nodes) == PODS and all(nodes.values()) else None

        nodes = wait_for(placements, timeout=120, what=f"{PODS} pods bound\n{sched.tail()}")
        ghosts = sorted(pod for pod, node in nodes.items() if node in deleted)
        assert ghosts == [], f"bound to deleted nodes: {ghosts}"
        assert set(nodes.values()) <= {"busy-0", "busy-1"}
    finally:
        sched.stop()
