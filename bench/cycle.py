"""Micro-benchmark: one scheduling cycle (schedule_pod on a prepared snapshot).

    python -m bench.cycle [--repeat N] [--nodes N ...] [--shapes NAME ...] [--identical] [--cpu]

Clusters of 1000 and 5000 nodes (4 CPU / 16Gi / 110 pods, 3 zones, 4 existing pods per
node). Cluster "plain": the existing pods carry labels only; pods: a plain pod (requests
only) and a pod with required inter-pod anti-affinity + preferred affinity + a zone
topology spread constraint. Cluster "affinity": as upstream's scheduler_perf affinity
workloads, every fifth node holds a pod with required anti-affinity to `color=green` on
the hostname, and one existing pod per node has preferred anti-affinity to its own
service on the hostname (the common Deployment pattern); pods: plain, required and
preferred anti-affinity, required and preferred zone affinity, zone (DoNotSchedule) +
hostname (ScheduleAnyway) spread. Prints the median and p90 time per cycle. The snapshot
is updated before each cycle as the loop does (no change -> nothing copied).

--identical: instead, N identical plain pods in a row, each assumed on its node as the
loop does, under a profile whose pods can be batched (PodTopologySpread with List
defaulting and no default constraints; upstream's default System defaulting signs no
pod); each cycle counted, so opportunistic batching reuses the previous cycle's list.

--preemption: instead, one preemption evaluation (DefaultPreemption's PostFilter dry
run: candidate sampling, victim selection on each sampled node, the pick) for a 3000m
pod of priority 1000 on nodes each full with 4 pods of 900m at priority 0 (the pinned
suite's Preemption shape); the offset is fixed so each run dry-runs the same nodes,
through one DryRunPlan per evaluation as DefaultPreemption opens them.
Prints the evaluation's median and p90, with the node picked and its victims.

--cpu: time each cycle with the process's CPU time instead of the wall clock (steadier
when the machine is loaded by other work).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from scheduler.algorithm import ProfileAlgorithm, schedule_pod
from scheduler.cache import Cache, Nominator
from scheduler.cache.node_view import NodeView
from scheduler.catalog import profile_for
from scheduler.config import names
from scheduler.config.args import DefaultPreemptionArgs, parse_plugin_args
from scheduler.framework import (
    CycleState,
    FitError,
    Framework,
    SearchState,
)
from scheduler.framework.dry_run import DryRunPlan
from scheduler.model.node import node_from_dict
from scheduler.model.pod import PodInfo, pod_from_dict
from scheduler.plugins.registry import in_tree_registry
from scheduler.preemption.evaluator import DryRun, Evaluation, NodeLike
from scheduler.preemption.policy_evaluator import new_evaluator

# the clock each cycle is timed with; --cpu swaps in process CPU time
clock: Callable[[], float] = time.perf_counter

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


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


def _with_affinity(
    raw: dict[str, object], kind: str, key: str, labels: dict[str, str], weight: int = 0
) -> dict[str, object]:
    """`raw` with one pod (anti-)affinity term: kind podAffinity|podAntiAffinity; a
    weight makes it a preferred term."""
    spec = raw["spec"]
    assert isinstance(spec, dict)
    term = {"topologyKey": key, "labelSelector": {"matchLabels": labels}}
    terms: dict[str, object] = (
        {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": weight, "podAffinityTerm": term}]}
        if weight else {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    )  # fmt: skip
    spec.setdefault("affinity", {})[kind] = terms
    return raw


def _existing_pod(i: int, j: int, pods_per_node: int, with_affinity: bool) -> PodInfo:
    app = f"app-{(i * pods_per_node + j) % 50}"
    node = f"node-{i}"
    if not with_affinity or j > 1:
        return pod_from_dict(_pod(f"e-{i}-{j}", {"app": app}, node))
    if j == 0:
        svc = f"svc-{i % 50}"
        raw = _pod(f"e-{i}-{j}", {"app": svc}, node)
        return pod_from_dict(_with_affinity(raw, "podAntiAffinity", HOST, {"app": svc}, 100))
    if i % 5 == 0:
        raw = _pod(f"e-{i}-{j}", {"app": app, "color": "green"}, node)
        return pod_from_dict(_with_affinity(raw, "podAntiAffinity", HOST, {"color": "green"}))
    return pod_from_dict(_pod(f"e-{i}-{j}", {"app": app}, node))


def build(
    num_nodes: int, pods_per_node: int = 4, with_affinity: bool = False
) -> tuple[Cache, Framework]:
    cache = Cache()
    for i in range(num_nodes):
        cache.add_node(node_from_dict(_node(i)))
        for j in range(pods_per_node):
            cache.add_pod(_existing_pod(i, j, pods_per_node, with_affinity))
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


def required_anti_pod() -> PodInfo:
    raw = _pod("anti", {"color": "green"}, cpu="100m")
    return pod_from_dict(_with_affinity(raw, "podAntiAffinity", HOST, {"color": "green"}))


def preferred_anti_pod() -> PodInfo:
    raw = _pod("pref-anti", {"app": "svc-3"}, cpu="100m")
    return pod_from_dict(_with_affinity(raw, "podAntiAffinity", HOST, {"app": "svc-3"}, 100))


def required_affinity_pod() -> PodInfo:
    raw = _pod("aff-req", {"app": "app-7"}, cpu="100m")
    return pod_from_dict(_with_affinity(raw, "podAffinity", ZONE, {"app": "app-7"}))


def preferred_affinity_pod() -> PodInfo:
    raw = _pod("aff-pref", {"app": "new"}, cpu="100m")
    return pod_from_dict(_with_affinity(raw, "podAffinity", ZONE, {"app": "app-7"}, 50))


def spread_pod() -> PodInfo:
    raw = _pod("spread", {"app": "app-5"}, cpu="100m")
    spec = raw["spec"]
    assert isinstance(spec, dict)
    sel = {"matchLabels": {"app": "app-5"}}
    spec["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": sel},
        {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": sel},
    ]  # fmt: skip
    return pod_from_dict(raw)


# (cluster with affinity-bearing existing pods?, pod) per shape name
SHAPES: dict[str, tuple[bool, Callable[[], PodInfo]]] = {
    "plain": (False, plain_pod),
    "affinity+spread": (False, affinity_pod),
    "aff-cluster/plain": (True, plain_pod),
    "required-anti": (True, required_anti_pod),
    "preferred-anti": (True, preferred_anti_pod),
    "required-affinity": (True, required_affinity_pod),
    "preferred-affinity": (True, preferred_affinity_pod),
    "zone+host-spread": (True, spread_pod),
}


def measure(cache: Cache, fw: Framework, pod: PodInfo, repeat: int) -> tuple[float, float]:
    snapshot = cache.new_snapshot()
    nominator = Nominator()
    times = []
    for _ in range(repeat):
        t0 = clock()
        cache.update_snapshot(snapshot)
        result = schedule_pod(fw, CycleState(), pod, snapshot, nominator)
        times.append(clock() - t0)
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
    schedule = ProfileAlgorithm(fw)  # the loop's: schedule_pod with the profile's batching
    times = []
    for i in range(count):
        pod = pod_from_dict(_pod(f"web-{i}", {"app": "web"}, cpu="100m"))
        t0 = clock()
        search.cycle += 1
        cache.update_snapshot(snapshot)
        result = schedule(CycleState(), pod, snapshot, nominator, search)
        times.append(clock() - t0)
        assert not isinstance(result, FitError), result.message()
        cache.assume_pod(pod, result.node)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)], statistics.fmean(times)


def build_full(num_nodes: int) -> tuple[Cache, Framework]:
    """Every node full: 4 pods of 900m at priority 0 on 4 CPU."""
    cache = Cache()
    for i in range(num_nodes):
        cache.add_node(node_from_dict(_node(i)))
        for j in range(4):
            cache.add_pod(pod_from_dict(_pod(f"v-{i}-{j}", {"app": "low"}, f"node-{i}", "900m")))
    plugins = tuple(r for r in names.DEFAULT_MULTI_POINT if r.name != names.DEFAULT_PREEMPTION)
    return cache, Framework(profile_for(plugins), in_tree_registry())


def preemptor_pod() -> PodInfo:
    raw = _pod("preemptor", {"app": "high"}, cpu="3000m")
    spec = raw["spec"]
    assert isinstance(spec, dict)
    spec["priority"] = 1000
    return pod_from_dict(raw)


def measure_preemption(cache: Cache, fw: Framework, repeat: int) -> tuple[float, float, Evaluation]:
    """One evaluation as DefaultPreemption.post_filter runs it (Filter failed on every
    node; the dry runs are the framework's NodeDryRun on the cycle's state)."""
    snapshot = cache.new_snapshot()
    cache.update_snapshot(snapshot)
    nominator = Nominator()
    pod = preemptor_pod()
    state = CycleState()
    failed = schedule_pod(fw, state, pod, snapshot, nominator)
    assert isinstance(failed, FitError)
    diagnosis = failed.diagnosis.node_to_status()
    evaluator = new_evaluator(DefaultPreemptionArgs(), {pod.scheduler_name}, rand=lambda n: n // 3)

    plans: list[DryRunPlan] = []

    def fit(p: PodInfo, node: NodeLike, /) -> DryRun:
        assert isinstance(node, NodeView) and p is pod
        return plans[-1].open(node)

    times = []
    evaluation = None
    for _ in range(repeat):
        t0 = clock()
        # as DefaultPreemption: one plan per cycle
        plans[:] = [DryRunPlan(fw.filter_runner, state, pod, nominator)]
        evaluation = evaluator.evaluate(
            pod, diagnosis, snapshot, nominator, (), fit, num_all_nodes=snapshot.num_nodes
        )
        times.append(clock() - t0)
    assert evaluation is not None and evaluation.decision is not None, evaluation
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)], evaluation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--nodes", type=int, nargs="*", default=[1000, 5000])
    parser.add_argument("--identical", action="store_true", help="identical pods in a row")
    parser.add_argument("--shapes", nargs="*", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--cpu", action="store_true", help="time CPU, not wall clock")
    parser.add_argument("--preemption", action="store_true", help="one preemption evaluation")
    args = parser.parse_args()
    if args.cpu:
        global clock
        clock = time.process_time
    if args.preemption:
        print(f"{'nodes':>6} {'evaluation':<22} {'median ms':>10} {'p90 ms':>8}")
        for n in args.nodes:
            cache, fw = build_full(n)
            med, p90, ev = measure_preemption(cache, fw, args.repeat)
            d = ev.decision
            assert d is not None
            print(
                f"{n:>6} {'preemption':<22} {med * 1e3:>10.3f} {p90 * 1e3:>8.3f}"
                f"  checked {ev.nodes_checked} candidates {len(ev.candidates)}"
                f" -> {d.node} victims {[v.name for v in d.victims]}"
            )
        return
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
        clusters: dict[bool, tuple[Cache, Framework]] = {}
        for label in args.shapes:
            with_affinity, make_pod = SHAPES[label]
            if with_affinity not in clusters:
                clusters[with_affinity] = build(n, with_affinity=with_affinity)
            cache, fw = clusters[with_affinity]
            med, p90 = measure(cache, fw, make_pod(), args.repeat)
            print(f"{n:>6} {label:<22} {med * 1e3:>10.3f} {p90 * 1e3:>8.3f}")


if __name__ == "__main__":
    main()
