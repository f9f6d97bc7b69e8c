"""CPU per write of the scheduler's write client, against a local API server.

    python -m bench.write_cpu [--requests 600] [--rounds 3] [--compare TREE]
                              [--kubeconfig FILE] [--cpu N]

Each measurement is a fresh process pinned to one core (`--cpu`, default the highest this
process may use) on uvloop, as the scheduler runs: a Connection from the kubeconfig and a
Dispatcher without a rate limit, 20 warm-up writes, then `--requests` sequential Event
POSTs (the Scheduled event of every bound pod: a whole write, answered by the object
echoed back); the figure is its process CPU time per request. The control plane runs on
the other cores. Without `--kubeconfig` a local control plane (kas_dev) is started for the
run and stopped after it.

`--compare TREE` measures the `scheduler` package of another checkout too (for example an
extract of the base commit: `git archive BASE scheduler | tar -x -C /tmp/base`), one
process each, alternating (TREE first) for `--rounds` rounds, and prints both series and
the ratio of their medians. A measurement imports `scheduler` from its tree only: this
file runs as a script in it, with the tree first on the path.

Written for issue 21 (the write client on llhttp: CPU per write within 10% of the
hand-written framing's); the first measurement of that client is in commit e3a41f4.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _event(i: int, run: str) -> dict[str, Any]:
    now = "2026-01-01T00:00:00.000000Z"
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"bench-{run}-{i}", "namespace": "default"},
        "eventTime": now,
        "reportingController": "kube-async-scheduler",
        "reportingInstance": "bench",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "note": f"Successfully assigned default/bench-{i} to kwok-node-{i % 50}",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default",
                      "name": f"bench-{i}", "uid": f"00000000-0000-0000-0000-{i:012d}"},
    }  # fmt: skip


def _measure(kubeconfig: str, requests: int) -> dict[str, Any]:
    """In the child: CPU seconds per request over `requests` sequential Event POSTs."""
    import asyncio
    import time
    import uuid

    import scheduler
    from scheduler.client.connection import Connection
    from scheduler.client.dispatcher import Dispatcher, DispatcherSettings

    async def run() -> float:
        conn = await Connection.from_kubeconfig(kubeconfig)
        try:
            d = Dispatcher(conn, DispatcherSettings(qps=0))
            tag = uuid.uuid4().hex[:8]
            for i in range(20):
                await d.create_event(_event(i, f"{tag}-warm"))
            started = time.process_time()
            for i in range(requests):
                await d.create_event(_event(i, tag))
            return (time.process_time() - started) / requests
        finally:
            await conn.close()

    try:
        import uvloop

        per_request = uvloop.run(run())
        loop = "uvloop"
    except ImportError:
        per_request = asyncio.run(run())
        loop = "asyncio"
    return {
        "us_per_write": round(per_request * 1e6, 1),
        "scheduler": str(Path(scheduler.__file__).parent),
        "loop": loop,
        "cpus": sorted(os.sched_getaffinity(0)),
    }


def _child(tree: Path, kubeconfig: str, requests: int, cpu: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", kubeconfig, str(requests)],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(result["scheduler"]).resolve() != (tree / "scheduler").resolve():
        raise SystemExit(f"measured {result['scheduler']}, not {tree}/scheduler")
    return result


def _series(
    trees: dict[str, Path], kubeconfig: str, requests: int, rounds: int, cpu: int
) -> dict[str, list[float]]:
    series: dict[str, list[float]] = {name: [] for name in trees}
    for r in range(rounds):
        for name, tree in trees.items():
            result = _child(tree, kubeconfig, requests, cpu)
            series[name].append(result["us_per_write"])
            print(
                f"round {r + 1} {name:>8}: {result['us_per_write']:7.1f} us CPU per write "
                f"({result['loop']}, cpu {result['cpus']})",
                flush=True,
            )
    return series


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        print(json.dumps(_measure(args[1], int(args[2]))))
        return 0
    p = argparse.ArgumentParser(prog="bench/write_cpu.py", description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=600)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compare", type=Path, help="another checkout to measure beside this one")
    p.add_argument("--kubeconfig", help="an existing cluster (default: start a local one)")
    p.add_argument("--cpu", type=int, help="the core the measured process runs on")
    opts = p.parse_args(args)
    if opts.requests < 1 or opts.rounds < 1:
        p.error("--requests and --rounds must be at least 1")
    if opts.compare is not None and not (opts.compare / "scheduler").is_dir():
        p.error(f"--compare {opts.compare}: no scheduler package there")
    available = sorted(os.sched_getaffinity(0))
    cpu = available[-1] if opts.cpu is None else opts.cpu
    if cpu not in available:
        p.error(f"--cpu {cpu}: not available (available: {available})")
    trees = {"compared": opts.compare.resolve()} if opts.compare is not None else {}
    trees["this"] = ROOT
    if opts.kubeconfig:
        series = _series(trees, opts.kubeconfig, opts.requests, opts.rounds, cpu)
    else:
        sys.path.insert(0, str(ROOT))
        from kas_dev.cluster.local import LocalCluster

        with tempfile.TemporaryDirectory(prefix="kas-write-cpu-") as tmp:
            cluster = LocalCluster(Path(tmp) / "cluster")
            # the control plane on the other cores
            others = set(available) - {cpu} or set(available)
            os.sched_setaffinity(0, others)
            cluster.up(0)
            try:
                series = _series(trees, str(cluster.kubeconfig), opts.requests, opts.rounds, cpu)
            finally:
                cluster.down()
    # a shared machine only adds CPU time (contention: caches, frequency), so the least
    # of each series is the steadier figure; the median is given beside it
    medians = {name: statistics.median(values) for name, values in series.items()}
    least = {name: min(values) for name, values in series.items()}
    for name, values in series.items():
        joined = "/".join(f"{v:.0f}" for v in values)
        print(
            f"{name:>8}: {joined} us CPU per write "
            f"(median {medians[name]:.0f}, least {least[name]:.0f})"
        )
    if "compared" in medians:
        # each round's pair ran back to back, under about the same load: the median of
        # the pairs' ratios cancels the load's drift between rounds
        pairs = [t / c for t, c in zip(series["this"], series["compared"], strict=True)]
        print(
            f"ratio this/compared: medians {medians['this'] / medians['compared']:.3f}, "
            f"least {least['this'] / least['compared']:.3f}, "
            f"median of the rounds' ratios {statistics.median(pairs):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
