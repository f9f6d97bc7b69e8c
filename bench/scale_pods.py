"""The pods that fill a pinned-suite cluster before its workloads (`--init-pods N`).

Issue 26 asks how both schedulers start and schedule with a large cluster's worth of
pods already running: 150,000 at 5000 nodes. Such pods come from Deployments, so they
look like a ReplicaSet's replicas: app / pod-template-hash and a few more labels, an
owner reference, two or three containers with requests and limits, env, probes, volume
mounts, the default tolerations, and (some) node affinity and topology spread
constraints. Their size is the point: what a scheduler keeps per pod, and what a LIST
of them costs, depends on it.

They carry no status: kwok leaves them alone (kas_dev's KWOK_IGNORED_LABEL), so they
stay Pending with their node set. kwok marks pods Running a few dozen a second on this
shared machine (5000 pods: 40 s to create, 68 s more until kwok had marked them all), an
hour or more for 150,000, and its status writes would go on through the measured runs.
A real cluster's pods carry about 1-1.5 KB of status JSON more (conditions, container
statuses, IPs); a scheduler that keeps whole pod objects (upstream does, managedFields
stripped) holds that much more per pod there than here, one that keeps a record of what
it needs (ours) about the same. Both schedulers treat a pod with a node and a phase other
than Succeeded/Failed as running on that node, Pending included.

They are created bound (spec.nodeName set), in a namespace of their own
(`SCALE_NAMESPACE`): no scheduler works on them, the harness's per-run reset of the
benchmark namespace leaves them alone, and its pod watch never sees them. Both
contenders see them as running pods in their caches.

The owner of each "deployment" is a ConfigMap (the harness creates it first and puts its
uid in the reference): the garbage collector finds the owner, so it deletes nothing, and
no controller adopts or counts pods owned by a ConfigMap, so none acts on them.

Placement is round-robin over the nodes, and at most `max_per_node` pods go to a node,
so the scale pods take at most half of a node's CPU, memory and pod slots
(`NODE_ALLOCATABLE`, the pinned suite's nodes): the workloads' own pods still fit.

Pure data and manifests: unit-tested without a cluster (tests/benchmark/test_bench_scale_pods.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bench.workloads import IMAGE, ROLE_LABEL
from kas_dev.cluster.local import KWOK_IGNORED_LABEL

SCALE_NAMESPACE = "bench-scale"
SCALE_ROLE = "scale"
DEPLOYMENT_LABEL = "bench.kas/deployment"
# the pinned suite's node (pinned_workloads.node_manifest): 4 CPU, 32Gi, 110 pods
NODE_ALLOCATABLE = {"cpu_m": 4000, "memory_mi": 32 * 1024, "pods": 110}
# the share of each node the scale pods may take: the workloads' pods need the rest
NODE_SHARE = 0.5
# replicas of the successive "deployments", in turn: a mix of small and large ones
REPLICAS = (10, 25, 50, 100, 40, 20, 75, 30)
# the alphabet Kubernetes encodes generated name suffixes and template hashes with
# (no vowels, no look-alike digits)
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    image: str
    cpu_m: int
    memory_mi: int
    port: int | None = None
    probes: bool = False


@dataclass(frozen=True, slots=True)
class Shape:
    """One kind of application: its containers and which constraints its pods carry."""

    name: str
    tier: str
    containers: tuple[Container, ...]
    node_affinity: bool = False
    spread: bool = False
    dedicated_toleration: bool = False

    @property
    def cpu_m(self) -> int:
        return sum(c.cpu_m for c in self.containers)

    @property
    def memory_mi(self) -> int:
        return sum(c.memory_mi for c in self.containers)


_PROXY = Container("proxy", "registry.k8s.io/pause:3.10", 10, 64, port=15001, probes=True)
_LOGS = Container("log-shipper", "registry.k8s.io/pause:3.10", 5, 32)
SHAPES = (
    # a web service: the application, a proxy sidecar, a log shipper; spread over zones
    # and nodes as a Deployment's pods usually are
    Shape(
        "web",
        "frontend",
        (Container("app", IMAGE, 30, 128, port=8080, probes=True), _PROXY, _LOGS),
        spread=True,
    ),
    # a queue worker: the application and a log shipper, Linux/amd64 only (the
    # required node affinity many charts set), tolerating a dedicated pool
    Shape(
        "worker",
        "backend",
        (Container("worker", IMAGE, 40, 192, probes=True), _LOGS),
        node_affinity=True,
        dedicated_toleration=True,
    ),
    # a cache: node affinity and spread both
    Shape(
        "cache",
        "data",
        (Container("cache", IMAGE, 45, 224, port=6379, probes=True), _LOGS),
        node_affinity=True,
        spread=True,
    ),
)


@dataclass(frozen=True, slots=True)
class Deployment:
    """One "deployment": `replicas` pods of one shape, owned by one ConfigMap."""

    index: int
    replicas: int
    first_pod: int
    """The global index of its first pod (placement is by global index)."""
    shape: Shape

    @property
    def name(self) -> str:
        return f"{self.shape.name}-{self.index}"

    @property
    def template_hash(self) -> str:
        return _encode(f"template/{self.index}", 10)

    @property
    def owner_name(self) -> str:
        """The ConfigMap standing for its ReplicaSet (named as the ReplicaSet would be)."""
        return f"{self.name}-{self.template_hash}"


def _encode(seed: str, length: int) -> str:
    """A stable name fragment in Kubernetes' alphabet: the same seed, the same text."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:length])


def pod_suffix(d: Deployment, replica: int) -> str:
    """Five characters as a ReplicaSet's pod names end with; distinct within a deployment
    (two random-looking ones, then the replica in base 27: up to 19,683 replicas)."""
    digits = ""
    n = replica
    for _ in range(3):
        n, r = divmod(n, len(_ALPHABET))
        digits = _ALPHABET[r] + digits
    if n:
        raise ValueError(f"replica {replica} is beyond what a five-character suffix holds")
    return _encode(f"pod/{d.index}", 2) + digits


def max_pod_request() -> tuple[int, int]:
    """The largest (CPU millicores, MiB) one scale pod requests."""
    return max(s.cpu_m for s in SHAPES), max(s.memory_mi for s in SHAPES)


def max_per_node() -> int:
    """How many scale pods one node may hold within NODE_SHARE of its allocatable."""
    cpu, mem = max_pod_request()
    a = NODE_ALLOCATABLE
    return int(
        min(
            a["cpu_m"] * NODE_SHARE // cpu,
            a["memory_mi"] * NODE_SHARE // mem,
            a["pods"] * NODE_SHARE,
        )
    )


def per_node(total: int, nodes: int) -> int:
    """The most scale pods any node gets (round-robin placement)."""
    return -(-total // nodes) if nodes else 0


def check_fits(total: int, nodes: int) -> None:
    """Raise ValueError when `total` scale pods would take more than NODE_SHARE of some
    node of `nodes`."""
    if total < 0 or nodes < 1:
        raise ValueError("--init-pods must be >= 0 and the cluster needs a node")
    if per_node(total, nodes) > max_per_node():
        raise ValueError(
            f"--init-pods {total} over {nodes} nodes puts {per_node(total, nodes)} pods on a "
            f"node; at most {max_per_node()} fit in {NODE_SHARE:.0%} of a node "
            f"({max_per_node() * nodes} pods in all)"
        )


def deployments(total: int) -> list[Deployment]:
    """The deployments whose replicas make `total` pods (the last one cut to fit)."""
    out: list[Deployment] = []
    made = 0
    i = 0
    while made < total:
        replicas = min(REPLICAS[i % len(REPLICAS)], total - made)
        out.append(Deployment(i, replicas, made, SHAPES[i % len(SHAPES)]))
        made += replicas
        i += 1
    return out


def node_of(pod_index: int, nodes: int) -> str:
    """Round robin: consecutive pods (a deployment's replicas) on consecutive nodes."""
    # pinned_workloads.node_name, spelled out: that module imports nothing of this one
    return f"node-{pod_index % nodes}"


def owner_configmap(d: Deployment) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": d.owner_name,
            "namespace": SCALE_NAMESPACE,
            "labels": {ROLE_LABEL: SCALE_ROLE, "app": d.name},
        },
        "data": {"replicas": str(d.replicas), "shape": d.shape.name},
    }


def _labels(d: Deployment) -> dict[str, str]:
    return {
        "app": d.name,
        "pod-template-hash": d.template_hash,
        "app.kubernetes.io/name": d.shape.name,
        "app.kubernetes.io/instance": d.name,
        "app.kubernetes.io/version": f"1.{d.index % 7}.{d.index % 3}",
        "app.kubernetes.io/part-of": f"team-{d.index % 12}",
        "tier": d.shape.tier,
        ROLE_LABEL: SCALE_ROLE,
        DEPLOYMENT_LABEL: d.name,
        # kwok leaves them Pending (see the module's docstring)
        KWOK_IGNORED_LABEL[0]: KWOK_IGNORED_LABEL[1],
    }


def _container(c: Container, d: Deployment) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": c.name,
        "image": c.image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "APP_NAME", "value": d.name},
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "resources": {
            "requests": {"cpu": f"{c.cpu_m}m", "memory": f"{c.memory_mi}Mi"},
            "limits": {"cpu": f"{c.cpu_m * 4}m", "memory": f"{c.memory_mi * 2}Mi"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if c.port is not None:
        out["ports"] = [{"name": "http", "containerPort": c.port, "protocol": "TCP"}]
    if c.probes and c.port is not None:
        probe = {"httpGet": {"path": "/healthz", "port": c.port}, "periodSeconds": 10}
        out["readinessProbe"] = probe
        out["livenessProbe"] = {**probe, "initialDelaySeconds": 15, "failureThreshold": 3}
    elif c.probes:
        out["livenessProbe"] = {"exec": {"command": ["/bin/true"]}, "periodSeconds": 30}
    return out


def _tolerations(d: Deployment) -> list[dict[str, Any]]:
    # what the DefaultTolerationSeconds admission plugin gives every pod, written out so
    # the pod is the same whichever plugins the API server runs
    out: list[dict[str, Any]] = [
        {
            "key": f"node.kubernetes.io/{t}",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        }
        for t in ("not-ready", "unreachable")
    ]
    if d.shape.dedicated_toleration:
        out.append(
            {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
        )
    return out


def _affinity() -> dict[str, Any]:
    # every node is linux/amd64: required terms every node passes, and a preference
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        ]
                    }
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [
                            {"key": "topology.kubernetes.io/region", "operator": "Exists"}
                        ]
                    },
                }
            ],
        }
    }


def _spread(d: Deployment) -> list[dict[str, Any]]:
    # ScheduleAnyway: a running pod's constraints never made its own placement wrong
    selector = {"matchLabels": {"app": d.name}}
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": selector,
            "matchLabelKeys": ["pod-template-hash"],
        }
        for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
    ]


def scale_pod(d: Deployment, replica: int, nodes: int, owner_uid: str) -> dict[str, Any]:
    """Replica `replica` of deployment `d`, bound to its round-robin node."""
    shape = d.shape
    spec: dict[str, Any] = {
        "nodeName": node_of(d.first_pod + replica, nodes),
        "containers": [_container(c, d) for c in shape.containers],
        "volumes": [
            {"name": "config", "configMap": {"name": d.owner_name, "defaultMode": 420}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
        "tolerations": _tolerations(d),
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "enableServiceLinks": False,
        "securityContext": {"fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
    }
    if shape.node_affinity:
        spec["affinity"] = _affinity()
    if shape.spread:
        spec["topologySpreadConstraints"] = _spread(d)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{d.owner_name}-{pod_suffix(d, replica)}",
            "namespace": SCALE_NAMESPACE,
            "labels": _labels(d),
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
                "checksum/config": hashlib.sha256(d.owner_name.encode()).hexdigest(),
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": d.owner_name,
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def scale_pods(total: int, nodes: int, owner_uids: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    """Every scale pod, one deployment after the other (a generator: 150,000 manifests
    at once would cost the harness gigabytes). `owner_uids` maps each deployment's
    owner_name to its ConfigMap's uid."""
    check_fits(total, nodes)
    for d in deployments(total):
        uid = owner_uids[d.owner_name]
        for r in range(d.replicas):
            yield scale_pod(d, r, nodes, uid)
