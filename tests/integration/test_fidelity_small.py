"""Issue 23 items 3-5 against upstream kube-scheduler v1.37.2 on one real control plane:
each scheduler runs two profiles, and identical pods (one per scheduler, each with its
own schedulerName) must get the same Events (reporting controller, reason, action, note),
the same PodScheduled condition after a 409 on bind, the same attempt counted, and the
same ImageLocality scores on nodes that list untagged image names.

Nothing here hard-codes upstream's answer: every expectation is what the upstream binary
did with its copy of the pod in the same run (names swapped). Upstream's metrics are read
from its secure port (/metrics allowed without authorization for the test).

Cluster: two kwok nodes `plain-*` (case=plain); three nodes made here with images in
their status (case=img): img-untagged lists "example.test/big" (no tag), img-tagged lists
"example.test/big:latest", img-none lists nothing.
"""

from __future__ import annotations

import re
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from kas_dev.cluster.ports import free_port
from tests.differential.processes import ScoreLog
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.logged_process import LoggedProcess
from tests.scheduler_process import SchedulerProcess, write_config
from tests.webhook import BindingWebhook

pytestmark = pytest.mark.cluster

OURS = ("ours-first", "ours-second")
UPSTREAM = ("upstream-first", "upstream-second")
NOBODY = "nobody"
FINALIZER = "tests.kube-async-scheduler.io/hold"
MB = 1024 * 1024


class Upstream(LoggedProcess):
    """kube-scheduler with two profiles, logging per-plugin scores (schedule_one.go at
    verbosity 10) and serving /metrics on a secure port without authorization."""

    def __init__(self, cluster: ClusterHandle, workdir: Path) -> None:
        cfg = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": cluster.kubeconfig, "qps": 500, "burst": 1000},
            "profiles": [{"schedulerName": n, "percentageOfNodesToScore": 100} for n in UPSTREAM],
        }
        config = workdir / "upstream.yaml"
        config.write_text(yaml.safe_dump(cfg))
        self.port = free_port()
        argv = [
            str(cluster.bin_dir / "kube-scheduler"),
            f"--config={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--authentication-kubeconfig={cluster.kubeconfig}",
            f"--authorization-kubeconfig={cluster.kubeconfig}",
            "--authorization-always-allow-paths=/metrics,/healthz,/readyz",
            "-v=2",
            "--vmodule=schedule_one=10",
        ]
        super().__init__(argv, workdir / "upstream.log", grace=30.0)
        self.scores = ScoreLog(self.log_path, ours=False)

    def metrics(self) -> str:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        url = f"https://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, context=ctx, timeout=10) as answer:
            return str(answer.read().decode())


def _sample(text: str, name: str, **labels: str) -> float:
    """One sample of a Prometheus text exposition (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    return 0.0


@dataclass
class Env:
    cluster: ClusterHandle
    ours: SchedulerProcess
    upstream: Upstream
    ours_scores: ScoreLog


def _image_node(name: str, images: list[tuple[str, int]]) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"case": "img", "kubernetes.io/hostname": name},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "images": [{"names": [n], "sizeBytes": size} for n, size in images],
        },
    }


IMAGE_NODES = {
    "img-untagged": [("example.test/big", 600 * MB)],
    "img-tagged": [("example.test/big:latest", 600 * MB)],
    "img-none": [],
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("fidelity-small")
    local = LocalCluster(d / "cluster")
    local.up([NodeGroup(2, "plain", labels={"case": "plain"})])
    cluster = ClusterHandle(local)
    if not (cluster.bin_dir / "kube-scheduler").exists():
        local.down()
        pytest.skip("upstream kube-scheduler not built (hack/install-binaries.sh)")
    for name, images in IMAGE_NODES.items():
        node = _image_node(name, [(n, s) for n, s in images])
        cluster.api("POST", "/api/v1/nodes", node)
        # kwok may initialise the node's status in between: write it again
        cluster.api("PATCH", f"/api/v1/nodes/{name}/status", {"status": node["status"]},
                    content_type="application/merge-patch+json")  # fmt: skip
    ours = SchedulerProcess(
        cluster.kubeconfig,
        write_config(
            d / "ours.yaml", [{"schedulerName": n, "percentageOfNodesToScore": 100} for n in OURS]
        ),
        d / "ours.log",
        extra_args=["-v", "4"],  # the per-plugin score lines (DEBUG)
    )
    upstream = Upstream(cluster, d)
    ours.start()
    upstream.start()
    try:
        wait_for(lambda: _up(upstream), timeout=90, what=f"upstream ready\n{upstream.tail()}")
        yield Env(cluster, ours, upstream, ScoreLog(ours.log_path, ours=True))
    finally:
        upstream.stop()
        ours.stop()
        local.down()


def _up(upstream: Upstream) -> bool:
    try:
        return "scheduler_" in upstream.metrics()
    except OSError:
        return False


def _pairs() -> list[tuple[str, tuple[str, str]]]:
    return [("ours", OURS), ("up", UPSTREAM)]


def _events(cluster: ClusterHandle, ns: str, pod: str) -> list[dict[str, Any]]:
    return [e for e in cluster.events(ns) if e["regarding"].get("name") == pod]


def _comparable(event: dict[str, Any], pod: str, profiles: tuple[str, str]) -> dict[str, Any]:
    """What must match between the schedulers: names replaced by placeholders."""

    def plain(text: str) -> str:
        # the two plain nodes tie: each scheduler picks one at random
        text = re.sub(r"\bplain-[0-9]+\b", "<plain node>", text.replace(pod, "<pod>"))
        return text.replace(profiles[0], "<first>").replace(profiles[1], "<second>")

    regarding = event["regarding"]
    return {
        "reportingController": plain(event.get("reportingController", "")),
        "reason": event["reason"],
        "action": event.get("action"),
        "type": event["type"],
        "note": plain(event.get("note", "")),
        "related": event.get("related"),
        "regarding": (regarding.get("kind"), regarding.get("apiVersion")),
        "deprecatedSource": event.get("deprecatedSource"),
    }


# ------------------------------------------------------------------ events per profile


def test_each_profile_reports_its_own_events_as_upstream(env: Env) -> None:
    """upstream: a recorder per profile, reportingController = the profile's schedulerName
    (pkg/scheduler/profile/profile.go newProfile). Pods of the SECOND profile: a bound one
    (Scheduled) and a refused one (FailedScheduling)."""
    cluster = env.cluster
    ns = cluster.create_namespace(f"events-{uuid.uuid4().hex[:6]}")
    for side, profiles in _pairs():
        cluster.create_pod(ns, pod_manifest(f"bound-{side}", scheduler_name=profiles[1],
                                            nodeSelector={"case": "plain"}))  # fmt: skip
        cluster.create_pod(ns, pod_manifest(f"refused-{side}", scheduler_name=profiles[1],
                                            nodeSelector={"case": "nowhere"}))  # fmt: skip
    got: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for side, profiles in _pairs():
        got[side] = {}
        for kind, reason in (("bound", "Scheduled"), ("refused", "FailedScheduling")):
            pod = f"{kind}-{side}"
            evs = wait_for(
                lambda pod=pod, reason=reason: [  # type: ignore[misc]
                    e for e in _events(cluster, ns, pod) if e["reason"] == reason
                ],
                timeout=60,
                what=f"{reason} event of {pod}",
            )
            got[side][kind] = [_comparable(e, pod, profiles) for e in evs]
            assert {e["reportingController"] for e in evs} == {profiles[1]}, (side, evs)
    assert got["ours"] == got["up"]
    assert got["up"]["bound"][0]["reportingController"] == "<second>"


# ------------------------------------------------------------------ 409 on bind


def _error_attempts(env: Env) -> dict[str, float]:
    """scheduler_schedule_attempts_total{result="error"} of each first profile."""
    attempts = "scheduler_schedule_attempts_total"
    return {
        "ours": env.ours.metric(attempts, result="error", profile=OURS[0]),
        "up": _sample(env.upstream.metrics(), attempts, result="error", profile=UPSTREAM[0]),
    }


def test_a_409_on_bind_is_counted_told_and_written_as_upstream(env: Env, tmp_path: Path) -> None:
    """A webhook holds each scheduler's pods/binding; meanwhile the pod is deleted (a
    finalizer keeps it terminating), so the API server answers the bind with 409 'being
    deleted'. Upstream (schedule_one.go handleBindingCycleError -> handleSchedulingFailure)
    counts result="error", sends FailedScheduling, writes PodScheduled=False, requeues the
    pod and then skips it ('skip schedule deleting pod')."""
    cluster = env.cluster
    ns = cluster.create_namespace(f"bind409-{uuid.uuid4().hex[:6]}")
    hook = BindingWebhook(cluster, ns)
    hook.start()
    hook.delay = 3.0
    names = {side: f"doomed-{side}" for side, _ in _pairs()}
    errors_before = _error_attempts(env)
    try:
        for side, profiles in _pairs():
            pod = pod_manifest(names[side], scheduler_name=profiles[0],
                               nodeSelector={"case": "plain"})  # fmt: skip
            pod["metadata"]["finalizers"] = [FINALIZER]
            cluster.create_pod(ns, pod)
        for side, _ in _pairs():
            wait_for(lambda s=side: hook.deletes[names[s]] >= 1, timeout=60,  # type: ignore[misc]
                     what=f"the bind of {names[side]} at the webhook")  # fmt: skip
            cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/{names[side]}")

        def told(side: str) -> dict[str, Any] | None:
            pod = cluster.get_pod(ns, names[side]) or {}
            # the bind's failure, then the skip when popped again (with their series
            # counts: isomorphic events of an unchanged pod would fold into one)
            notes = [(e["note"].replace(names[side], "<pod>"),
                      (e.get("series") or {}).get("count", 1))
                     for e in _events(cluster, ns, names[side])
                     if e["reason"] == "FailedScheduling"]  # fmt: skip
            conds = [c for c in pod.get("status", {}).get("conditions") or []
                     if c.get("type") == "PodScheduled"]  # fmt: skip
            if sum(count for _, count in notes) < 2 or not conds:
                return None
            cond = conds[0]
            return {
                "notes": sorted(notes),
                "condition": (cond["status"], cond.get("reason"),
                              cond.get("message", "").replace(names[side], "<pod>")),
                "nodeName": pod.get("spec", {}).get("nodeName"),
            }  # fmt: skip

        ours = wait_for(lambda: told("ours"), timeout=60, what=f"ours told\n{env.ours.tail()}")
        up = wait_for(lambda: told("up"), timeout=60, what=f"upstream told\n{env.upstream.tail()}")
        assert ours == up
        assert up["condition"][:2] == ("False", "SchedulerError")
        assert "is being deleted" in up["condition"][2]
        # two Events, not a series: the pod changed in between (deletionTimestamp, its
        # status), and the regarding reference carries its resourceVersion
        assert up["notes"] == [
            (up["condition"][2], 1),
            (f"skip schedule deleting pod: {ns}/<pod>", 1),
        ]
        errors_after = _error_attempts(env)
        counted = {s: errors_after[s] - errors_before[s] for s in errors_after}
        assert counted == {"ours": 1.0, "up": 1.0}
    finally:
        hook.stop()
        for name in names.values():
            cluster.admin.request(
                "PATCH", f"/api/v1/namespaces/{ns}/pods/{name}",
                {"metadata": {"finalizers": None}}, "application/merge-patch+json",
            )  # fmt: skip


# ------------------------------------------------------------------ image names


def test_image_locality_matches_upstream_on_untagged_node_image_names(env: Env) -> None:
    """upstream normalises the pod's image names only (imagelocality normalizedImageName);
    the node's names are keys as reported (backend/cache addNodeImageStates). The pod's
    "example.test/big" is "example.test/big:latest": only img-tagged holds it."""
    cluster = env.cluster
    ns = cluster.create_namespace(f"images-{uuid.uuid4().hex[:6]}")
    keys = {}
    for side, profiles in _pairs():
        pod = pod_manifest(f"img-{side}", scheduler_name=profiles[0],
                           nodeSelector={"case": "img"})  # fmt: skip
        pod["spec"]["containers"][0]["image"] = "example.test/big"
        cluster.create_pod(ns, pod)
        keys[side] = f"{ns}/img-{side}"

    def scores(log: ScoreLog, key: str) -> dict[str, int] | None:
        by_node = log.plugin_scores_of(key)
        if set(by_node) != set(IMAGE_NODES):
            return None
        return {node: plugins.get("ImageLocality", -1) for node, plugins in by_node.items()}

    ours = wait_for(lambda: scores(env.ours_scores, keys["ours"]), timeout=60,
                    what=f"our ImageLocality scores\n{env.ours.tail()}")  # fmt: skip
    up = wait_for(lambda: scores(env.upstream.scores, keys["up"]), timeout=60,
                  what=f"upstream's ImageLocality scores\n{env.upstream.tail()}")  # fmt: skip
    assert ours == up
    assert up["img-untagged"] == 0 and up["img-tagged"] > 0
