"""The scheduler against the real control plane: mixed constraints checked by an
independent checker, unschedulable pods and their events, other schedulers' pods left
alone, a bind race with another binder, and an API server restart mid-run."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.checker import check
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess, write_config
from tests.workloads import MIXED_NODES, SCHED, create_all, mixed_pods, others_pods

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def mixed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ClusterHandle, SchedulerProcess]]:
    d = tmp_path_factory.mktemp("mixed")
    local = LocalCluster(d / "cluster")
    local.up(MIXED_NODES)
    cluster = ClusterHandle(local)
    sched = SchedulerProcess(
        cluster.kubeconfig, write_config(d / "config.yaml"), d / "scheduler.log"
    )
    sched.start()
    yield cluster, sched
    sched.stop()
    local.down()


def _namespaces(cluster: ClusterHandle) -> dict[str, dict[str, str]]:
    return {
        n["metadata"]["name"]: n["metadata"].get("labels") or {}
        for n in cluster.api("GET", "/api/v1/namespaces")["items"]
    }


def test_a_thousand_mixed_pods_are_all_placed_within_their_constraints(
    mixed: tuple[ClusterHandle, SchedulerProcess],
) -> None:
    cluster, sched = mixed
    for ns in ("mixed-a", "mixed-b", "others"):
        cluster.create_namespace(ns, {"team": "mixed"})
    node_names = [n["metadata"]["name"] for n in cluster.api("GET", "/api/v1/nodes")["items"]]
    create_all(cluster, others_pods(sorted(node_names)))
    pods = mixed_pods(random.Random(7))
    assert len(pods) >= 1000
    create_all(cluster, pods)

    def all_bound() -> bool:
        ours = [p for p in cluster.list_pods() if p["spec"].get("schedulerName") == SCHED]
        return len(ours) == len(pods) and all(p["spec"].get("nodeName") for p in ours)

    wait_for(all_bound, timeout=240, interval=1.0, what=f"{len(pods)} pods bound\n{sched.tail()}")
    report = check(
        cluster.list_pods(),
        cluster.api("GET", "/api/v1/nodes")["items"],
        _namespaces(cluster),
        SCHED,
    )
    assert report.violations == []
    assert report.bound == len(pods) and report.pending == 0
    # spot checks the checker cannot make vacuous
    gpu = [p for p in cluster.list_pods("mixed-a") if p["metadata"]["name"].startswith("gpu-")]
    assert gpu and all(p["spec"]["nodeName"].startswith("gpu-") for p in gpu)
    assert sched.metric("scheduler_schedule_attempts_total", result="scheduled") >= len(pods)

    # pods of another scheduler: never bound, never given a condition or event by us
    for p in cluster.list_pods("others"):
        if p["metadata"]["name"].startswith("pending-"):
            assert not p["spec"].get("nodeName")
            assert not any(c["type"] == "PodScheduled" for c in p["status"].get("conditions") or [])
    ours_events = [e for e in cluster.events("others") if e.get("reportingController") == SCHED]
    assert ours_events == []


def test_a_pod_that_fits_nowhere_gets_an_event_and_a_condition_then_lands_on_a_new_node(
    mixed: tuple[ClusterHandle, SchedulerProcess],
) -> None:
    cluster, _ = mixed
    ns = cluster.create_namespace("unfit")
    cluster.create_pod(ns, pod_manifest("huge", cpu="40", memory="1Gi"))

    def condition() -> dict | None:
        pod = cluster.get_pod(ns, "huge") or {}
        conds = [
            c for c in pod.get("status", {}).get("conditions") or [] if c["type"] == "PodScheduled"
        ]
        return conds[0] if conds and conds[0]["status"] == "False" else None

    cond = wait_for(condition, timeout=30, what="PodScheduled=False")
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/100 nodes are available:")
    assert "Insufficient cpu" in cond["message"]

    def failed_event() -> dict | None:
        evs = [
            e
            for e in cluster.events(ns)
            if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == "huge"
        ]
        return evs[0] if evs else None

    ev = wait_for(failed_event, timeout=30, what="FailedScheduling event")
    assert ev["type"] == "Warning" and "Insufficient cpu" in ev["note"]

    # a node that fits: the NodeAdd event requeues the pod, long before any flush (60 s+)
    added = time.monotonic()
    cluster.create_nodes(NodeGroup(count=1, name_prefix="giant", cpu="64", memory="256Gi"))
    wait_for(lambda: (cluster.get_pod(ns, "huge") or {}).get("spec", {}).get("nodeName") == "giant-0",
             timeout=20, what="huge bound to giant-0")  # fmt: skip
    assert time.monotonic() - added < 20

    # the Scheduled event is written after the bind (as upstream's), so it may trail it
    def scheduled_events() -> list[dict] | None:
        evs = [
            e
            for e in cluster.events(ns)
            if e["reason"] == "Scheduled" and e["regarding"]["name"] == "huge"
        ]
        return evs or None

    evs = wait_for(scheduled_events, timeout=20, what="Scheduled event for huge")
    assert evs[0]["note"] == f"Successfully assigned {ns}/huge to giant-0"


def test_the_scheduler_survives_an_api_server_restart_and_schedules_everything_after(
    tmp_path: Path,
) -> None:
    local = LocalCluster(tmp_path / "cluster")
    local.up(3)
    cluster = ClusterHandle(local)
    sched = SchedulerProcess(
        cluster.kubeconfig, write_config(tmp_path / "config.yaml"), tmp_path / "s.log"
    )
    try:
        sched.start()
        ns = cluster.create_namespace("restart")
        for i in range(10):
            cluster.create_pod(ns, pod_manifest(f"before-{i}"))
        wait_for(lambda: all(p["spec"].get("nodeName") for p in cluster.list_pods(ns)) and len(cluster.list_pods(ns)) == 10,
                 timeout=30, what="first pods bound")  # fmt: skip
        local.stop_component("kube-apiserver")
        time.sleep(3)
        assert sched.proc is not None and sched.proc.poll() is None, (
            "scheduler died with the API server"
        )
        local.start_component("kube-apiserver")
        for i in range(20):
            cluster.create_pod(ns, pod_manifest(f"after-{i}"))
        wait_for(lambda: len(cluster.list_pods(ns)) == 30 and all(p["spec"].get("nodeName") for p in cluster.list_pods(ns)),
                 timeout=90, interval=0.5, what=f"pods after restart bound\n{sched.tail()}")  # fmt: skip
        report = check(cluster.list_pods(), cluster.api("GET", "/api/v1/nodes")["items"], {}, SCHED)
        assert report.violations == []
    finally:
        sched.stop()
        local.down()


BAD_CONFIGS = [
    ("unknown-plugin", {"profiles": [{"schedulerName": "s", "plugins": {"filter": {"enabled": [{"name": "NoSuchPlugin"}]}}}]},
     "profiles[0].plugins.filter.enabled[0].name"),
    ("wrong-type", {"podMaxBackoffSeconds": "ten"}, "podMaxBackoffSeconds"),
    ("unknown-field", {"profiles": [{"schedulerName": "s", "colour": "blue"}]}, "profiles[0].colour"),
    ("bad-plugin-arg", {"profiles": [{"schedulerName": "s", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Cheapest"}}}]}]},
     "profiles[0].pluginConfig[0].args.scoringStrategy.type"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "config", "field"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_exits_2_with_a_message_naming_the_field(
    tmp_path: Path, case: str, config: dict, field: str
) -> None:
    import subprocess
    import sys

    import yaml

    body = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        **config,
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(body))
    # no cluster at this address: exit 2 must come before any connection attempt
    res = subprocess.run(
        [sys.executable, "-m", "scheduler", "run", "--config", str(path), "--kubeconfig", str(tmp_path / "none")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert field in res.stderr
    assert "Traceback" not in res.stderr


def test_a_pod_bound_by_someone_else_between_assume_and_bind_leaves_the_cache_consistent(
    tmp_path: Path,
) -> None:
    from kas_dev.cluster.api import AdminClient
    from kas_dev.cluster.pki import pki_paths
    from tests.webhook import BindingWebhook

    local = LocalCluster(tmp_path / "cluster")
    local.up([NodeGroup(count=2, name_prefix="race", cpu="4", memory="8Gi")])
    cluster = ClusterHandle(local)
    ns = cluster.create_namespace("race")
    hook = BindingWebhook(cluster, ns)
    hook.start()
    hook.delay = 3.0  # the scheduler's bind waits here; kwok's identity is not delayed
    sched = SchedulerProcess(
        cluster.kubeconfig, write_config(tmp_path / "config.yaml"), tmp_path / "s.log"
    )
    try:
        sched.start()
        cluster.create_pod(
            ns, pod_manifest("p", cpu="3", nodeSelector={"kubernetes.io/hostname": "race-0"})
        )
        wait_for(
            lambda: hook.deletes["p"] == 1, timeout=20, what="the scheduler's bind of p in flight"
        )
        # another binder wins the race, to the other node
        pki = pki_paths(local.pki_dir)
        other = AdminClient(cluster.api_url, pki.ca_cert, pki.kwok_cert, pki.kwok_key)
        status, body = other.request("POST", f"/api/v1/namespaces/{ns}/pods/p/binding",
                                     {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "race-1"}})  # fmt: skip
        assert status == 201, body
        hook.delay = 0.0
        # the scheduler's own bind fails with 409: it must forget race-0's assumption and
        # count p on race-1, where it really is
        wait_for(lambda: "bind conflict pod=race/p" in sched.tail(200), timeout=20, what="409 seen")
        cluster.create_pod(
            ns, pod_manifest("q", cpu="3", nodeSelector={"kubernetes.io/hostname": "race-0"})
        )
        wait_for(lambda: (cluster.get_pod(ns, "q") or {}).get("spec", {}).get("nodeName") == "race-0",
                 timeout=20, what="q on race-0 (the forgotten assumption freed it)")  # fmt: skip
        cluster.create_pod(
            ns, pod_manifest("r", cpu="2", nodeSelector={"kubernetes.io/hostname": "race-1"})
        )

        def r_unschedulable() -> bool:
            evs = [
                e
                for e in cluster.events(ns)
                if e["regarding"]["name"] == "r" and e["reason"] == "FailedScheduling"
            ]
            return bool(evs) and "Insufficient cpu" in evs[0]["note"]

        wait_for(r_unschedulable, timeout=20, what="r rejected: p counts on race-1")
        pod_p = cluster.get_pod(ns, "p")
        assert pod_p is not None and pod_p["spec"]["nodeName"] == "race-1"
        assert not (cluster.get_pod(ns, "r") or {}).get("spec", {}).get("nodeName")
        # the only violation is the other binder's own doing; no node is over-committed
        report = check(cluster.list_pods(), cluster.api("GET", "/api/v1/nodes")["items"], {}, SCHED)
        assert report.violations == ["race/p on race-1 violates its node selector/affinity"]
    finally:
        sched.stop()
        hook.stop()
        local.down()


def test_replicas_behind_a_service_spread_by_the_system_default_constraints(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path / "cluster")
    # one big node that LeastAllocated alone would prefer for every small pod
    local.up([NodeGroup(count=1, name_prefix="big", cpu="64", memory="256Gi", zones=("zone-a",)),
              NodeGroup(count=3, name_prefix="small", cpu="4", memory="16Gi", zones=("zone-b", "zone-c", "zone-d"))])  # fmt: skip
    cluster = ClusterHandle(local)
    sched = SchedulerProcess(
        cluster.kubeconfig, write_config(tmp_path / "config.yaml"), tmp_path / "s.log"
    )
    try:
        sched.start()
        ns = cluster.create_namespace("spread-default")
        cluster.api("POST", f"/api/v1/namespaces/{ns}/services",
                    {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})  # fmt: skip
        for group in ("web", "loner"):
            for i in range(8):
                cluster.create_pod(
                    ns, pod_manifest(f"{group}-{i}", cpu="100m", labels={"app": group})
                )
                # one at a time, so each placement sees the previous ones
                wait_for(lambda g=group, i=i: (cluster.get_pod(ns, f"{g}-{i}") or {}).get("spec", {}).get("nodeName"),
                         timeout=20, what=f"{group}-{i} bound")  # fmt: skip
        nodes: dict[str, set[str]] = {"web": set(), "loner": set()}
        for p in cluster.list_pods(ns):
            nodes[p["metadata"]["labels"]["app"]].add(p["spec"]["nodeName"])
        # the service's pods spread over every node; the same pods with no workload do not
        assert nodes["web"] == {"big-0", "small-0", "small-1", "small-2"}
        assert len(nodes["loner"]) < 4, nodes
    finally:
        sched.stop()
        local.down()
