"""explain for gang members on the real control plane (GenericWorkload): a gang short of
minCount members is `Gated` in GangScheduling's words and stays untouched by the call; a
gang that fits nowhere is tried as the pod-group cycle tries it, and its PodGroupPostFilter
finds no victim (nothing of lower priority), as the PodGroup's own condition says."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kas_dev.cluster.nodes import NodeGroup
from tests.integration.test_gangs import GATE, _group_condition, _member, _pod_group
from tests.kube import ClusterHandle, wait_for
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = pytest.mark.cluster

NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"


def test_explain_answers_for_the_group(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster([NodeGroup(2, cpu="4")], generic_workload=True)
    ns = cluster.create_namespace("explain-gangs")
    sched = SchedulerProcess(
        cluster.kubeconfig,
        write_config(tmp_path / "config.yaml"),
        tmp_path / "scheduler.log",
        extra_args=[GATE],
    ).start()

    def explain(name: str) -> dict[str, Any] | None:
        code, text = sched.get(f"/explain/{ns}/{name}")
        return json.loads(text) if code == 200 else None

    try:
        # two of three: held at PreEnqueue
        _pod_group(cluster, ns, "short", {"gang": {"minCount": 3}})
        for i in range(2):
            _member(cluster, ns, f"short-{i}", "short", "1")

        def held() -> dict[str, Any] | None:
            body = explain("short-0")
            group = (body or {}).get("podGroup") or {}
            return body if group.get("found") and group.get("membersKnown") == 2 else None

        body = wait_for(held, timeout=60, what=f"explain of short-0\n{sched.tail()}")
        group = body["podGroup"]
        assert group["policy"] == "gang" and group["minCount"] == 3
        assert group["preEnqueue"] == {
            "held": True,
            "message": "waiting for minCount pods from a gang to appear in scheduling queue",
        }
        assert [m["queue"] for m in group["members"]] == ["gated", "gated"]
        assert group["now"]["result"] == "Gated" and body["now"]["result"] == "Gated"
        versions = {
            i: (cluster.get_pod(ns, f"short-{i}") or {})["metadata"]["resourceVersion"]
            for i in range(2)
        }
        explain("short-1")
        for i in range(2):
            pod = cluster.get_pod(ns, f"short-{i}") or {}
            assert pod["metadata"]["resourceVersion"] == versions[i]
            assert not pod["spec"].get("nodeName")

        # two 5-cpu members on 4-cpu nodes: nowhere, and nothing to preempt
        _pod_group(cluster, ns, "big", {"gang": {"minCount": 2}})
        for i in range(2):
            _member(cluster, ns, f"big-{i}", "big", "5")
        told = wait_for(
            lambda: _group_condition(cluster, ns, "big"), timeout=60,
            what=f"big's condition\n{sched.tail()}",
        )  # fmt: skip
        body = wait_for(lambda: explain("big-0"), timeout=30, what="explain of big-0")
        now = body["podGroup"]["now"]
        assert now["result"] == "Unschedulable" and not now["reachesMinCount"]
        assert now["message"] == told["message"]
        assert now["message"].endswith(NO_VICTIMS)
        assert now["preemption"]["code"] == "UnschedulableAndUnresolvable"
        assert now["preemption"]["victimCount"] == 0
        assert all(p["node"] is None for p in now["placements"])
    finally:
        sched.stop()
