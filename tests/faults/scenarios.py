"""Workload pieces shared by the cases: nodes full of low-priority victims, and the
preemptors that need them gone."""

from __future__ import annotations

from typing import Any

from tests.faults.harness import Bed
from tests.kube import pod_manifest
from tests.preemption_helpers import victim_manifest

LOW, HIGH = "fault-low", "fault-high"
CLASSES = {LOW: 100, HIGH: 1000}


def fill_with_victims(
    bed: Bed, namespace: str, nodes: list[str], per_node: int, cpu: str
) -> list[str]:
    """`per_node` low-priority pods bound (spec.nodeName) to each node; returns their names."""
    manifests = [
        victim_manifest(f"victim-{n}-{i}", n, LOW, cpu) for n in nodes for i in range(per_node)
    ]
    bed.create_pods(namespace, manifests)
    return [m["metadata"]["name"] for m in manifests]


def preemptors(prefix: str, count: int, cpu: str, **spec: Any) -> list[dict[str, Any]]:
    return [
        pod_manifest(f"{prefix}-{i:03d}", cpu=cpu, priority_class=HIGH, **spec)
        for i in range(count)
    ]


def bound_names(bed: Bed, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in bed.pods(namespace) if p["spec"].get("nodeName")}
