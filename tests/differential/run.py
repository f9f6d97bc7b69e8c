"""One oracle run: a fresh local cluster, both schedulers, N scenarios from a seed."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kas_dev.cluster.local import LocalCluster
from tests.differential import scenario as sc
from tests.differential.compare import Tally, TieFacts, compare
from tests.differential.harness import Oracle, PodResult
from tests.kube import ClusterHandle

T = TypeVar("T")


@dataclass
class RunResult:
    seed: int
    tally: Tally
    pods: list[tuple[PodResult, int]]  # with the scenario's node count
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "scenarios": self.tally.scenarios,
            "pods": self.tally.pods,
            "seconds": round(self.seconds, 1),
            "comparisons": dict(self.tally.made),
            "differences": [d.to_json() for d in self.tally.differences],
            "refused_by_api_server": self.tally.refused,
            "harness_errors": self.tally.errors,
            "decisions": [
                {
                    "scenario": r.scenario,
                    "pod": r.name,
                    "nodes": n,
                    "upstream": r.upstream.to_json(),
                    "ours": r.ours.to_json(),
                }
                for r, n in self.pods
                if r.upstream is not None and r.ours is not None
            ],
        }


def decide_scenario(
    oracle: Oracle,
    scenario: sc.Scenario,
    tally: Tally,
    label: str,
    say: Callable[[str], None],
) -> list[PodResult] | None:
    """Run one scenario through both schedulers and add what they decided to `tally`:
    the compared pods (returned), the manifests the API server refused, or, when the
    harness itself failed (a scheduler that never answered, a refused setup call), an
    error, after which the run goes on with the next scenario (None)."""
    victim_priority = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"]["priorityClassName"]
        for p in scenario.existing
    }
    try:
        results = oracle.run(scenario)
    except AssertionError as exc:
        tally.errors.append(f"{label}: {exc}")
        say(f"{label}: harness error: {exc}")
        oracle.forget_scenario()
        return None
    ties = None
    if scenario.ties:
        ties = TieFacts(
            {k: sc.PRIORITY_CLASSES[c][0] for k, c in victim_priority.items()},
            dict(oracle.start_times),
        )
    compared = []
    for r in results:
        if r.upstream is None or r.ours is None:
            tally.refused.append(f"{r.name}: {r.refused[:300]}")
            say(f"    the API server refused {r.name}: {r.refused[:300]}")
            continue
        diffs, made = compare(r, len(scenario.nodes), victim_priority, ties)
        tally.add(diffs, made)
        compared.append(r)
    tally.scenarios += 1
    return compared


def run_oracle(
    cluster: ClusterHandle,
    workdir: Path,
    seed: int,
    indices: Iterable[int],
    progress: Callable[[str], None] | None = None,
    generate: Callable[[int, int], sc.Scenario] = sc.generate,
) -> RunResult:
    """`generate(seed, index)` makes each scenario: sc.generate, or sc.generate_ties
    for preemptions whose victims tie."""
    say = progress or (lambda _s: None)
    tally = Tally()
    pods: list[tuple[PodResult, int]] = []
    oracle = Oracle(cluster, workdir)
    t0 = time.monotonic()
    oracle.start()
    try:
        todo = list(indices)
        for k, index in enumerate(todo, 1):
            scenario = generate(seed, index)
            before = len(tally.differences)
            results = decide_scenario(oracle, scenario, tally, f"scenario {index}", say)
            if results is None:
                continue
            pods.extend((r, len(scenario.nodes)) for r in results)
            new = len(tally.differences) - before
            say(
                f"[{k}/{len(todo)}] scenario {index}: {len(scenario.nodes)} nodes, "
                f"{len(scenario.existing)} existing pods, {len(results)} incoming, "
                f"{new} difference(s) ({time.monotonic() - t0:.0f}s)"
            )
            for d in tally.differences[before:]:
                say(f"    {d.kind}: {d.pod}: {d.detail}")
    finally:
        oracle.stop()
    return RunResult(seed, tally, pods, time.monotonic() - t0)


def in_local_cluster(
    keep: Path | None,
    prefix: str,
    work: Callable[[ClusterHandle, Path], T],
    *,
    generic_workload: bool = False,
) -> T:
    """`work(cluster, workdir)` on a fresh local control plane without nodes, in `keep`
    (kept) or a new temporary folder; `generic_workload` serves PodGroups."""
    workroot = keep or Path(tempfile.mkdtemp(prefix=prefix))
    local = LocalCluster(workroot / "cluster")
    print(f"starting a local control plane in {workroot} ...", flush=True)
    local.up(0, generic_workload=generic_workload)
    try:
        return work(ClusterHandle(local), workroot / "oracle")
    finally:
        local.down()


def main_run(
    seed: int, scenarios: list[int], out: Path | None, keep: Path | None, ties: bool = False
) -> int:
    result = in_local_cluster(
        keep,
        "kas-oracle-",
        lambda cluster, workdir: run_oracle(
            cluster,
            workdir,
            seed,
            scenarios,
            progress=lambda s: print(s, flush=True),
            generate=sc.generate_ties if ties else sc.generate,
        ),
    )
    t = result.tally
    print()
    print(
        f"seed {seed}: {t.scenarios} scenarios, {t.pods} pods, "
        f"{t.made['feasibility']} per-node feasibility decisions, {result.seconds:.0f}s"
    )
    print(t.table())
    if t.made.get("determined"):
        print(
            f"preemptions where upstream's pick was determined (compared on the exact node "
            f"and victims): {t.made['determined']} of {t.made['preemption']}"
        )
    for e in t.errors:
        print(f"harness error: {e}")
    if out is not None:
        out.write_text(json.dumps(result.to_json(), indent=1))
        print(f"results: {out}")
    return 1 if t.differences or t.errors else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_run(1, list(range(3)), None, None))


def main_gangs(seed: int, scenarios: list[int], keep: Path | None) -> int:
    """The gang oracle (tests/differential/gangs.py); exits 1 on any difference."""
    from tests.differential.gangs import run_gang_oracle

    tally = in_local_cluster(
        keep,
        "kas-gang-oracle-",
        lambda cluster, workdir: run_gang_oracle(
            cluster, workdir, seed, scenarios, progress=lambda s: print(s, flush=True)
        ),
        generic_workload=True,
    )
    print(tally.table())
    for e in tally.errors:
        print(f"error: {e}")
    return 1 if tally.differences or tally.errors else 0
