"""Workloads for the end-to-end scheduling tests: a mixed node set and pods of mixed
constraints, as raw manifests (what a user would apply)."""

from __future__ import annotations

import concurrent.futures
import random
from typing import Any

from kas_dev.cluster.nodes import NodeGroup, Taint
from tests.kube import ClusterHandle, pod_manifest

SCHED = "kube-async-scheduler"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

MIXED_NODES = [
    NodeGroup(count=50, name_prefix="general", cpu="4", memory="16Gi"),
    NodeGroup(count=25, name_prefix="big", cpu="16", memory="64Gi", labels={"node-type": "big"}),
    NodeGroup(
        count=15, name_prefix="gpu", cpu="8", memory="32Gi", extended={"example.com/gpu": "4"},
        labels={"node-type": "gpu"}, taints=(Taint("dedicated", "NoSchedule", "gpu"),),
    ),
    NodeGroup(
        count=10, name_prefix="edge", cpu="2", memory="4Gi", labels={"node-type": "edge"},
        taints=(Taint("edge", "PreferNoSchedule", "true"),), zones=("zone-a", "zone-b"),
    ),
]  # fmt: skip


def _anti(label: str, value: str, topology: str = HOST, **term: Any) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {label: value}}, "topologyKey": topology, **term}
            ]
        }
    }


def mixed_pods(rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """(namespace, manifest) pairs: about 1100 pods of this scheduler, in two namespaces."""
    out: list[tuple[str, dict[str, Any]]] = []

    def add(ns: str, name: str, **kw: Any) -> None:
        out.append((ns, pod_manifest(name, **kw)))

    for i in range(600):
        add("mixed-a", f"plain-{i}", cpu=f"{rng.choice([50, 100, 200, 300, 500])}m",
            memory=f"{rng.choice([32, 64, 128, 256, 512])}Mi")  # fmt: skip
    for i in range(100):
        add("mixed-a", f"big-{i}", cpu="1", memory="2Gi", nodeSelector={"node-type": "big"})
    for i in range(50):
        pod = pod_manifest(
            f"gpu-{i}", cpu="500m",
            tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "node-type", "operator": "In", "values": ["gpu"]}]}]}}},
        )  # fmt: skip
        pod["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
        pod["spec"]["containers"][0]["resources"]["limits"] = {"example.com/gpu": "1"}
        out.append(("mixed-a", pod))
    for g in range(4):
        for i in range(25):
            add("mixed-a", f"spread-{g}-{i}", cpu="100m", labels={"app": f"spread-{g}"},
                topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": ZONE,
                                            "whenUnsatisfiable": "DoNotSchedule",
                                            "labelSelector": {"matchLabels": {"app": f"spread-{g}"}}}])  # fmt: skip
    for g in range(3):
        for i in range(20):
            add("mixed-a", f"anti-{g}-{i}", cpu="100m", labels={"app": f"anti-{g}"},
                affinity=_anti("app", f"anti-{g}"))  # fmt: skip
    # pod affinity: web pods must share a zone with a cache pod
    for i in range(6):
        add("mixed-b", f"cache-{i}", cpu="200m", labels={"app": "cache"},
            nodeSelector={ZONE: "zone-a"})  # fmt: skip
    for i in range(40):
        add("mixed-b", f"web-{i}", cpu="100m", labels={"app": "web"},
            affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": ZONE}]}})  # fmt: skip
    # anti-affinity across namespaces chosen by a namespace selector
    for i in range(20):
        add("mixed-b", f"nsanti-{i}", cpu="100m", labels={"app": "nsanti"},
            affinity=_anti("app", "nsanti", namespaceSelector={"matchLabels": {"team": "mixed"}}))  # fmt: skip
    for i in range(40):
        pod = pod_manifest(f"port-{i}", cpu="100m")
        pod["spec"]["containers"][0]["ports"] = [
            {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}
        ]
        out.append(("mixed-b", pod))
    for i in range(30):
        add("mixed-b", f"pref-{i}", cpu="100m", labels={"app": "pref"},
            affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "pref"}},
                                                   "topologyKey": HOST}}]},
                      "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                          {"weight": 10, "preference": {"matchExpressions": [
                              {"key": "node-type", "operator": "In", "values": ["big"]}]}}]}})  # fmt: skip
    for i in range(20):
        pod = pod_manifest(f"init-{i}", cpu="100m")
        pod["spec"]["initContainers"] = [
            {"name": "setup", "image": "x", "resources": {"requests": {"cpu": "1500m"}}},
            {"name": "sidecar", "image": "x", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "200m"}}},
        ]  # fmt: skip
        out.append(("mixed-b", pod))
    rng.shuffle(out)
    return out


def others_pods(nodes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Pods of another scheduler: some bound directly to nodes (their requests count),
    some pending (we must never touch them)."""
    out = []
    for i, node in enumerate(nodes[:60]):
        out.append(
            (
                "others",
                pod_manifest(
                    f"bound-{i}", scheduler_name="other-scheduler", cpu="1", nodeName=node
                ),
            )
        )
    for i in range(20):
        out.append(
            ("others", pod_manifest(f"pending-{i}", scheduler_name="other-scheduler", cpu="100m"))
        )
    return out


def create_all(
    cluster: ClusterHandle, pods: list[tuple[str, dict[str, Any]]], workers: int = 8
) -> None:
    def create(item: tuple[str, dict[str, Any]]) -> None:
        cluster.create_pod(*item)

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for f in [pool.submit(create, it) for it in pods]:
            f.result()
