"""Random scheduling scenarios for the differential oracle, all drawn from one seed.

A scenario is what a user's cluster looks like at one moment: nodes with labels, taints,
capacities, images and cordons; namespaces with labels; pods already bound to the nodes
(requests, host ports, labels, (anti-)affinity, sidecars, overhead, pod-level resources,
priorities); and the incoming pods to decide, written with the constraints people write
(selectors, every node-affinity operator, tolerations, host ports, pod (anti-)affinity with
namespaces and namespaceSelector, spread constraints with every policy field and
minDomains, gates, overhead, init containers).

Everything is plain manifests (dicts), so the same scenario is created identically for
both schedulers and can be written to JSON to replay a difference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOSTNAME = "kubernetes.io/hostname"
GPU = "example.com/gpu"
SENTINEL_LABEL = "oracle.kas.io/sentinel"

# name -> (value, preemptionPolicy); the Priority admission plugin sets both on the pod
PRIORITY_CLASSES = {
    "oracle-low": (10, "PreemptLowerPriority"),
    "oracle-mid": (100, "PreemptLowerPriority"),
    "oracle-high": (1000, "PreemptLowerPriority"),
    "oracle-high-never": (1000, "Never"),
}
RUNTIME_CLASS = "oracle-overhead"
RUNTIME_OVERHEAD = {"cpu": "100m", "memory": "64Mi"}

_TAINTS = [
    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
    {"key": "gpu", "value": "true", "effect": "NoSchedule"},
    {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
]
_APPS = ["web", "db", "cache", "batch"]
_IMAGES = [("registry.local/web:1", 300), ("registry.local/db:2", 900), ("busybox:1.36", 5)]


@dataclass
class Scenario:
    index: int
    seed: int
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    existing: list[dict[str, Any]] = field(default_factory=list)  # with spec.nodeName to bind
    incoming: list[dict[str, Any]] = field(default_factory=list)  # no schedulerName yet
    # storage objects (StorageClass, PV, PVC, CSINode, CSIDriver, CSIStorageCapacity),
    # created after the nodes and before the existing pods (tests/differential/volumes.py)
    storage: list[dict[str, Any]] = field(default_factory=list)
    # tie scenarios (generate_ties): PodDisruptionBudgets, and what happens to the
    # existing pods once they run, in order: {"op": "start", "pod": ns/name} (status
    # startTime set to TIE_START), {"op": "label", ...} (a label patch), {"op":
    # "delete", ...}. Each is a pod update or delete in both schedulers' caches.
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    ties: bool = False

    @property
    def prefix(self) -> str:
        return f"s{self.index}"

    @property
    def sentinel_node(self) -> str:
        return str(self.nodes[-1]["metadata"]["name"])

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "seed": self.seed,
            "namespaces": self.namespaces,
            "nodes": self.nodes,
            "existing": self.existing,
            "incoming": self.incoming,
            "storage": self.storage,
            "pdbs": self.pdbs,
            "history": self.history,
            "ties": self.ties,
        }


def _qty_cpu(rng: random.Random, choices: tuple[int, ...]) -> str:
    return f"{rng.choice(choices)}m"


def _qty_mem(rng: random.Random, choices: tuple[int, ...]) -> str:
    return f"{rng.choice(choices)}Mi"


def _node(rng: random.Random, name: str, zones: list[str]) -> dict[str, Any]:
    labels = {
        HOSTNAME: name,
        "kubernetes.io/os": "linux",
        REGION: "r1",
        "disk": rng.choice(["ssd", "hdd"]),
        "gen": str(rng.randint(1, 9)),
    }
    if rng.random() < 0.9:  # some nodes lack the zone key: spread must skip them
        labels[ZONE] = rng.choice(zones)
    if rng.random() < 0.15:
        labels["tier"] = rng.choice(
            ["high", "007", "1_000", "9223372036854775808", "5"]
        )  # odd integers for Gt/Lt
    cpu = rng.choice([1000, 2000, 4000, 8000])
    mem = rng.choice([2048, 4096, 8192, 16384])
    resources: dict[str, str] = {
        "cpu": f"{cpu}m",
        "memory": f"{mem}Mi",
        "pods": str(rng.choice([4, 110, 110])),
        "ephemeral-storage": "100Gi",
    }
    if rng.random() < 0.25:
        resources[GPU] = str(rng.choice([1, 2, 4]))
    spec: dict[str, Any] = {}
    taints = [t for t in _TAINTS if rng.random() < 0.12]
    if taints:
        spec["taints"] = taints
    if rng.random() < 0.08:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": resources, "capacity": dict(resources)}
    images = [i for i in _IMAGES if rng.random() < 0.3]
    if images:
        status["images"] = [{"names": [n], "sizeBytes": mb * 1024 * 1024} for n, mb in images]
    return node_object(name, labels, spec, status)


def node_object(
    name: str, labels: dict[str, str], spec: dict[str, Any], status: dict[str, Any]
) -> dict[str, Any]:
    """A Node kwok takes over (Ready, never running anything)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": status,
    }


def _container(rng: random.Random, name: str, small: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": rng.choice(_IMAGES)[0]}
    req: dict[str, str] = {}
    if rng.random() < 0.8:
        req["cpu"] = _qty_cpu(rng, (50, 100, 250) if small else (100, 250, 500, 1000, 1500))
    if rng.random() < 0.7:
        req["memory"] = _qty_mem(rng, (32, 64) if small else (128, 256, 512, 1024, 3072))
    if req:
        c["resources"] = {"requests": req}
    return c


def _label_selector(rng: random.Random, allow_empty: bool = True) -> dict[str, Any]:
    r = rng.random()
    if r < 0.6:
        return {"matchLabels": {"app": rng.choice(_APPS)}}
    if r < 0.85:
        return {
            "matchExpressions": [{"key": "app", "operator": "In", "values": rng.sample(_APPS, 2)}]
        }
    if r < 0.93:
        return {"matchExpressions": [{"key": "app", "operator": "Exists"}]}
    if not allow_empty:
        return {"matchLabels": {"app": rng.choice(_APPS)}}
    return {}


def _affinity_term(
    rng: random.Random, namespaces: list[str], allow_empty: bool = True
) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": _label_selector(rng, allow_empty),
        "topologyKey": rng.choice([HOSTNAME, ZONE, ZONE]),
    }
    r = rng.random()
    if r < 0.2:
        term["namespaces"] = rng.sample(namespaces, rng.randint(1, len(namespaces)))
    elif r < 0.35:
        term["namespaceSelector"] = {"matchLabels": {"team": rng.choice(["a", "b"])}}
    elif r < 0.42:
        term["namespaceSelector"] = {}
    return term


def _node_expr(rng: random.Random) -> dict[str, Any]:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    key = rng.choice(["disk", "gen", ZONE, "tier"]) if op not in ("Gt", "Lt") else "gen"
    if op in ("Gt", "Lt") and rng.random() < 0.2:
        key = "tier"
    e: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        if key == "disk":
            e["values"] = [rng.choice(["ssd", "hdd"])]
        elif key == ZONE:
            e["values"] = rng.sample(["z0", "z1", "z2"], rng.randint(1, 2))
        else:
            e["values"] = [str(rng.randint(1, 9))]
    elif op in ("Gt", "Lt"):
        e["values"] = [str(rng.randint(1, 8))]
    return e


def _node_term(rng: random.Random, node_names: list[str]) -> dict[str, Any]:
    term: dict[str, Any] = {}
    exprs = [_node_expr(rng) for _ in range(rng.randint(0, 2))]
    if exprs:
        term["matchExpressions"] = exprs
    if rng.random() < 0.15 or not exprs:
        op = rng.choice(["In", "NotIn"])
        term["matchFields"] = [
            {"key": "metadata.name", "operator": op, "values": rng.sample(node_names, 1)}
        ]
    return term


def _node_affinity(rng: random.Random, node_names: list[str]) -> dict[str, Any]:
    na: dict[str, Any] = {}
    if rng.random() < 0.5:
        na["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [_node_term(rng, node_names) for _ in range(rng.randint(1, 2))]
        }
    if rng.random() < 0.6 or not na:
        prefs = []
        for _ in range(rng.randint(1, 2)):
            pref = _node_term(rng, node_names)
            if rng.random() < 0.05:  # a term the API server accepts but cannot be parsed
                pref = {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["high"]}]}
            prefs.append({"weight": rng.randint(1, 100), "preference": pref})
        na["preferredDuringSchedulingIgnoredDuringExecution"] = prefs
    return na


def _pod_affinity(rng: random.Random, namespaces: list[str], existing: bool) -> dict[str, Any]:
    aff: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() >= (0.15 if existing else 0.3):
            continue
        block: dict[str, Any] = {}
        if rng.random() < 0.5:
            # an existing pod's required anti-affinity with an empty selector would repel
            # the label-less sync sentinel as well: keep those selectors non-empty
            empty_ok = not (existing and kind == "podAntiAffinity")
            block["requiredDuringSchedulingIgnoredDuringExecution"] = [
                _affinity_term(rng, namespaces, empty_ok)
            ]
        if rng.random() < 0.6 or not block:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _affinity_term(rng, namespaces)}
                for _ in range(rng.randint(1, 2))
            ]
        aff[kind] = block
    return aff


def _spread(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    seen: set[tuple[str, str]] = set()
    for _ in range(rng.randint(1, 2)):
        when = rng.choice(["DoNotSchedule", "ScheduleAnyway"])
        key = rng.choice([ZONE, HOSTNAME])
        if (key, when) in seen:  # the API server refuses a duplicate pair
            continue
        seen.add((key, when))
        c: dict[str, Any] = {
            "maxSkew": rng.choice([1, 1, 2]),
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": _label_selector(rng),
        }
        if when == "DoNotSchedule" and rng.random() < 0.25:
            c["minDomains"] = rng.randint(1, 4)
        if rng.random() < 0.2:
            c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.2:
            c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.15:
            c["matchLabelKeys"] = ["tier"]
        out.append(c)
    return out


def _tolerations(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in _TAINTS:
        if rng.random() < 0.2:
            tol: dict[str, Any] = {"key": t["key"], "effect": t["effect"]}
            if "value" in t and rng.random() < 0.7:
                tol.update(operator="Equal", value=t["value"])
            else:
                tol["operator"] = "Exists"
            out.append(tol)
    if rng.random() < 0.03:
        out.append({"operator": "Exists"})
    return out


def _pod_spec(
    rng: random.Random,
    namespaces: list[str],
    node_names: list[str],
    *,
    existing: bool,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [_container(rng, "app")]}
    if rng.random() < 0.2:
        spec["containers"].append(_container(rng, "helper", small=True))
    if rng.random() < 0.15:
        init = _container(rng, "init")
        spec["initContainers"] = [init]
    if rng.random() < 0.12:
        side = _container(rng, "sidecar", small=True)
        side["restartPolicy"] = "Always"
        spec.setdefault("initContainers", []).append(side)
    if rng.random() < 0.1:
        spec["runtimeClassName"] = RUNTIME_CLASS
    if rng.random() < 0.08:
        # pod-level resources: the pod's own requests; containers' stay within them
        for c in spec["containers"] + spec.get("initContainers", []):
            c.pop("resources", None)
        spec["resources"] = {
            "requests": {"cpu": _qty_cpu(rng, (300, 700, 1200)), "memory": "256Mi"}
        }
    if rng.random() < 0.08:
        spec["containers"][0]["resources"] = {
            "requests": {
                **spec["containers"][0].get("resources", {}).get("requests", {}),
                GPU: "1",
            },
            "limits": {GPU: "1"},
        }
        spec.pop("resources", None)
    if rng.random() < 0.12:
        port: dict[str, Any] = {
            "containerPort": 80,
            "hostPort": rng.choice([8080, 9090]),
            "protocol": rng.choice(["TCP", "TCP", "UDP"]),
        }
        if rng.random() < 0.3:
            port["hostIP"] = "127.0.0.1"
        spec["containers"][0]["ports"] = [port]
    affinity = _pod_affinity(rng, namespaces, existing)
    if not existing:
        if rng.random() < 0.2:
            spec["nodeSelector"] = rng.choice(
                [{"disk": "ssd"}, {"disk": "hdd"}, {ZONE: "z1"}, {"gen": str(rng.randint(1, 9))}]
            )
        if rng.random() < 0.4:
            affinity["nodeAffinity"] = _node_affinity(rng, node_names)
        tols = _tolerations(rng)
        if tols:
            spec["tolerations"] = tols
        if rng.random() < 0.3:
            spec["topologySpreadConstraints"] = _spread(rng)
        if rng.random() < 0.03:
            spec["schedulingGates"] = [{"name": "oracle.kas.io/hold"}]
    elif rng.random() < 0.05:
        affinity["nodeAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 5,
                    "preference": {
                        "matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["high"]}]
                    },
                }
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    return spec


def _pod_meta(rng: random.Random, name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": rng.choice(_APPS)}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(["front", "back"])
    return {"name": name, "namespace": namespace, "labels": labels}


def _fits(node: dict[str, Any], used: dict[str, dict[str, int]], pod: dict[str, Any]) -> bool:
    """Keep existing pods within allocatable (a real kubelet would); rough, by app cpu."""
    name = node["metadata"]["name"]
    cpu = int(node["status"]["allocatable"]["cpu"].rstrip("m"))
    want = 0
    for c in pod["spec"]["containers"]:
        q = c.get("resources", {}).get("requests", {}).get("cpu", "0m")
        want += int(q.rstrip("m"))
    pod_level = pod["spec"].get("resources", {}).get("requests", {}).get("cpu")
    if pod_level:
        want = int(pod_level.rstrip("m"))
    have = used.setdefault(name, {"cpu": 0, "pods": 0})
    pods = int(node["status"]["allocatable"]["pods"])
    if have["cpu"] + want > cpu or have["pods"] + 1 >= pods:
        return False
    have["cpu"] += want
    have["pods"] += 1
    return True


def generate(seed: int, index: int) -> Scenario:
    """Scenario `index` of the run seeded with `seed` (independent of the others)."""
    rng = random.Random(f"{seed}/{index}")
    sc = Scenario(index=index, seed=seed)
    p = sc.prefix
    ns_names = [f"{p}-a", f"{p}-b", f"{p}-c"][: rng.randint(2, 3)]
    for i, ns in enumerate(ns_names):
        sc.namespaces.append(
            {"metadata": {"name": ns, "labels": {"team": "ab"[i % 2], "oracle": "true"}}}
        )
    zones = ["z0", "z1", "z2"][: rng.randint(1, 3)]
    n_nodes = rng.randint(3, 24)
    node_names = [f"{p}-n{j}" for j in range(n_nodes)]
    sc.nodes = [_node(rng, n, zones) for n in node_names]
    # the last node created is the sync sentinel: it carries a label only it has
    sc.nodes[-1]["metadata"]["labels"][SENTINEL_LABEL] = p
    sc.nodes[-1]["status"]["allocatable"]["pods"] = "110"
    sc.nodes[-1]["status"]["capacity"]["pods"] = "110"

    used: dict[str, dict[str, int]] = {}
    k = 0
    for node in sc.nodes:
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": _pod_meta(rng, f"{p}-e{k}", rng.choice(ns_names)),
                "spec": _pod_spec(rng, ns_names, node_names, existing=True),
            }
            pod["spec"]["priorityClassName"] = rng.choice(
                ["oracle-low", "oracle-low", "oracle-mid"]
            )
            if not _fits(node, used, pod):
                continue
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            sc.existing.append(pod)
            k += 1

    n_in = rng.randint(3, 8)
    preemptor_at = n_in - 1 if rng.random() < 0.3 else None
    for j in range(n_in):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": _pod_meta(rng, f"{p}-i{j}", rng.choice(ns_names)),
            "spec": _pod_spec(rng, ns_names, node_names, existing=False),
        }
        pod["spec"]["priorityClassName"] = "oracle-high" if j == preemptor_at else "oracle-low"
        if j == preemptor_at:
            pod["spec"].pop("schedulingGates", None)
            if rng.random() < 0.15:
                pod["spec"]["priorityClassName"] = "oracle-high-never"
        sc.incoming.append(pod)
    return sc


# ---------------------------------------------------------------- ties (issue 23)

# every existing pod of a tie scenario is given this start time: one second for all
TIE_START = "2026-01-01T00:00:00Z"
TIE_EARLIER = "2025-12-31T23:59:59Z"  # a few pods started a second before the rest


def _tie_pod(
    rng: random.Random, name: str, ns: str, node: str, app: str, cpu: int, prio: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "priorityClassName": prio,
            "containers": [
                {
                    "name": "app",
                    "image": "busybox:1.36",
                    "resources": {"requests": {"cpu": f"{cpu}m", "memory": "64Mi"}},
                }
            ],
        },
    }


def generate_ties(seed: int, index: int) -> Scenario:
    """A preemption scenario whose victims tie: each node runs a burst of one Job's pods
    (same priority class, one start second), a few pods of another priority, and the
    incoming pods are high-priority preemptors that fit nowhere without evicting some.

    Then a history of updates and deletes of the running pods (start time written in a
    random order, label patches, deletes) permutes each node's pod list in upstream's
    NodeInfo (a removed pod's place goes to the last pod); some nodes hold more than 12
    possible victims, where Go's sort is pdqsort and not stable. Sometimes a
    PodDisruptionBudget covers one Job, so the reprieve has a violating group."""
    rng = random.Random(f"ties/{seed}/{index}")
    sc = Scenario(index=index, seed=seed, ties=True)
    p = sc.prefix
    ns = f"{p}-a"
    sc.namespaces.append({"metadata": {"name": ns, "labels": {"team": "a", "oracle": "true"}}})
    n_nodes = rng.randint(2, 6)
    node_names = [f"{p}-n{j}" for j in range(n_nodes)]
    jobs = ["job-a", "job-b"]
    k = 0
    for name in node_names:
        node = _node(rng, name, ["z0", "z1"])
        node["spec"] = {}  # no taints, no cordon: preemption decides alone
        per_node = rng.choice([3, 5, 8, 12, 13, 16, 20])
        cpus = [rng.choice([100, 200, 250, 300, 500]) for _ in range(per_node)]
        extra = rng.choice([0, 0, 1, 2])  # pods of another priority
        total = sum(cpus) + 400 * extra
        # full: the preemptor (>= 300m) fits only after evictions
        node["status"]["allocatable"].update(cpu=f"{total + rng.choice([0, 50, 100])}m", pods="110")
        node["status"]["allocatable"]["memory"] = "64Gi"
        node["status"]["allocatable"].pop(GPU, None)
        node["status"]["capacity"] = dict(node["status"]["allocatable"])
        sc.nodes.append(node)
        job = rng.choice(jobs)
        for cpu in cpus:
            sc.existing.append(_tie_pod(rng, f"{p}-e{k}", ns, name, job, cpu, "oracle-low"))
            k += 1
        for _ in range(extra):
            sc.existing.append(_tie_pod(rng, f"{p}-e{k}", ns, name, "other", 400, "oracle-mid"))
            k += 1
    sc.nodes[-1]["metadata"]["labels"][SENTINEL_LABEL] = p

    keys = [f"{ns}/{pod['metadata']['name']}" for pod in sc.existing]
    order = list(keys)
    rng.shuffle(order)
    for key in order:
        start = TIE_EARLIER if rng.random() < 0.1 else TIE_START
        sc.history.append({"op": "start", "pod": key, "time": start})
    for key in rng.sample(keys, rng.randint(0, max(1, len(keys) // 6))):
        sc.history.append(
            {"op": "label", "pod": key, "labels": {"touched": str(rng.randint(0, 9))}}
        )
    for key in rng.sample(keys, rng.randint(0, max(1, len(keys) // 8))):
        sc.history.append({"op": "delete", "pod": key})

    if rng.random() < 0.35:
        budget: dict[str, Any] = {"selector": {"matchLabels": {"app": rng.choice(jobs)}}}
        if rng.random() < 0.5:
            budget["maxUnavailable"] = rng.randint(0, 3)
        else:
            budget["minAvailable"] = rng.randint(1, 12)
        sc.pdbs.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"{p}-pdb", "namespace": ns},
                "spec": budget,
            }
        )

    for j in range(rng.randint(1, 2)):
        cpu = rng.choice([300, 450, 600, 800, 1000])
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{p}-i{j}", "namespace": ns, "labels": {"app": "web"}},
            "spec": {
                "priorityClassName": "oracle-high",
                "containers": [
                    {
                        "name": "app",
                        "image": "busybox:1.36",
                        "resources": {"requests": {"cpu": f"{cpu}m", "memory": "64Mi"}},
                    }
                ],
            },
        }
        if rng.random() < 0.2:
            pod["spec"]["nodeSelector"] = {"disk": rng.choice(["ssd", "hdd"])}
        sc.incoming.append(pod)
    return sc
