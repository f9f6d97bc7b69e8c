"""Upstream kube-scheduler v1.37.2 and this scheduler side by side on one real control
plane: identical pods (one per scheduler, each with its own schedulerName) must get the
same PodScheduled=False message word for word, be placed where upstream places them, and
get the same final per-node scores.

Nothing here hard-codes upstream's text: every expectation is what the upstream binary
writes for its copy of the pod in the same run. The few literal fragments asserted on top
(e.g. "untolerated taint(s)") were seen in upstream's output first; they only make sure a
case exercises what it is named after.

Cluster (all kwok):
- plain-0 (zone-a) and plain-1 (zone-b): 2 cpu, 100m used on each (priority 0); plain-0's
  pod holds hostPort 8080;
- tainted-0 (zone-a): taint dedicated=x:NoSchedule;
- cordoned-0 (zone-b): spec.unschedulable;
- pre-0 / pre-1 (tainted pre:NoSchedule): one preemption each, upstream's on pre-0, ours
  on pre-1;
- for the score comparison, two identical "worlds" of two nodes each (world=up / world=ours,
  zones up-a/up-b and ours-a/ours-b, tainted world=<w>:NoSchedule) with identical
  existing pods: each scheduler's probe selects and tolerates its own world, so neither's
  binding changes what the other scores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup, Taint
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.logged_process import LoggedProcess
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = pytest.mark.cluster

OURS = "kube-async-scheduler"
UPSTREAM = "upstream-scheduler"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


class UpstreamScheduler(LoggedProcess):
    """The real kube-scheduler with one profile named UPSTREAM, logging final scores."""

    def __init__(self, binary: Path, kubeconfig: str, workdir: Path) -> None:
        self.log_path = workdir / "upstream.log"
        cfg = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": kubeconfig, "qps": 500, "burst": 1000},
            "profiles": [{"schedulerName": UPSTREAM}],
        }
        config = workdir / "upstream.yaml"
        config.write_text(yaml.safe_dump(cfg))
        # -v=10: schedule_one.go logs "Calculated node's final score for pod" there
        argv = [str(binary), f"--config={config}", "--secure-port=0", "-v=10"]
        super().__init__(argv, self.log_path, grace=30.0)


@dataclass
class Env:
    cluster: ClusterHandle
    ours: SchedulerProcess
    upstream: UpstreamScheduler


def _groups() -> list[NodeGroup]:
    return [
        NodeGroup(count=2, name_prefix="plain", cpu="2", memory="4Gi", zones=("zone-a", "zone-b")),
        NodeGroup(count=1, name_prefix="tainted", cpu="2", memory="4Gi", zones=("zone-a",),
                  taints=(Taint("dedicated", "NoSchedule", "x"),)),
        NodeGroup(count=1, name_prefix="cordoned", cpu="2", memory="4Gi", zones=("zone-b",)),
        NodeGroup(count=2, name_prefix="pre", cpu="2", memory="4Gi", zones=("zone-c",),
                  taints=(Taint("pre", "NoSchedule"),)),
        NodeGroup(count=2, name_prefix="up", cpu="4", memory="8Gi", zones=("up-a", "up-b"),
                  labels={"world": "up"}, taints=(Taint("world", "NoSchedule", "up"),)),
        NodeGroup(count=2, name_prefix="ours", cpu="4", memory="8Gi", zones=("ours-a", "ours-b"),
                  labels={"world": "ours"}, taints=(Taint("world", "NoSchedule", "ours"),)),
    ]  # fmt: skip


ALL_NODES = 10


def _bound_pod(name: str, node: str, cpu: str, memory: str, **extra: Any) -> dict[str, Any]:
    body = pod_manifest(name, scheduler_name="nobody", cpu=cpu, memory=memory, nodeName=node)
    body["metadata"]["labels"] = extra.pop("labels", {})
    body["spec"].update(extra)
    return body


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("fidelity")
    local = LocalCluster(d / "cluster")
    local.up(_groups())
    cluster = ClusterHandle(local)
    binary = cluster.bin_dir / "kube-scheduler"
    if not binary.exists():
        local.down()
        pytest.fail(f"upstream kube-scheduler not found at {binary}", pytrace=False)
    cluster.api("PATCH", "/api/v1/nodes/cordoned-0", {"spec": {"unschedulable": True}},
                "application/merge-patch+json")  # fmt: skip
    cluster.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": "never"}, "value": 1000, "preemptionPolicy": "Never"})  # fmt: skip
    cluster.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": "high"}, "value": 1000})  # fmt: skip
    cluster.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": "low"}, "value": 10})  # fmt: skip
    cluster.create_namespace("fixture")
    port = {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}
    holder = _bound_pod("port-holder", "plain-0", "100m", "64Mi")
    holder["spec"]["containers"][0]["ports"] = [port]
    cluster.create_pod("fixture", holder)
    # plain-1 as full as plain-0, so a 1950m pod fits neither (within allocatable)
    cluster.create_pod("fixture", _bound_pod("filler", "plain-1", "100m", "64Mi"))
    # the two score worlds, mirrored: same pods on up-i and ours-i
    for world in ("up", "ours"):
        for i, (cpu, mem, app) in enumerate([("1", "512Mi", "w"), ("300m", "3Gi", "w")]):
            cluster.create_pod("fixture", _bound_pod(f"{world}-load-{i}", f"{world}-{i}", cpu, mem,
                                                     labels={"app": app}))  # fmt: skip
        cluster.create_pod("fixture", _bound_pod(f"{world}-extra", f"{world}-0", "200m", "1Gi",
                                                 labels={"app": "w"}))  # fmt: skip
    # our scheduler: victims of any scheduler, as upstream; DEBUG for the score lines
    profile = {
        "schedulerName": OURS,
        "pluginConfig": [{"name": "DefaultPreemption", "args": {"victimScope": "All"}}],
    }
    cfg = write_config(d / "ours.yaml", [profile])
    ours = SchedulerProcess(cluster.kubeconfig, cfg, d / "ours.log", extra_args=["-v", "4"])
    upstream = UpstreamScheduler(binary, cluster.kubeconfig, d)
    try:
        ours.start()
        upstream.start()
        yield Env(cluster, ours, upstream)
    finally:
        upstream.stop()
        ours.stop()
        local.down()


def _pod(name: str, scheduler: str, cpu: str = "100m", memory: str = "64Mi",
         **spec: Any) -> dict[str, Any]:  # fmt: skip
    labels = spec.pop("labels", None)
    body = pod_manifest(name, scheduler_name=scheduler, cpu=cpu, memory=memory, **spec)
    if labels:
        body["metadata"]["labels"] = labels
    return body


def _unschedulable_message(cluster: ClusterHandle, ns: str, name: str) -> str | None:
    pod = cluster.get_pod(ns, name) or {}
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or "") or None
    return None


def _node_of(cluster: ClusterHandle, ns: str, name: str) -> str:
    return str(((cluster.get_pod(ns, name) or {}).get("spec") or {}).get("nodeName") or "")


def _side_by_side(
    env: Env, ns: str, build: Callable[[str, str], dict[str, Any]]
) -> tuple[str, str]:
    """Create the pod once per scheduler; return (upstream's message, ours)."""
    env.cluster.create_namespace(ns)
    env.cluster.create_pod(ns, build("up", UPSTREAM))
    env.cluster.create_pod(ns, build("ours", OURS))
    up = wait_for(lambda: _unschedulable_message(env.cluster, ns, "up"), timeout=60,
                  what=f"upstream's PodScheduled=False in {ns}")  # fmt: skip
    ours = wait_for(lambda: _unschedulable_message(env.cluster, ns, "ours"), timeout=60,
                    what=f"our PodScheduled=False in {ns}\n{env.ours.tail()}")  # fmt: skip
    return up, ours


_NAME_IN = {"key": "metadata.name", "operator": "In"}

# (case, pod builder, a fragment upstream's message was seen to contain)
FAILURES: list[tuple[str, Callable[[str, str], dict[str, Any]], str]] = [
    # fits no node's free cpu: taints, cordon, resources; preemption finds no victim
    # (the pods on plain-0/1 have the same priority 0)
    ("full", lambda n, s: _pod(n, s, cpu="1950m"), "untolerated taint(s)"),
    # preemptionPolicy Never: upstream's own "." ends the message (no doubled period)
    ("never", lambda n, s: _pod(n, s, cpu="1950m", priority_class="never"),
     "preemption: not eligible due to preemptionPolicy=Never."),
    # plain-0 fails NodePorts and NodeResourcesFit: the first in profile order counts
    ("ports", lambda n, s: _pod(n, s, containers=[{
        "name": "c", "image": "registry.local/pause:3.10",
        "resources": {"requests": {"cpu": "1950m"}},
        "ports": [{"containerPort": 8080, "hostPort": 8080}]}]),
     "didn't have free ports"),
    # no node matches: nothing for preemption to try
    ("selector", lambda n, s: _pod(n, s, nodeSelector={"missing": "label"}),
     "Preemption is not helpful for scheduling"),
    # one term whose matchFields intersect to nothing
    ("conflict", lambda n, s: _pod(n, s, affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{**_NAME_IN, "values": ["plain-0"]},
                             {**_NAME_IN, "values": ["plain-1"]}]}]}}}),
     "pod affinity terms conflict"),
    # matchFields narrowing to one node that then fails Filter
    ("pinned", lambda n, s: _pod(n, s, cpu="1950m", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{**_NAME_IN, "values": ["plain-1"]}]}]}}}),
     "didn't satisfy plugin(s) [NodeAffinity]"),
    # required pod affinity nobody satisfies
    ("affinity", lambda n, s: _pod(n, s, affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "nobody"}}, "topologyKey": ZONE}]}}),
     "didn't match pod affinity rules"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "build", "seen"), FAILURES, ids=[c[0] for c in FAILURES])
def test_failure_message_is_upstreams(
    env: Env, case: str, build: Callable[[str, str], dict[str, Any]], seen: str
) -> None:
    up, ours = _side_by_side(env, f"msg-{case}", build)
    assert seen in up, up
    assert ours == up, f"\n upstream: {up}\n ours:     {ours}"


@pytest.mark.parametrize("selector", ["empty", "absent"])
def test_spread_with_an_empty_or_absent_selector_counts_no_pod(env: Env, selector: str) -> None:
    """Three pods of the namespace sit in zone-a; the pod must go to plain-0 (zone-a).
    Counting them (the old rule) made zone-a skewed and the pod unschedulable; upstream
    counts none (and an absent selector does not even match the pod itself)."""
    ns = env.cluster.create_namespace(f"spread-{selector}")
    for i in range(3):
        env.cluster.create_pod(ns, _bound_pod(f"w{i}", "plain-0", "10m", "16Mi",
                                              labels={"app": "w"}))  # fmt: skip
    constraint: dict[str, Any] = {"maxSkew": 1, "topologyKey": ZONE,
                                  "whenUnsatisfiable": "DoNotSchedule",
                                  "nodeAffinityPolicy": "Ignore"}  # fmt: skip
    if selector == "empty":
        constraint["labelSelector"] = {}
    pin = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOST, "operator": "In", "values": ["plain-0"]}]}]}}}  # fmt: skip
    for name, sched in (("up", UPSTREAM), ("ours", OURS)):
        env.cluster.create_pod(ns, _pod(name, sched, cpu="10m", labels={"app": "w"},
                                        topologySpreadConstraints=[constraint], affinity=pin))  # fmt: skip
    wait_for(lambda: _node_of(env.cluster, ns, "up") == "plain-0", timeout=60,
             what="upstream binds to plain-0")  # fmt: skip
    wait_for(lambda: _node_of(env.cluster, ns, "ours") == "plain-0", timeout=60,
             what=f"ours binds to plain-0\n{env.ours.tail()}")  # fmt: skip


_UP_SCORE = re.compile(
    r"\"Calculated node's final score for pod\" pod=\"(?P<pod>[^\"]+)\" "
    r"node=\"(?P<node>[^\"]+)\" score=(?P<score>\d+)"
)
_OURS_SCORE = re.compile(r"final score pod=(?P<pod>\S+) node=(?P<node>\S+) score=(?P<score>\d+)")


def _scores(pattern: re.Pattern[str], log: str, pod: str) -> dict[str, int]:
    return {m["node"]: int(m["score"]) for m in pattern.finditer(log) if m["pod"] == pod}


# probes scored in both worlds (they all fit both nodes of their world)
PROBES: list[tuple[str, dict[str, Any]]] = [
    ("plain", {"cpu": "500m", "memory": "1Gi"}),
    ("memory-heavy", {"cpu": "100m", "memory": "3Gi"}),
    ("best-effort", {"cpu": "0", "memory": "0"}),
    ("spread", {"cpu": "200m", "labels": {"app": "w"}, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "w"}}}]}),
    ("spread-empty", {"cpu": "200m", "labels": {"app": "w"}, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {}}]}),
    ("preferred", {"cpu": "200m", "affinity": {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 40, "preference": {"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": ["up-b", "ours-b"]}]}}]},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 70, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "w"}},
                                               "topologyKey": HOST,
                                               "namespaces": ["fixture"]}}]}}}),
]  # fmt: skip


@pytest.mark.parametrize(("probe", "spec"), PROBES, ids=[p[0] for p in PROBES])
def test_final_scores_are_upstreams(env: Env, probe: str, spec: dict[str, Any]) -> None:
    ns = env.cluster.create_namespace(f"score-{probe}")
    for world, sched in (("up", UPSTREAM), ("ours", OURS)):
        s = dict(spec)
        cpu, memory = s.pop("cpu", "100m"), s.pop("memory", "64Mi")
        tolerate = [{"key": "world", "operator": "Equal", "value": world, "effect": "NoSchedule"}]
        body = _pod(world, sched, cpu=cpu, memory=memory, nodeSelector={"world": world},
                    tolerations=tolerate, **s)  # fmt: skip
        if cpu == "0":
            body["spec"]["containers"][0]["resources"] = {}
        env.cluster.create_pod(ns, body)
    for world in ("up", "ours"):
        wait_for(lambda w=world: _node_of(env.cluster, ns, w), timeout=60,
                 what=f"{world} bound\n{env.ours.tail()}")  # fmt: skip
    up = wait_for(lambda: _scores(_UP_SCORE, env.upstream.log(), f"{ns}/up"), timeout=30,
                  what="upstream's final score lines")  # fmt: skip
    ours = _scores(_OURS_SCORE, env.ours.log_path.read_text(errors="replace"), f"{ns}/ours")
    mirrored = {n.replace("ours-", "up-"): v for n, v in ours.items()}
    assert mirrored == up, f"\n upstream: {up}\n ours:     {ours}"
    up_node = _node_of(env.cluster, ns, "up")
    ours_node = _node_of(env.cluster, ns, "ours").replace("ours-", "up-")
    if sorted(up.values()).count(max(up.values())) == 1:  # upstream's choice is unique
        assert ours_node == up_node
    # leave the worlds as they were for the next probe
    for world in ("up", "ours"):
        env.cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/{world}",
                        {"gracePeriodSeconds": 0})  # fmt: skip
    for world in ("up", "ours"):
        wait_for(lambda w=world: env.cluster.get_pod(ns, w) is None, timeout=30,
                 what=f"{world} probe deleted")  # fmt: skip


def _failed_scheduling_notes(cluster: ClusterHandle, ns: str, pod: str) -> list[str]:
    return [
        str(e.get("note") or "")
        for e in cluster.events(ns)
        if e.get("reason") == "FailedScheduling" and (e.get("regarding") or {}).get("name") == pod
    ]


def test_successful_preemption_message_is_upstreams(env: Env) -> None:
    """A preemption that succeeds: the FailedScheduling text ends in Preempt's success
    message (seen in the events, as the condition turns True once the pod binds)."""
    ns = env.cluster.create_namespace("preempt")
    tolerate = [{"key": "pre", "operator": "Exists", "effect": "NoSchedule"}]
    for world, node, sched in (("up", "pre-0", UPSTREAM), ("ours", "pre-1", OURS)):
        victim = _bound_pod(f"victim-{world}", node, "1500m", "64Mi", priorityClassName="low",
                            tolerations=tolerate)  # fmt: skip
        env.cluster.create_pod(ns, victim)
        env.cluster.create_pod(ns, _pod(world, sched, cpu="1", priority_class="high",
                                        nodeSelector={HOST: node}, tolerations=tolerate))  # fmt: skip
    for world, node in (("up", "pre-0"), ("ours", "pre-1")):
        wait_for(lambda w=world, n=node: _node_of(env.cluster, ns, w) == n, timeout=90,
                 what=f"{world} preempted and bound\n{env.ours.tail()}")  # fmt: skip
    up = wait_for(lambda: _failed_scheduling_notes(env.cluster, ns, "up"), timeout=30,
                  what="upstream's FailedScheduling event")  # fmt: skip
    ours = wait_for(lambda: _failed_scheduling_notes(env.cluster, ns, "ours"), timeout=30,
                    what="our FailedScheduling event")  # fmt: skip
    assert "preemption: found a potential placement for pod on node pre-0" in up[0], up
    assert [m.replace("pre-1", "pre-0") for m in ours[:1]] == up[:1]
