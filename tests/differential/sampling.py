"""Sampling scenarios for the differential oracle: clusters of 200-1000 nodes, where
both schedulers search only percentageOfNodesToScore of the nodes (the default, 0:
adaptive), walking their node lists zone by zone from a rotating start (issue 23).

Upstream's node search is parallel (16 workers): which feasible nodes it keeps once it
has enough depends on goroutine timing. Run with `parallelism: 1` its search has one
outcome, the one a serial search gives (processes.py `_config(sampling=True)`).

What upstream shows, and how it is read:
- the nodes it found feasible: the ones it scored (its verbosity-10 score lines);
- its node order: the nodes are created in a shuffled zone order (concurrently; the
  create's resourceVersion orders the watch's ADDED events), then some are deleted and
  some move to another zone, then the sentinel's node is added. Replaying those into a
  node tree (scheduler/cache/node_tree.py, upstream node_tree.go) gives the walk order
  upstream's snapshot lists; no scheduling cycle runs in between, so its list is
  rebuilt once, from the final tree;
- where each search started and how many nodes it processed: a probe pod that every
  node accepts goes before and after every scenario pod. A probe keeps the first N
  nodes of the walk (N = numFeasibleNodesToFind), a run of N consecutive nodes of the
  order that starts at the search's start; it processes exactly N nodes (the walk stops
  at the (N+1)-th feasible node). So the pod between two probes processed
  (start_after - start_before - N) mod n nodes; this scheduler logs the number.

Compared per pod, besides what compare.compare compares (feasibility per node, the
message, the unique node choice, the scores): `order`, a probe's feasible nodes are a
run of the expected order (for each scheduler); `evaluated`, the nodes the pod processed,
upstream's (from its probes) against ours (logged), modulo n.

Run: `python -m tests.differential.sampling --scenarios 30 --seed 1`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.algorithm import num_feasible_nodes_to_find
from scheduler.cache.node_tree import NodeTree, zone_key
from tests.differential import scenario as sc
from tests.differential.compare import Difference, Tally, compare
from tests.differential.harness import Oracle, PodResult
from tests.differential.run import in_local_cluster
from tests.kube import ClusterHandle

FIRST_INDEX = 2000  # scenario prefixes s2000.. (apart from the random and volume ones)
PROBE = "oracle.kas.io/probe"
MIN_NODES, MAX_NODES = 200, 1000


@dataclass
class SamplingScenario:
    base: sc.Scenario
    deletes: list[str] = field(default_factory=list)
    # node name -> its labels after the zone change (a merge patch of metadata.labels)
    zone_changes: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)


def _node(rng: random.Random, name: str, zone: str | None, region: str) -> dict[str, Any]:
    labels = {sc.HOSTNAME: name, "disk": rng.choice(["ssd", "hdd"])}
    if zone is not None:
        labels[sc.ZONE] = zone
        labels[sc.REGION] = region
    cpu = rng.choice([2000, 4000, 8000, 16000])
    mem = rng.choice([4096, 8192, 16384, 32768])
    resources = {
        "cpu": f"{cpu}m",
        "memory": f"{mem}Mi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    spec: dict[str, Any] = {}
    if rng.random() < 0.2:
        spec["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    return sc.node_object(
        name, labels, spec, {"allocatable": resources, "capacity": dict(resources)}
    )


def _pod(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox:1.36"}],
        "priorityClassName": "oracle-low",
    }
    body.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": body,
    }


def _probe(name: str, ns: str) -> dict[str, Any]:
    """A pod every node accepts: it keeps the first N nodes of the walk."""
    pod = _pod(name, ns, tolerations=[{"operator": "Exists"}])
    pod["metadata"]["annotations"] = {PROBE: "true"}
    return pod


def _requests(cpu: str, mem: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "c",
            "image": "busybox:1.36",
            "resources": {"requests": {"cpu": cpu, "memory": mem}},
        }
    ]


def _scenario_pods(rng: random.Random, p: str, ns: str, zones: list[str]) -> list[dict[str, Any]]:
    """Pods for which many nodes are feasible (the search stops early, rejected nodes
    interleaved), few (every node searched), or none (the message's counts)."""
    kinds: list[Callable[[str], dict[str, Any]]] = [
        # most nodes: every untainted one
        lambda n: _pod(n, ns, containers=_requests("100m", "128Mi")),
        # tolerating the taint too, scored by capacity
        lambda n: _pod(
            n, ns, containers=_requests("1", "1Gi"), tolerations=[{"operator": "Exists"}]
        ),
        # about half the nodes
        lambda n: _pod(n, ns, nodeSelector={"disk": "ssd"}),
        # only the big nodes
        lambda n: _pod(n, ns, containers=_requests("12", "1Gi")),
        # some zones
        lambda n: _pod(
            n,
            ns,
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": sc.ZONE,
                                        "operator": "In",
                                        "values": rng.sample(zones, max(1, len(zones) // 2)),
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        # spread over zones (scored)
        lambda n: _pod(
            n,
            ns,
            containers=_requests("200m", "256Mi"),
            topologySpreadConstraints=[
                {
                    "maxSkew": 1,
                    "topologyKey": sc.ZONE,
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": p}},
                }
            ],
        ),
        # nothing fits: every node searched, the message counts them
        lambda n: _pod(n, ns, nodeSelector={"disk": "nvme"}),
    ]
    pods = []
    for i in range(rng.randint(3, 5)):
        pod = rng.choice(kinds)(f"{p}-i{i}")
        pod["metadata"]["labels"] = {"app": p}
        pods.append(pod)
    return pods


def generate(seed: int, index: int, nodes: int | None = None) -> SamplingScenario:
    rng = random.Random(f"sampling/{seed}/{index}")
    base = sc.Scenario(FIRST_INDEX + index, seed)
    p = base.prefix
    ns = f"{p}-ns"
    base.namespaces = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"oracle": "true"}},
        }
    ]
    count = nodes or rng.choice([200, 200, 250, 300, 400, 600, MAX_NODES])
    zones = [f"{p}-z{i}" for i in range(rng.randint(2, 5))]
    regions = {z: rng.choice(["r1", "r2"]) for z in zones}
    # `count` nodes stay after the deletes, and the sentinel's node comes on top
    extra = count // 19
    made = []
    for i in range(count + extra + 1):
        zone = rng.choice(zones) if rng.random() < 0.93 else None  # some without a zone
        made.append(_node(rng, f"{p}-n{i:04}", zone, regions[zone] if zone else ""))
    rng.shuffle(made)  # zones interleaved in creation order, names not in order
    base.nodes = made
    base.nodes[-1]["metadata"]["labels"][sc.SENTINEL_LABEL] = p
    out = SamplingScenario(base)
    body = made[:-1]
    out.deletes = [n["metadata"]["name"] for n in rng.sample(body, extra)]
    kept = [n for n in body if n["metadata"]["name"] not in set(out.deletes)]
    for n in rng.sample(kept, max(1, len(kept) // 50)):
        new_zone = rng.choice([*zones, None])
        patch: dict[str, str | None] = {sc.ZONE: new_zone}
        if new_zone is not None:
            patch[sc.REGION] = regions[new_zone]
        out.zone_changes.append((n["metadata"]["name"], patch))
    pods = _scenario_pods(rng, p, ns, zones)
    incoming = [_probe(f"{p}-probe0", ns)]
    for k, pod in enumerate(pods, 1):
        incoming += [pod, _probe(f"{p}-probe{k}", ns)]
    base.incoming = incoming
    return out


class SamplingOracle(Oracle):
    """The oracle with the sampling configuration, whose setup records the order in
    which the schedulers' node watch delivered the scenario's node changes."""

    def __init__(self, cluster: ClusterHandle, workdir: Path) -> None:
        super().__init__(cluster, workdir, sampling=True)
        self.order: list[str] = []  # the expected walk order of the current scenario

    def setup_sampling(self, s: SamplingScenario) -> None:
        scenario = s.base
        self._teardown_previous()
        self._previous = scenario
        self.recorder.clear()
        for ns in scenario.namespaces:
            self._req("POST", "/api/v1/namespaces", ns)

        def create(node: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            out = self._req("POST", "/api/v1/nodes", node)
            name = node["metadata"]["name"]
            self._req(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": node["status"]},
                "application/merge-patch+json",
            )
            # etcd's revision: the watch delivers the ADDED events in this order
            return int(out["metadata"]["resourceVersion"]), node

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            created = sorted(pool.map(create, scenario.nodes[:-1]), key=lambda c: c[0])
        tree = NodeTree()
        labels: dict[str, dict[str, str]] = {}
        for _, node in created:
            name = node["metadata"]["name"]
            labels[name] = dict(node["metadata"]["labels"])
            tree.add_node(name, zone_key(labels[name]))
        for name in s.deletes:
            self._req("DELETE", f"/api/v1/nodes/{name}")
            tree.remove_node(name, zone_key(labels.pop(name)))
        for name, patch in s.zone_changes:
            self._req(
                "PATCH",
                f"/api/v1/nodes/{name}",
                {"metadata": {"labels": patch}},
                "application/merge-patch+json",
            )
            old = zone_key(labels[name])
            for k, v in patch.items():
                if v is None:
                    labels[name].pop(k, None)
                else:
                    labels[name][k] = v
            tree.update_node(old, name, zone_key(labels[name]))
        sentinel = scenario.nodes[-1]
        create(sentinel)
        tree.add_node(sentinel["metadata"]["name"], zone_key(sentinel["metadata"]["labels"]))
        self.order = tree.list()
        self._sync(scenario)

    def run_sampling(self, s: SamplingScenario) -> list[PodResult]:
        self.setup_sampling(s)
        return [self.decide(s.base, pod) for pod in s.base.incoming]


def _run_start(order: list[str], feasible: set[str], to_find: int) -> int | None:
    """Where a run of `to_find` consecutive nodes of `order` (cyclic) that is exactly
    `feasible` starts; None when `feasible` is no such run."""
    n = len(order)
    if len(feasible) != min(to_find, n):
        return None
    for s in range(n):
        if order[s] in feasible and order[s - 1] not in feasible:
            run = {order[(s + i) % n] for i in range(to_find)}
            return s if run == feasible else None
    return 0 if len(feasible) == n else None


def compare_sampling(
    scenario: int, order: list[str], results: list[PodResult]
) -> tuple[list[Difference], dict[str, int]]:
    """The `order` and `evaluated` comparisons of one scenario (see the module doc)."""
    n = len(order)
    to_find = num_feasible_nodes_to_find(0, n)
    diffs: list[Difference] = []
    made = {"order": 0, "evaluated": 0}
    starts: list[int | None] = []
    for r in results[::2]:  # the probes
        assert r.upstream is not None and r.ours is not None
        for who, d in (("upstream", r.upstream), ("ours", r.ours)):
            made["order"] += 1
            s = _run_start(order, d.feasible or set(), to_find)
            if s is None:
                diffs.append(
                    Difference(
                        "order",
                        scenario,
                        r.name,
                        f"{who}'s {len(d.feasible or ())} feasible nodes are not a run of "
                        f"{to_find} nodes of the node tree order",
                    )
                )
            if who == "upstream":
                starts.append(s)
    for k, r in enumerate(results[1::2]):  # the pods between probes k and k+1
        before, after = starts[k], starts[k + 1]
        assert r.ours is not None
        if before is None or after is None or r.ours.processed is None:
            continue
        made["evaluated"] += 1
        upstream = (after - before - to_find) % n
        if r.ours.processed % n != upstream:
            diffs.append(
                Difference(
                    "evaluated",
                    scenario,
                    r.name,
                    f"upstream processed {upstream} (mod {n}) nodes, ours {r.ours.processed}",
                )
            )
    return diffs, made


@dataclass
class SamplingRun:
    tally: Tally
    nodes: list[int]  # per scenario, the nodes listed
    seconds: float


def run_sampling_oracle(
    cluster: ClusterHandle,
    workdir: Path,
    seed: int,
    indices: Iterable[int],
    progress: Callable[[str], None] | None = None,
    nodes: int | None = None,
) -> SamplingRun:
    say = progress or (lambda _s: None)
    tally = Tally()
    sizes: list[int] = []
    oracle = SamplingOracle(cluster, workdir)
    t0 = time.monotonic()
    oracle.start()
    try:
        for index in indices:
            s = generate(seed, index, nodes)
            label = f"sampling scenario {index}"
            before = len(tally.differences)
            try:
                results = oracle.run_sampling(s)
            except AssertionError as exc:
                tally.errors.append(f"{label}: {exc}")
                say(f"{label}: harness error: {exc}")
                oracle.forget_scenario()
                continue
            if any(r.upstream is None or r.ours is None for r in results):
                tally.refused += [f"{r.name}: {r.refused[:300]}" for r in results if r.refused]
                continue
            n = len(oracle.order)
            for r in results:
                diffs, made = compare(r, n, {})
                tally.add(diffs, made)
            diffs2, made2 = compare_sampling(s.base.index, oracle.order, results)
            tally.differences.extend(diffs2)
            tally.made.update(made2)
            tally.scenarios += 1
            sizes.append(n)
            say(
                f"{label}: {n} nodes, {len(results)} pods (probes included), "
                f"{len(tally.differences) - before} difference(s) ({time.monotonic() - t0:.0f}s)"
            )
            for d in tally.differences[before:]:
                say(f"    {d.kind}: {d.pod}: {d.detail}")
    finally:
        oracle.stop()
    return SamplingRun(tally, sizes, time.monotonic() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.differential.sampling", description=__doc__)
    ap.add_argument("--scenarios", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, nargs="*", help="run just these scenario indices")
    ap.add_argument("--nodes", type=int, help="every scenario with this many nodes")
    ap.add_argument("--out", type=Path, help="write the differences and figures as JSON")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (logs)")
    args = ap.parse_args(argv)
    os.environ.setdefault("KAS_CLUSTER_DIE_WITH_PARENT", "1")
    run = in_local_cluster(
        args.keep,
        "kas-oracle-sampling-",
        lambda cluster, workdir: run_sampling_oracle(
            cluster,
            workdir,
            args.seed,
            args.only if args.only else range(args.scenarios),
            progress=lambda s: print(s, flush=True),
            nodes=args.nodes,
        ),
    )
    t = run.tally
    print(
        f"\nseed {args.seed}: {t.scenarios} scenarios of {min(run.nodes, default=0)}-"
        f"{max(run.nodes, default=0)} nodes, {t.pods} pods (probes included), {run.seconds:.0f}s"
    )
    print(t.table())
    for kind in ("order", "evaluated"):
        print(f"| {kind} | {t.made.get(kind, 0)} | {t.count(kind)} |")
    for e in t.errors:
        print(f"harness error: {e}")
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "seed": args.seed,
                    "scenarios": t.scenarios,
                    "nodes": run.nodes,
                    "pods": t.pods,
                    "comparisons": dict(t.made),
                    "differences": [d.to_json() for d in t.differences],
                    "harness_errors": t.errors,
                },
                indent=1,
            )
        )
    return 1 if t.differences or t.errors or t.refused else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
