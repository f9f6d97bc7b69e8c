"""The workloads of the scheduler-bound ("pinned") suite, modelled on upstream's
scheduler_perf (k8s.io/kubernetes v1.37.2, test/integration/scheduler_perf):

- SchedulingBasic (misc/performance-config.yaml): templates/pod-default.yaml;
- SchedulingPodAntiAffinity (affinity/): pod-with-pod-anti-affinity.yaml;
- SchedulingPodAffinity (affinity/): pod-with-pod-affinity.yaml;
- TopologySpreading (topology_spreading/): pod-with-topology-spreading.yaml;
- SchedulingNodeAffinity (affinity/): pod-with-node-affinity.yaml;
- PreemptionBasic (default_preemption/): pod-low-priority.yaml x4 per node, measured
  default_preemption/templates/pod-high-priority.yaml (3 CPU);
- PreemptionAsync (default_preemption/): the same full nodes, preemptors at 5/s while
  pod-default.yaml pods are measured;
- Unschedulable (default_preemption/): pod-high-priority-large-cpu.yaml (9 CPU) at 5/s
  while pod-default.yaml pods are measured;
- SchedulingWithMixedChurn (misc/): every second a node (churn/node-default.yaml), a
  9-CPU pod and a Service replace the previous ones while pod-default.yaml pods are
  measured;
- Memory: SchedulingBasic's shape with 20000 pods in the cache at 5000 nodes.

Differences from upstream, and why:
- one cluster per size serves every workload and contender, so the nodes are the same
  for all: 4 CPU / 32Gi / 110 pods (node-default.yaml) in three zones zone-a..c. Upstream
  labels every node zone1 for the affinity cases; here node affinity selects two of the
  three zones (a third of the nodes filtered out) and pod affinity by zone is satisfied
  in every zone, as upstream's single zone is;
- init pods are created already bound (spec.nodeName), not scheduled by the contender,
  and they stay between the contenders of one workload (the harness restores exactly
  this set before each run: victims are recreated, everything else deleted);
- one namespace (upstream's anti-affinity/affinity cases use two namespaces listed in
  the term; one namespace is the same selection);
- the measured pod counts are cut so that one run schedules for seconds to tens of
  seconds on one core (`counts`); upstream's counts are in `UPSTREAM_COUNTS`.

Pure data and manifests: unit-tested without a cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench import dra_objects
from bench.workloads import (
    HIGH_PRIORITY_CLASS,
    NAMESPACE,
    ROLE_LABEL,
    UNSCHEDULABLE_PRIORITY_CLASS,
    ZONES,
    pod,
)

SIZES = (500, 1000, 5000)
INIT_SET_LABEL = "bench.kas/init-set"
INIT_KEY_LABEL = "bench.kas/init-key"
CHURN_NODE_PREFIX = "churn-node"
CHURN_SERVICE_PREFIX = "churn-svc"
SHAPES = ("drain", "arrival")


@dataclass(frozen=True, slots=True)
class PinnedWorkload:
    name: str
    nodes: int
    init_set: str
    """Which init pods exist before the run: "plain", "green", "blue", "low" or "tiny"."""
    init_pods: int
    measured: str
    """Template of the measured pods: plain, anti, affinity, spread, node-affinity, preemptor."""
    measured_pods: int
    churn: str | None = None
    """"preemptor" / "unschedulable": one pod every churn_interval_s; "mixed": every
    churn_interval_s a node, a 9-CPU pod and a Service replace the previous ones."""
    churn_interval_s: float = 0.2
    churn_max: int = 0
    timeout_s: float = 120.0
    shapes: tuple[str, ...] = ("drain",)
    """The arrival shapes this workload runs in the default matrix."""
    ceiling: bool = False
    """Whether the raw-bind ceiling runs beside the schedulers (its figure does not
    depend on the pods' constraints, so one workload is enough)."""
    upstream: str = ""
    group_size: int = 0
    """Members per PodGroup of the measured "gang" template (GenericWorkload)."""
    filled_devices: int = 0
    """DRA workloads: devices the harness allocates (fill claims) before the run."""

    def __post_init__(self) -> None:
        if self.init_set not in INIT_SETS:
            raise ValueError(f"{self.name}: unknown init set {self.init_set!r}")
        if self.measured not in MEASURED:
            raise ValueError(f"{self.name}: unknown measured template {self.measured!r}")
        if self.churn not in (None, "preemptor", "unschedulable", "mixed"):
            raise ValueError(f"{self.name}: unknown churn {self.churn!r}")
        if self.nodes < 1 or self.measured_pods < 1 or self.init_pods < 0:
            raise ValueError(f"{self.name}: nodes and measured pods must be >= 1")
        if self.init_set == "low" and self.init_pods > 4 * self.nodes:
            raise ValueError(f"{self.name}: at most 4 low-priority pods per node")
        if self.measured == "anti" and self.init_pods + self.measured_pods > self.nodes:
            raise ValueError(f"{self.name}: anti-affinity pods need a node each")
        for s in self.shapes:
            if s not in SHAPES:
                raise ValueError(f"{self.name}: unknown shape {s!r}")
        if self.gangs and (self.group_size < 1 or self.measured_pods % self.group_size):
            raise ValueError(f"{self.name}: measured pods must be whole groups")
        if self.dra and self.filled_devices + self.measured_pods > self.devices:
            raise ValueError(f"{self.name}: more claims than the nodes' devices")

    @property
    def dra(self) -> bool:
        """The measured pods use ResourceClaims: the cluster gets slices, a class and a
        claim template, and both schedulers the DynamicResourceAllocation gate."""
        return self.measured == "claim-template"

    @property
    def devices(self) -> int:
        return self.nodes * dra_objects.DEVICES_PER_NODE

    @property
    def gangs(self) -> bool:
        """The measured pods are PodGroup members: the cluster and both schedulers need
        the GenericWorkload gate."""
        return self.measured in ("gang", "gang-preemptor")

    @property
    def preempts(self) -> bool:
        return self.measured in ("preemptor", "gang-preemptor") or self.churn == "preemptor"

    @property
    def preemptor_role(self) -> str | None:
        if self.measured in ("preemptor", "gang-preemptor"):
            return "measured"
        if self.churn == "preemptor":
            return "churn"
        return None


INIT_SETS = ("plain", "green", "blue", "low", "tiny")
MEASURED = (
    "plain", "anti", "affinity", "spread", "node-affinity", "preemptor", "gang", "gang-preemptor",
    "claim-template",
)  # fmt: skip

# upstream's own counts at (500, 5000) nodes: (init pods, measured pods) of the
# 500Nodes / 5000Nodes workloads of each test case (1000 for PreemptionBasic, which has
# no 5000-node case that passes: kubernetes/kubernetes#108308)
UPSTREAM_COUNTS: dict[str, dict[int, tuple[int, int]]] = {
    "SchedulingBasic": {500: (500, 1000), 5000: (1000, 10000)},
    "SchedulingPodAntiAffinity": {500: (100, 400), 5000: (1000, 2000)},
    "SchedulingPodAffinity": {500: (500, 1000), 5000: (5000, 5000)},
    "TopologySpreading": {500: (1000, 1000), 5000: (5000, 5000)},
    "SchedulingNodeAffinity": {500: (500, 1000), 5000: (5000, 10000)},
    "PreemptionBasic": {1000: (4000, 1000)},
    "PreemptionAsync": {500: (2000, 500), 5000: (20000, 5000)},
    "Unschedulable": {500: (10, 1000), 5000: (100, 10000)},
    "SchedulingWithMixedChurn": {1000: (0, 1000), 5000: (0, 10000)},
}

WORKLOAD_NAMES = (
    "SchedulingBasic",
    "SchedulingNodeAffinity",
    "TopologySpreading",
    "Unschedulable",
    "SchedulingWithMixedChurn",
    "SchedulingPodAntiAffinity",
    "SchedulingPodAffinity",
    "PreemptionBasic",
    "PreemptionAsync",
)
"""Run order: workloads sharing an init set follow each other, so the harness only
tops the set up (Memory, at 5000 nodes, comes after the plain ones)."""


def _scaled(n: int, factor: float) -> int:
    return max(1, round(n * factor))


def workloads_for(nodes: int, pods_scale: float = 1.0) -> list[PinnedWorkload]:
    """The matrix at one size. Measured counts are chosen so one run schedules for a
    few seconds to a few tens of seconds on one core; `pods_scale` multiplies them."""
    big = nodes >= 5000
    s = pods_scale

    def m(n: int) -> int:
        return _scaled(n, s)

    plain_init = nodes  # one per node: shared by the five "plain" workloads
    out = [
        PinnedWorkload(
            "SchedulingBasic", nodes, "plain", plain_init, "plain",
            m(2000 if big else 2 * nodes if nodes > 500 else 1000),
            shapes=("drain", "arrival"), ceiling=True,
            upstream="misc/performance-config.yaml SchedulingBasic",
        ),
        PinnedWorkload(
            "SchedulingNodeAffinity", nodes, "plain", plain_init, "node-affinity",
            m(1500 if big else 1000),
            upstream="affinity/performance-config.yaml SchedulingNodeAffinity",
        ),
        PinnedWorkload(
            "TopologySpreading", nodes, "plain", plain_init, "spread", m(1000),
            upstream="topology_spreading/performance-config.yaml TopologySpreading",
        ),
        PinnedWorkload(
            "Unschedulable", nodes, "plain", plain_init, "plain", m(1500 if big else 1000),
            churn="unschedulable", churn_interval_s=0.2, churn_max=400,
            upstream="default_preemption/performance-config.yaml Unschedulable",
        ),
        PinnedWorkload(
            "SchedulingWithMixedChurn", nodes, "plain", plain_init, "plain",
            m(1500 if big else 1000), churn="mixed", churn_interval_s=1.0, churn_max=120,
            shapes=("drain", "arrival"),
            upstream="misc/performance-config.yaml SchedulingWithMixedChurn",
        ),
        PinnedWorkload(
            "SchedulingPodAntiAffinity", nodes, "green", nodes // 5,
            "anti", min(m(1000 if big else 400), nodes - nodes // 5),
            upstream="affinity/performance-config.yaml SchedulingPodAntiAffinity",
        ),
        PinnedWorkload(
            "SchedulingPodAffinity", nodes, "blue", nodes, "affinity", m(500),
            upstream="affinity/performance-config.yaml SchedulingPodAffinity",
        ),
        PinnedWorkload(
            "PreemptionBasic", nodes, "low", 4 * nodes, "preemptor", min(m(200), nodes),
            upstream="default_preemption/performance-config.yaml PreemptionBasic",
        ),
        PinnedWorkload(
            "PreemptionAsync", nodes, "low", 4 * nodes, "plain", m(1500 if big else 1000),
            churn="preemptor", churn_interval_s=0.2, churn_max=nodes,
            upstream="default_preemption/performance-config.yaml PreemptionAsync",
        ),
    ]  # fmt: skip
    # a deadline only cuts a run that went wrong: generous, more so at 5000 nodes where a
    # loaded control-plane core slows every bind
    timeout = 300.0 if big else 150.0
    return [dataclasses.replace(w, timeout_s=timeout) for w in out]


def memory_workload(nodes: int = 5000, total_pods: int = 20000) -> PinnedWorkload:
    """Peak RSS with `total_pods` pods in the scheduler's cache: three quarters of them
    bound before it starts, the last quarter drained by it."""
    measured = total_pods // 4
    return PinnedWorkload(
        "Memory", nodes, "plain", total_pods - measured, "plain", measured,
        timeout_s=400.0, upstream="misc/performance-config.yaml SchedulingBasic (shape)",
    )  # fmt: skip


# ----- objects --------------------------------------------------------------------------
def node_name(i: int) -> str:
    return f"node-{i}"


def node_manifest(i: int, *, kwok: bool = True) -> dict[str, Any]:
    """A node as upstream's templates/node-default.yaml (4 CPU, 32Gi, 110 pods, Ready),
    with hostname and zone labels; the kwok annotation hands it to kwok (lease and
    status), without it nothing but the harness writes it."""
    name = node_name(i)
    res = {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    meta: dict[str, Any] = {
        "name": name,
        "labels": {
            "type": "kwok",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
            "topology.kubernetes.io/region": "local",
        },
    }
    if kwok:
        meta["annotations"] = {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {},
        "status": {
            "capacity": res,
            "allocatable": dict(res),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "phase": "Running",
        },
    }


def churn_node(i: int, generation: int = 0) -> dict[str, Any]:
    """templates/churn/node-default.yaml: a Ready node with room for no pods."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"{CHURN_NODE_PREFIX}-{generation}-{i}",
            "labels": {ROLE_LABEL: "churn"},
        },
        "spec": {},
        "status": {
            "capacity": {"pods": "0"},
            "allocatable": {"pods": "0"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def churn_service(i: int, generation: int = 0) -> dict[str, Any]:
    """templates/churn/service-default.yaml."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{CHURN_SERVICE_PREFIX}-{generation}-{i}",
            "namespace": NAMESPACE,
            "labels": {ROLE_LABEL: "churn"},
        },
        "spec": {
            "selector": {"app": "foo"},
            "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}],
        },
    }


def _labelled(body: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    body["metadata"]["labels"].update(labels)
    return body


def _with_port(body: dict[str, Any]) -> dict[str, Any]:
    # upstream's templates declare containerPort 80 (no hostPort): kept, so the pods
    # decode to the same shape
    body["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    return body


def _anti(label: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"color": label}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }


def _affinity(label: str) -> dict[str, Any]:
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"color": label}},
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    }


def template_pod(template: str, name: str, role: str, node: str | None = None) -> dict[str, Any]:
    """One pod of `template` (a measured template or an init set)."""
    if template == "claim-template":
        # dra/templates/pod-with-claim-template.yaml (upstream's asks for no CPU or
        # memory; the default template's requests are kept, as for every other pod here)
        return _with_port(dra_objects.with_claim_template(pod(name, role)))
    if template in ("plain", "gang"):
        # podgroup/gangscheduling/templates/gang-pod.yaml asks for 100m / 100Mi as the
        # default template does; the group reference is added by measured_pods
        body = pod(name, role, node_name=node)
    elif template == "low":
        # templates/pod-low-priority.yaml: 900m, priority 0, grace period 0
        body = pod(name, role, cpu="900m", node_name=node)
    elif template == "tiny":
        # workload_preemption/templates/pod-low-priority.yaml: 40m, priority 0 (spread
        # over the nodes by hostPort there; bound round-robin here)
        body = pod(name, role, cpu="40m", memory="100Mi", node_name=node)
    elif template == "gang-preemptor":
        # workload_preemption/templates/gang-pod.yaml with cpuRequest 3970m: a member
        # needs a node emptied of its ten 40m pods
        body = pod(name, role, cpu="3970m", memory="100Mi", priority_class=HIGH_PRIORITY_CLASS)
    elif template == "preemptor":
        # templates/pod-high-priority.yaml: 3 CPU at priority 10 (here a PriorityClass)
        body = pod(name, role, cpu="3000m", priority_class=HIGH_PRIORITY_CLASS)
    elif template in ("green", "anti"):
        body = _labelled(pod(name, role, node_name=node, affinity=_anti("green")),
                         {"color": "green"})  # fmt: skip
    elif template in ("blue", "affinity"):
        body = _labelled(pod(name, role, node_name=node, affinity=_affinity("blue")),
                         {"color": "blue"})  # fmt: skip
    elif template == "spread":
        spread = [
            {
                "maxSkew": 5,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"color": "blue"}},
            }
        ]
        body = _labelled(pod(name, role, topologySpreadConstraints=spread), {"color": "blue"})
    elif template == "node-affinity":
        term = {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES[:2])}
            ]
        }
        body = pod(
            name,
            role,
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            },
        )
    elif template == "unschedulable":
        # templates/pod-high-priority-large-cpu.yaml: 9 CPU fits no 4-CPU node
        body = pod(name, role, cpu="9", priority_class=UNSCHEDULABLE_PRIORITY_CLASS)
    else:
        raise ValueError(f"unknown pod template {template!r}")
    return _with_port(body)


def init_pod_key(w: PinnedWorkload, i: int) -> str:
    """What identifies init pod i of w's set across runs (the `INIT_KEY_LABEL` value)."""
    return f"{w.init_set}-{i}"


def init_pods(w: PinnedWorkload, generation: int = 0) -> Iterator[dict[str, Any]]:
    """The init set, bound round-robin over the nodes (green pods one per node). The
    key label says the set and the index, so the same key is always the same pod: the
    harness compares keys to restore the set between runs. Names carry `generation`
    as well: a name is never used twice in one cluster (kwok finishes deletions by
    name, late under load, and would delete a new pod of an old pod's name)."""
    for i in range(w.init_pods):
        key = init_pod_key(w, i)
        body = template_pod(w.init_set, f"init-{key}-g{generation}", "init",
                            node=node_name(i % w.nodes))  # fmt: skip
        body["metadata"]["labels"][INIT_SET_LABEL] = w.init_set
        body["metadata"]["labels"][INIT_KEY_LABEL] = key
        yield body


def measured_pods(w: PinnedWorkload, generation: int = 0) -> Iterator[dict[str, Any]]:
    for i in range(w.measured_pods):
        body = template_pod(w.measured, f"m{generation}-{i}", "measured")
        if w.gangs:
            group = pod_group_name(i // w.group_size, generation)
            body["spec"]["schedulingGroup"] = {"podGroupName": group}
        yield body


def pod_group_name(i: int, generation: int = 0) -> str:
    return f"gang{generation}-{i}"


def pod_groups(w: PinnedWorkload, generation: int = 0) -> Iterator[dict[str, Any]]:
    """podgroup/gangscheduling/templates/podgroup.yaml: gang policy, minCount = the
    group's size."""
    for i in range(w.measured_pods // w.group_size if w.gangs else 0):
        yield {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": pod_group_name(i, generation), "labels": {ROLE_LABEL: "measured"}},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": w.group_size}},
                **(
                    {"priorityClassName": HIGH_PRIORITY_CLASS}
                    if w.measured == "gang-preemptor"
                    else {}
                ),
            },
        }


def churn_pod_name(i: int, generation: int = 0) -> str:
    return f"c{generation}-{i}"


def churn_pod(w: PinnedWorkload, i: int, generation: int = 0) -> dict[str, Any]:
    if w.churn == "preemptor":
        return template_pod("preemptor", churn_pod_name(i, generation), "churn")
    if w.churn in ("unschedulable", "mixed"):
        return template_pod("unschedulable", churn_pod_name(i, generation), "churn")
    raise ValueError(f"{w.name} has no churn pods")


GANG_WORKLOAD_NAMES = ("GangScheduling", "GangScheduling1000PerGroup", "GangPreemptionBasic")
"""Run only when named (--workloads): they need the GenericWorkload gate on the cluster
and on both schedulers, which changes upstream's default profile for every workload."""


def gang_workloads_for(nodes: int, pods_scale: float = 1.0) -> list[PinnedWorkload]:
    """podgroup/gangscheduling/performance-config.yaml GangScheduling: gangs of 3
    (upstream: 1000, 2000 and 3000 of them at 5000 nodes; here 1000 scaled), and groups
    of 1000 (upstream: 3, 6 and 9 of them; here 3 scaled). No init pods."""
    three = max(1, round((1000 if nodes >= 5000 else max(10, nodes // 5)) * pods_scale))
    big = max(1, round(3 * pods_scale))
    size = 1000 if nodes >= 1000 else max(2, nodes // 5)
    return [
        PinnedWorkload(
            "GangScheduling", nodes, "plain", 0, "gang", 3 * three, group_size=3,
            upstream="podgroup/gangscheduling/performance-config.yaml GangScheduling",
        ),
        PinnedWorkload(
            "GangScheduling1000PerGroup", nodes, "plain", 0, "gang", big * size,
            group_size=size, timeout_s=300.0,
            upstream="podgroup/gangscheduling/performance-config.yaml "
            "5000Nodes_3Gangs_3000Pods_1000PerGroup",
        ),
        # upstream runs it at 100 nodes: 1000 low pods, 10 gangs of 10 (3970m each);
        # here ten 40m pods per node and a gang of 10 per 100 nodes, at most 10 gangs
        PinnedWorkload(
            "GangPreemptionBasic", nodes, "tiny", 10 * nodes, "gang-preemptor",
            10 * min(10, max(1, nodes // 10)), group_size=10,
            upstream="workload_preemption/performance-config.yaml "
            "100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods",
        ),
    ]  # fmt: skip


DRA_WORKLOAD_NAMES = (
    "ResourceClaimTemplateEmpty",
    "SchedulingWithResourceClaimTemplate",
    "ResourceClaimTemplateHalf",
    "ResourceClaimTemplateFull",
)
"""Run only when named (--workloads): they give both schedulers the
DynamicResourceAllocation gate (off by default here, so it would change this
scheduler's profile for the other workloads). In order of the devices filled before
the run, so the harness only adds fill claims from one to the next."""


def dra_workloads_for(nodes: int, pods_scale: float = 1.0) -> list[PinnedWorkload]:
    """dra/performance-config.yaml at 500 nodes, ten devices per node:
    SchedulingWithResourceClaimTemplate 5000pods_500nodes (2500 claims allocated before,
    2500 pods measured; here 2 per node, scaled), and SteadyStateClusterResourceClaimTemplate
    empty/half/full_500nodes (0, 2500 and 4990 devices in use while ten pods at a time
    are created and deleted for 10 s). This harness measures backlogs, not a steady
    state: the three steady-state cases become a backlog of one pod per node (scaled)
    with no devices, half of them, or all but the backlog's in use before it, so
    "full" has one free device per node for its whole run."""
    devices = nodes * dra_objects.DEVICES_PER_NODE
    per_node = max(1, round(nodes * pods_scale))
    backlog = min(max(1, round(2 * nodes * pods_scale)), devices // 2)
    return [
        PinnedWorkload(
            "ResourceClaimTemplateEmpty", nodes, "plain", 0, "claim-template", per_node,
            upstream="dra/performance-config.yaml SteadyStateClusterResourceClaimTemplate "
            "empty_500nodes (as a backlog)",
        ),
        PinnedWorkload(
            "SchedulingWithResourceClaimTemplate", nodes, "plain", 0, "claim-template",
            backlog, filled_devices=devices // 2,
            upstream="dra/performance-config.yaml SchedulingWithResourceClaimTemplate "
            "5000pods_500nodes",
        ),
        PinnedWorkload(
            "ResourceClaimTemplateHalf", nodes, "plain", 0, "claim-template", per_node,
            filled_devices=devices // 2,
            upstream="dra/performance-config.yaml SteadyStateClusterResourceClaimTemplate "
            "half_500nodes (as a backlog)",
        ),
        PinnedWorkload(
            "ResourceClaimTemplateFull", nodes, "plain", 0, "claim-template",
            min(per_node, nodes), filled_devices=devices - min(per_node, nodes),
            upstream="dra/performance-config.yaml SteadyStateClusterResourceClaimTemplate "
            "full_500nodes (as a backlog)",
        ),
    ]  # fmt: skip


def select(
    sizes: list[int] | None = None,
    workloads: list[str] | None = None,
    pods_scale: float = 1.0,
    memory: bool = True,
) -> list[PinnedWorkload]:
    """The matrix (size by size, each size in run order); `workloads` may name Memory."""
    known = {*WORKLOAD_NAMES, *GANG_WORKLOAD_NAMES, *DRA_WORKLOAD_NAMES, "Memory"}
    unknown = sorted(set(workloads or ()) - known)
    if unknown:
        raise ValueError(
            f"unknown workload(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    out: list[PinnedWorkload] = []
    for n in sizes or list(SIZES):
        if n < 1:
            raise ValueError(f"node count must be >= 1, got {n}")
        ws = workloads_for(n, pods_scale)
        if workloads:
            ws = [w for w in ws if w.name in workloads]
            ws += [w for w in gang_workloads_for(n, pods_scale) if w.name in workloads]
            ws += [w for w in dra_workloads_for(n, pods_scale) if w.name in workloads]
        if n >= 5000 and memory and (not workloads or "Memory" in workloads):
            mem = memory_workload(n)
            # after the plain workloads: their init set is topped up, not rebuilt
            at = max((i + 1 for i, w in enumerate(ws) if w.init_set == "plain"), default=0)
            ws.insert(at, mem)
        out += ws
    return out
