"""Opportunistic batching against upstream kube-scheduler v1.37.2 on a real cluster.

The differential oracle cannot show batching: it refuses every bind and creates each
pod only after the previous one was decided, so no two identical pods are ever
scheduled in consecutive cycles within 500 ms (and its profile uses System defaulting,
under which upstream signs no pod). So this test runs the two schedulers one after the
other on the same nodes, each draining the same backlog with binds allowed, and
compares the final placement and whether each batched:

- a profile with PodTopologySpread List defaulting and no default constraints: pods
  are signed, upstream logs hints ("OpportunisticBatch provided node hint"), ours
  counts them (scheduler_batch_attempts_total{result="hint_used"});
- upstream's default profile (System defaulting): no pod is signed, so neither hints.

150 identical nodes, so the search samples 100 of them per full cycle
(percentageOfNodesToScore, adaptive). The batched profile's 100 identical pods exist
before the scheduler starts (a backlog drained in consecutive cycles); few enough that
each lands on a node of its own whether a hint, an expired batch or a full search
placed it (maxBatchAge is wall-clock time, so the split between hinted and searched
pods depends on each scheduler's speed and is not compared). Then 30 pods of the
default profile. The two profiles are not mixed in one backlog: pods of another
profile in between end every batch, and where they land depends on the queue's order
of two profiles' pods added in one LIST.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kas_dev.cluster.nodes import NodeGroup
from tests.checker import check
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.logged_process import LoggedProcess
from tests.scheduler_process import SchedulerProcess

pytestmark = pytest.mark.cluster

NS = "batch"
NODES = 150
PODS = 100
DEFAULT_PODS = 30
BATCHED = "batched"  # profile: PodTopologySpread List defaulting, no default constraints
DEFAULT = "default"  # profile: upstream's defaults (System defaulting)
LIST_DEFAULTING = [
    {
        "name": "PodTopologySpread",
        "args": {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "PodTopologySpreadArgs",
            "defaultingType": "List",
        },
    }
]
# upstream batch.go, at verbosity 3: "OpportunisticBatch provided node hint" pod=... profile=...
_UPSTREAM_HINT = re.compile(r'"OpportunisticBatch provided node hint" .*?\bprofile="([^"]+)"')


def _config(path: Path, kubeconfig: str, prefix: str) -> Path:
    cfg = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": kubeconfig, "qps": 500, "burst": 1000},
        "profiles": [
            {"schedulerName": f"{prefix}-{BATCHED}", "pluginConfig": LIST_DEFAULTING},
            {"schedulerName": f"{prefix}-{DEFAULT}"},
        ],
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _create_pods(cluster: ClusterHandle, prefix: str, profile: str, count: int) -> None:
    """`count` identical replicas (one owner's labels and spec) for `profile`."""
    for i in range(count):
        pod = pod_manifest(
            f"{prefix}-{profile}-{i}",
            scheduler_name=f"{prefix}-{profile}",
            cpu="500m",
            memory="256Mi",
            labels={"app": f"web-{profile}"},
        )
        cluster.create_pod(NS, pod)


def _wait_bound(cluster: ClusterHandle, prefix: str, count: int) -> list[dict[str, Any]]:
    def bound() -> list[dict[str, Any]] | None:
        pods = [p for p in cluster.list_pods(NS) if p["metadata"]["name"].startswith(prefix)]
        return pods if sum(1 for p in pods if p["spec"].get("nodeName")) == count else None

    pods: list[dict[str, Any]] = wait_for(
        bound, timeout=180, interval=1.0, what=f"{prefix}: {count} pods bound"
    )
    return pods


def _run(cluster: ClusterHandle, prefix: str, start: Callable[[], None]) -> dict[str, Counter[str]]:
    """The batched profile's backlog drained by a scheduler started on it, then the
    default profile's pods; per profile, node -> pods bound there."""
    _create_pods(cluster, prefix, BATCHED, PODS)
    start()
    _wait_bound(cluster, prefix, PODS)
    _create_pods(cluster, prefix, DEFAULT, DEFAULT_PODS)
    pods = _wait_bound(cluster, prefix, PODS + DEFAULT_PODS)
    out: dict[str, Counter[str]] = {BATCHED: Counter(), DEFAULT: Counter()}
    for p in pods:
        profile = p["spec"]["schedulerName"].removeprefix(f"{prefix}-")
        out[profile][p["spec"]["nodeName"]] += 1
    nodes = cluster.api("GET", "/api/v1/nodes")["items"]
    for profile, count in ((BATCHED, PODS), (DEFAULT, DEFAULT_PODS)):
        report = check(pods, nodes, {NS: {}}, f"{prefix}-{profile}")
        assert not report.violations, report.violations
        assert report.bound == count, report
    return out


def _delete_all(cluster: ClusterHandle) -> None:
    cluster.api("DELETE", f"/api/v1/namespaces/{NS}/pods?gracePeriodSeconds=0")
    wait_for(lambda: not cluster.list_pods(NS), timeout=120, interval=1.0, what="pods gone")


def _shape(counts: Counter[str]) -> list[int]:
    """Pods per node over every node, sorted: the placement up to node identity (the
    nodes are identical, and ties are broken differently by the two schedulers)."""
    return sorted([*counts.values(), *[0] * (NODES - len(counts))], reverse=True)


def _metric(text: str, name: str, labels: str) -> float:
    m = re.search(rf"^{name}\{{{labels}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def test_batched_identical_pods_place_as_upstream_and_both_batch(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster([NodeGroup(NODES, "b", cpu="4", memory="16Gi")])
    if not (cluster.bin_dir / "kube-scheduler").exists():
        pytest.skip("the upstream kube-scheduler binary is not built")
    cluster.create_namespace(NS)

    # upstream first: -v=3 logs every hint it hands out
    log = tmp_path / "upstream.log"
    upstream = LoggedProcess(
        [
            str(cluster.bin_dir / "kube-scheduler"),
            f"--config={_config(tmp_path / 'upstream.yaml', cluster.kubeconfig, 'up')}",
            "--secure-port=0",
            "-v=3",
        ],
        log,
    )
    try:
        theirs = _run(cluster, "up", upstream.start)
    finally:
        upstream.stop()
    hints = Counter(m.group(1) for m in _UPSTREAM_HINT.finditer(log.read_text()))
    _delete_all(cluster)

    ours_proc = SchedulerProcess(
        cluster.kubeconfig,
        _config(tmp_path / "ours.yaml", cluster.kubeconfig, "ours"),
        tmp_path / "ours.log",
    )

    def start_ours() -> None:
        ours_proc.start()

    try:
        ours = _run(cluster, "ours", start_ours)
        status, metrics = ours_proc.get("/metrics")
        assert status == 200
    finally:
        ours_proc.stop()

    # upstream batches the List-defaulted profile and never its default profile
    assert hints[f"up-{BATCHED}"] > 0, hints
    assert hints[f"up-{DEFAULT}"] == 0, hints
    used = 'profile="{}",result="hint_used"'
    assert _metric(metrics, "scheduler_batch_attempts_total", used.format(f"ours-{BATCHED}")) > 0
    assert _metric(metrics, "scheduler_batch_attempts_total", used.format(f"ours-{DEFAULT}")) == 0
    flushed = 'profile="{}",reason="pod_not_batchable"'
    assert (
        _metric(metrics, "scheduler_batch_cache_flushed_total", flushed.format(f"ours-{DEFAULT}"))
        == DEFAULT_PODS
    )
    # the same placement of each profile's pods, node for node up to the nodes' names.
    # (Not of all pods together: where the default profile's pods meet the batched
    # ones depends on where the node search rotation stands after the drain, which
    # advances only on searched cycles, and so on how many batches expired in it.)
    for profile in (BATCHED, DEFAULT):
        assert _shape(ours[profile]) == _shape(theirs[profile]), profile
    print(
        f"hints: upstream {hints[f'up-{BATCHED}']}, ours "
        f"{_metric(metrics, 'scheduler_batch_attempts_total', used.format(f'ours-{BATCHED}'))}"
    )
