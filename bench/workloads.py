"""Workloads modelled on upstream's scheduler_perf (test/integration/scheduler_perf), and
the suites that size them.

A workload is pure data plus functions that turn it into Node and Pod objects (plain
dicts, as the API server takes them). Nothing here talks to a cluster, so every object
can be checked in unit tests.

Pod roles (label `bench.kas/role`):
- `init`: created before the scheduler starts, bound directly through spec.nodeName;
- `measured`: the pods whose throughput and latency are reported;
- `churn`: created at a fixed rate while the measured pods are created (preemptors in
  PreemptionAsync, pods that fit nowhere in Unschedulable);
- `warmup`: one tiny pod per run, bound before measuring starts, proving the scheduler
  under test has synced its caches.

Sizes follow upstream's pod templates: 100m/500Mi ordinary pods, 900m/500Mi
low-priority pods (priority 0, as upstream), preemptors 3000m at priority 10000, nodes of
4 CPU / 32Gi / 110 pods.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kas_dev.cluster.nodes import NodeGroup, Taint

SCHEDULER_NAME = "bench-scheduler"
NAMESPACE = "bench"
ROLE_LABEL = "bench.kas/role"
KIND_LABEL = "bench.kas/kind"
HIGH_PRIORITY_CLASS = "bench-high"
HIGH_PRIORITY = 10000
UNSCHEDULABLE_PRIORITY_CLASS = "bench-unschedulable"
UNSCHEDULABLE_PRIORITY = 10
IMAGE = "registry.k8s.io/pause:3.10"
DEDICATED_TAINT = Taint(key="dedicated", value="bench", effect="NoSchedule")
ZONES = ("zone-a", "zone-b", "zone-c")

KINDS = ("basic", "mixed", "preemption-basic", "preemption-async", "unschedulable")
MIXED_SHAPES = ("plain", "node-affinity", "anti-affinity", "topology-spread", "toleration")


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    kind: str
    nodes: int
    init_pods: int
    measured_pods: int
    churn_per_second: float = 0.0
    """Churn pods (preemptors / unschedulable pods) per second while measuring."""
    churn_max: int = 0
    """Upper bound on churn pods of one run (keeps load loops bounded)."""
    timeout_s: float = 120.0
    """Deadline for every measured pod to be bound, from the first create."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"workload {self.name}: unknown kind {self.kind!r}")
        if self.nodes < 1 or self.init_pods < 0 or self.measured_pods < 1:
            raise ValueError(f"workload {self.name}: nodes and measured pods must be >= 1")
        if self.preempts and self.init_pods > 4 * self.nodes:
            raise ValueError(f"workload {self.name}: at most 4 low-priority pods per node")

    @property
    def churn_role(self) -> str | None:
        return {"preemption-async": "preemptor", "unschedulable": "unschedulable"}.get(self.kind)

    @property
    def preempts(self) -> bool:
        return self.kind in ("preemption-basic", "preemption-async")

    def scaled(self, nodes: int | None = None, pods: int | None = None) -> Workload:
        """The same workload with another node count and/or measured-pod count; the init
        pods keep their ratio to the nodes (4 per node for the preemption workloads)."""
        if nodes is None and pods is None:
            return self
        n = nodes or self.nodes
        init = round(self.init_pods * n / self.nodes)
        measured = pods or (
            round(self.measured_pods * n / self.nodes) if nodes else self.measured_pods
        )
        churn_max = min(self.churn_max, n) if self.kind == "preemption-async" else self.churn_max
        return dataclasses.replace(
            self, nodes=n, init_pods=init, measured_pods=measured, churn_max=churn_max
        )


# ----- nodes ------------------------------------------------------------------------------
def node_groups(w: Workload) -> list[NodeGroup]:
    base = {"cpu": "4", "memory": "32Gi", "pods": 110, "zones": ZONES}
    if w.kind == "mixed":
        tainted = max(1, w.nodes // 10)
        return [
            NodeGroup(count=w.nodes - tainted, name_prefix="node", **base),
            NodeGroup(
                count=tainted,
                name_prefix="dedicated",
                labels={"node-type": "dedicated"},
                taints=(DEDICATED_TAINT,),
                **base,
            ),
        ]
    return [NodeGroup(count=w.nodes, name_prefix="node", **base)]


def schedulable_node_names(w: Workload) -> list[str]:
    """Nodes plain pods may use (the untainted ones), in a stable order."""
    return [f"node-{i}" for i in range(node_groups(w)[0].count)]


def all_node_names(w: Workload) -> list[str]:
    return [f"{g.name_prefix}-{i}" for g in node_groups(w) for i in range(g.count)]


# ----- pods -------------------------------------------------------------------------------
def pod(
    name: str,
    role: str,
    *,
    cpu: str = "100m",
    memory: str = "500Mi",
    node_name: str | None = None,
    priority_class: str | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {ROLE_LABEL: role, **(labels or {})},
        },
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pause",
                    "image": IMAGE,
                    "resources": {
                        "requests": {"cpu": cpu, "memory": memory},
                        "limits": {"cpu": cpu, "memory": memory},
                    },
                }
            ],
            **spec,
        },
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    if priority_class:
        body["spec"]["priorityClassName"] = priority_class
    return body


def init_pods(w: Workload) -> Iterator[dict[str, Any]]:
    """The pods present before the scheduler starts, bound directly (spec.nodeName).
    They carry the benchmark's schedulerName so that a scheduler limiting its victims to
    its own pods may still preempt them."""
    nodes = schedulable_node_names(w)
    for i in range(w.init_pods):
        node = nodes[i % len(nodes)]
        if w.preempts:
            yield pod(f"low-{i}", "init", cpu="900m", node_name=node)
        else:
            yield pod(f"init-{i}", "init", node_name=node)


def measured_pods(w: Workload) -> Iterator[dict[str, Any]]:
    if w.kind == "preemption-basic":
        for i in range(w.measured_pods):
            yield pod(f"preemptor-{i}", "measured", cpu="3000m", priority_class=HIGH_PRIORITY_CLASS)
        return
    if w.kind == "mixed":
        for i in range(w.measured_pods):
            yield mixed_pod(w, i)
        return
    for i in range(w.measured_pods):
        yield pod(f"pod-{i}", "measured")


def mixed_pod(w: Workload, i: int) -> dict[str, Any]:
    """Measured pod i of the mixed-constraints workload; the shapes take turns."""
    shape = MIXED_SHAPES[i % len(MIXED_SHAPES)]
    name = f"{shape}-{i}"
    labels = {KIND_LABEL: shape}
    if shape == "plain":
        return pod(name, "measured", labels=labels)
    if shape == "node-affinity":
        term = {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES[:2])}
            ]
        }
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
        return pod(name, "measured", labels=labels, affinity=affinity)
    if shape == "anti-affinity":
        # groups of at most a quarter of the untainted nodes: always satisfiable
        group_size = max(1, len(schedulable_node_names(w)) // 4)
        group = f"g{(i // len(MIXED_SHAPES)) // group_size}"
        labels["bench.kas/anti"] = group
        affinity = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"bench.kas/anti": group}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
        return pod(name, "measured", labels=labels, affinity=affinity)
    if shape == "topology-spread":
        spread = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {KIND_LABEL: shape}},
            }
        ]
        return pod(name, "measured", labels=labels, topologySpreadConstraints=spread)
    tolerations = [
        {
            "key": DEDICATED_TAINT.key,
            "operator": "Equal",
            "value": DEDICATED_TAINT.value,
            "effect": DEDICATED_TAINT.effect,
        }
    ]
    return pod(name, "measured", labels=labels, tolerations=tolerations)


def churn_pod(w: Workload, i: int) -> dict[str, Any]:
    if w.kind == "preemption-async":
        return pod(f"preemptor-{i}", "churn", cpu="3000m", priority_class=HIGH_PRIORITY_CLASS)
    if w.kind == "unschedulable":
        return pod(f"huge-{i}", "churn", cpu="9", priority_class=UNSCHEDULABLE_PRIORITY_CLASS)
    raise ValueError(f"workload {w.name} has no churn")


def warmup_pod() -> dict[str, Any]:
    return pod("warmup", "warmup", cpu="10m", memory="10Mi")


def priority_classes() -> list[dict[str, Any]]:
    def pc(name: str, value: int) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
        }

    return [
        pc(HIGH_PRIORITY_CLASS, HIGH_PRIORITY),
        pc(UNSCHEDULABLE_PRIORITY_CLASS, UNSCHEDULABLE_PRIORITY),
    ]


# ----- suites -----------------------------------------------------------------------------
def _suite(nodes: int, factor: int, timeout: float) -> list[Workload]:
    """The five workloads for `nodes` nodes; `factor` measured pods per node where the
    nodes have room (the preemption workloads' nodes are full: one preemptor, or two
    100m pods, per node)."""
    return [
        Workload("SchedulingBasic", "basic", nodes, nodes, factor * nodes, timeout_s=timeout),
        Workload("SchedulingMixed", "mixed", nodes, nodes, factor * nodes, timeout_s=timeout),
        Workload("PreemptionBasic", "preemption-basic", nodes, 4 * nodes, nodes, timeout_s=timeout),
        Workload(
            "PreemptionAsync",
            "preemption-async",
            nodes,
            4 * nodes,
            2 * nodes,
            churn_per_second=5.0,
            churn_max=nodes,
            timeout_s=timeout,
        ),
        Workload(
            "Unschedulable",
            "unschedulable",
            nodes,
            max(1, nodes // 50),
            factor * nodes,
            churn_per_second=5.0,
            churn_max=200,
            timeout_s=timeout,
        ),
    ]


SUITES: dict[str, list[Workload]] = {
    # about 1-2 minutes for upstream + ceiling on 2 cores
    "smoke": _suite(nodes=50, factor=10, timeout=60.0),
    # sized for 2 cores / 24 GiB: 500 nodes, as upstream's 500Nodes variants
    "default": _suite(nodes=500, factor=2, timeout=300.0),
}


def suite(
    name: str, nodes: int | None = None, pods: int | None = None, only: list[str] | None = None
) -> list[Workload]:
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r} (known: {', '.join(SUITES)})")
    out = [w.scaled(nodes, pods) for w in SUITES[name]]
    if only:
        unknown = set(only) - {w.name for w in out}
        if unknown:
            raise ValueError(f"unknown workload(s): {', '.join(sorted(unknown))}")
        out = [w for w in out if w.name in only]
    return out
