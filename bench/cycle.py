"""Micro-benchmark: one scheduling cycle (schedule_pod on a prepared snapshot).

    python -m bench.cycle [--repeat N] [--identical]

Clusters of 1000 and 5000 nodes (4 CPU / 16Gi / 110 pods, 3 zones, 4 existing pods per
node, some with labels); pods: a plain pod (requests only) and a pod with required
inter-pod anti-affinity + preferred affinity + a zone topology spread constraint.
Prints the median and p90 time per cycle. The snapshot is updated before each cycle as
the loop does (no change -> nothing copied).

--identical: instead, N identical plain pods in a row, each assumed on its node as the
loop does, under a profile whose pods can be batched (PodTopologySpread with List
defaulting and no default constraints; upstream's default System defaulting signs no
pod); each cycle counted, so opportunistic batching reuses the previous cycle's list.
"""

from __future__ import annotations

import argparse
import statistics
import time

from scheduler.cache import Cache, Nominator
from scheduler.config import names
from scheduler.config.args import parse_plugin_args
from scheduler.framework import (
    CycleState,
    FitError,
    Framework,
    SearchState,
    profile_for,
    schedule_pod,
)
from scheduler.model.node import node_from_dict
from scheduler.model.pod import PodInfo, pod_from_dict
from scheduler.plugins.registry import in_tree_registry


def _node(i: int) -> dict[str, object]:
    return {
        "metadata": {
            "name": f"node-{i}",
            "labels": {
                "kubernetes.io/hostname": f"node-{i}",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "pool": "general" if i % 10 else "gpu",
            },
        },
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def _pod(name: str, labels: dict[str, str], node: str = "", cpu: str = "500m") -> dict[str, object]:
    spec: dict[str, object] = {
        "containers": [{"name": "c", "image": "app:1",
                        "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}],
    }  # fmt: skip
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "bench", "uid": name, "labels": labels},
            "spec": spec}  # fmt: skip


def build(num_nodes: int, pods_per_node: int = 4) -> tuple[Cache, Framework]:
    cache = Cache()
    for i in range(num_nodes):
        cache.add_node(node_from_dict(_node(i)))
        for j in range(pods_per_node):
            app = f"app-{(i * pods_per_node + j) % 50}"
            cache.add_pod(pod_from_dict(_pod(f"e-{i}-{j}", {"app": app}, f"node-{i}")))
    plugins = tuple(r for r in names.DEFAULT_MULTI_POINT if r.name != names.DEFAULT_PREEMPTION)
    fw = Framework(profile_for(plugins), in_tree_registry())
    return cache, fw


def plain_pod() -> PodInfo:
    return pod_from_dict(_pod("plain", {"app": "new"}, cpu="100m"))


def affinity_pod() -> PodInfo:
    raw = _pod("aff", {"app": "web"}, cpu="100m")
    spec = raw["spec"]
    assert isinstance(spec, dict)
    anti_term = {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    pref_term = {
        "topologyKey": "topology.kubernetes.io/zone",
        "labelSelector": {"matchLabels": {"app": "app-7"}},
    }
    spec["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti_term]},
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": pref_term}
            ]
        },
    }
    spec["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
         "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}
    ]  # fmt: skip
    return pod_from_dict(raw)


def measure(cache: Cache, fw: Framework, pod: PodInfo, repeat: int) -> tuple[float, float]:
    snapshot = cache.new_snapshot()
    nominator = Nominator()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        cache.update_snapshot(snapshot)
        result = schedule_pod(fw, CycleState(), pod, snapshot, nominator)
        times.append(time.perf_counter() - t0)
        assert not isinstance(result, FitError), result.message()
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)]


def build_batchable(num_nodes: int) -> tuple[Cache, Framework]:
    cache, _ = build(num_nodes)
    plugins = tuple(r for r in names.DEFAULT_MULTI_POINT if r.name != names.DEFAULT_PREEMPTION)
    spread = parse_plugin_args(names.POD_TOPOLOGY_SPREAD, {"defaultingType": "List"}, "bench")
    profile = profile_for(plugins, plugin_args={names.POD_TOPOLOGY_SPREAD: spread})
    return cache, Framework(profile, in_tree_registry())


def measure_identical(cache: Cache, fw: Framework, count: int) -> tuple[float, float, float]:
    """Per-cycle time over `count` identical pods scheduled and assumed in a row:
    median, p90 and mean (a batch's first cycle searches, the others take hints)."""
    snapshot = cache.new_snapshot()
    nominator = Nominator()
    search = SearchState()
    times = []
    for i in range(count):
        pod = pod_from_dict(_pod(f"web-{i}", {"app": "web"}, cpu="100m"))
        t0 = time.perf_counter()
        search.cycle += 1
        cache.update_snapshot(snapshot)
        result = fw.schedule_pod(CycleState(), pod, snapshot, nominator, search)
        times.append(time.perf_counter() - t0)
        assert not isinstance(result, FitError), result.message()
        cache.assume_pod(pod, result.node)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)], statistics.fmean(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--nodes", type=int, nargs="*", default=[1000, 5000])
    parser.add_argument("--identical", action="store_true", help="identical pods in a row")
    args = parser.parse_args()
    print(f"{'nodes':>6} {'pod':<22} {'median ms':>10} {'p90 ms':>8}")
    if args.identical:
        for n in args.nodes:
            cache, fw = build_batchable(n)
            med, p90, mean = measure_identical(cache, fw, args.repeat)
            print(
                f"{n:>6} {'identical plain':<22} {med * 1e3:>10.3f} {p90 * 1e3:>8.3f}"
                f"  mean {mean * 1e3:.3f}"
            )
        return
    for n in args.nodes:
        cache, fw = build(n)
        for label, pod in (("plain", plain_pod()), ("affinity+spread", affinity_pod())):
            med, p90 = measure(cache, fw, pod, args.repeat)
            print(f"{n:>6} {label:<22} {med * 1e3:>10.3f} {p90 * 1e3:>8.3f}")


if __name__ == "__main__":
    main()
