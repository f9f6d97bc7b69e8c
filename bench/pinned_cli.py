"""`python -m bench run --suite pinned ...`: options, the result file, progress.

The result file (bench/results/pinned-<UTC time>.json, rewritten after every run so an
interrupted matrix keeps what it measured) holds the machine, the versions, the pinning
plan, per size the cluster's start-up figures and idle control-plane load, and one
entry per run (size, workload, shape, contender)."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from bench import pinned_workloads as pw
from bench import pinning, procs, scale_pods
from bench.pinned import PinnedOptions, matrix, run_suite
from kas_dev.cluster.local import LARGE_POD_THRESHOLD

DEFAULT_SCHEDULERS = ("upstream", "ours-async", "ceiling")


def add_arguments(r: argparse.ArgumentParser) -> None:
    g = r.add_argument_group("pinned suite (--suite pinned)")
    g.add_argument(
        "--sizes",
        default=",".join(str(s) for s in pw.SIZES),
        help="comma-separated node counts (default 500,1000,5000)",
    )
    g.add_argument(
        "--shapes",
        default=",".join(pw.SHAPES),
        help="drain and/or arrival (each workload runs the shapes it is marked for)",
    )
    g.add_argument(
        "--rate", type=float, default=100.0, help="arrival creates per second (default 100)"
    )
    g.add_argument(
        "--pods-scale", type=float, default=1.0, help="multiply every measured pod count"
    )
    g.add_argument(
        "--no-memory", action="store_true", help="skip the 5000-node / 20000-pod memory run"
    )
    g.add_argument(
        "--contender-cpu",
        type=int,
        help="the core of the scheduler under test (default: the highest one)",
    )
    g.add_argument(
        "--init-pods",
        type=int,
        default=0,
        help="fill each size's cluster with N bound Deployment-like pods before the "
        "workloads (bench/scale_pods.py); from 50000 the control plane runs in large mode",
    )
    g.add_argument(
        "--init-concurrency",
        type=int,
        default=64,
        help="creates in flight while filling the cluster (default 64)",
    )
    g.add_argument(
        "--no-kwok-nodes",
        action="store_true",
        help="nodes without kwok (no leases, no pod status writes), as scheduler_perf",
    )


def check_init_pods(init_pods: int, sizes: list[int], workloads: list[pw.PinnedWorkload]) -> None:
    """ValueError unless `init_pods` fit beside every workload of the matrix: within their
    share of every size's nodes, and not beside a preemption workload, whose init set
    fills the nodes (victims and preemptors are sized for otherwise empty nodes)."""
    if init_pods == 0:
        return
    for n in sizes:
        scale_pods.check_fits(init_pods, n)
    full = sorted({w.name for w in workloads if w.preempts})
    if full:
        raise ValueError(
            f"--init-pods does not go with {', '.join(full)}: their init pods fill the nodes"
        )


def run(args: argparse.Namespace, machine: dict[str, Any], versions_of: Any) -> int:
    import os

    ignored = [
        flag
        for flag, given in (
            ("--nodes", args.nodes is not None),
            ("--pods", args.pods is not None),
            ("--repeat", args.repeat != 1),
            ("--delete-latency", bool(args.delete_latency)),
        )
        if given
    ]
    if ignored:
        print(
            f"bench: {', '.join(ignored)} do not apply to the pinned suite "
            "(it takes --sizes and --pods-scale; run it again for another repetition)",
            file=sys.stderr,
        )
        return 2
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
        bad = [s for s in shapes if s not in pw.SHAPES]
        if bad:
            raise ValueError(f"unknown shape(s) {', '.join(bad)} (known: drain, arrival)")
        workloads = pw.select(
            sizes,
            args.workloads.split(",") if args.workloads else None,
            args.pods_scale,
            memory=not args.no_memory,
        )
        plan = pinning.plan(os.sched_getaffinity(0), args.contender_cpu)
        check_init_pods(args.init_pods, sizes, workloads)
    except ValueError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    wanted = [s.strip() for s in (args.schedulers or ",".join(DEFAULT_SCHEDULERS)).split(",")]
    unknown = [s for s in wanted if s not in (*procs.SCHEDULERS, *procs.PROFILED)]
    if unknown:
        print(f"bench: unknown scheduler(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    if any(s.startswith("ours") for s in wanted):
        ok, why = procs.ours_available()
        if not ok:
            print(f"bench: our scheduler cannot start: {why}", file=sys.stderr)
            return 1
    todo = matrix(workloads, wanted, shapes)
    if not todo:
        print("bench: nothing to run", file=sys.stderr)
        return 2
    # the harness, and through it the control plane it starts, off the contender's core
    pinning.pin_self(plan.control_plane)
    out_dir = procs.ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else out_dir / f"pinned-{stamp}.json"
    opts = PinnedOptions(
        qps=args.qps,
        burst=args.burst,
        rate=args.rate,
        concurrency=args.concurrency,
        kwok_nodes=not args.no_kwok_nodes,
        keep=args.keep,
        init_pods=args.init_pods,
        init_concurrency=args.init_concurrency,
        large_cluster=args.init_pods >= LARGE_POD_THRESHOLD,
    )
    doc: dict[str, Any] = {
        "suite": "pinned",
        "command": "python -m bench " + shlex.join(sys.argv[1:]),
        "started": stamp,
        "machine": machine,
        "versions": versions_of(),
        "pinning": {
            **plan.describe(),
            "harness_affinity": sorted(os.sched_getaffinity(0)),
            "how": "harness and control plane: sched_setaffinity before they start; "
            "contender: sched_setaffinity in the child before exec; Go: GOMAXPROCS env",
        },
        "options": {
            "qps": opts.qps,
            "burst": opts.burst,
            "concurrency": opts.concurrency,
            "arrival_rate": opts.rate,
            "pods_scale": args.pods_scale,
            "kwok_nodes": opts.kwok_nodes,
            "schedulers": wanted,
            "shapes": shapes,
            "sizes": sizes,
            "init_pods": opts.init_pods,
            "init_concurrency": opts.init_concurrency,
            "large_cluster": opts.large_cluster,
        },
        "clusters": {},
        "runs": [],
    }
    t0 = time.monotonic()
    print(
        f"bench: pinned suite: {len(todo)} runs over sizes {sizes}; contender on CPU "
        f"{sorted(plan.contender)}, control plane and harness on {sorted(plan.control_plane)}"
        f" -> {out}",
        flush=True,
    )

    def save() -> None:
        doc["elapsed_s"] = round(time.monotonic() - t0, 1)
        out.write_text(json.dumps(doc, indent=1))

    def on_result(r: dict[str, Any]) -> None:
        doc["runs"].append(r)
        save()

    def on_cluster(size: int, info: dict[str, Any]) -> None:
        doc["clusters"][str(size)] = info
        save()

    from bench.cli import _progress

    try:
        asyncio.run(
            run_suite(workloads, wanted, shapes, plan, opts, _progress, on_result, on_cluster)
        )
    except KeyboardInterrupt:
        print(f"\nbench: interrupted; {len(doc['runs'])} finished runs in {out}")
        return 130
    save()
    print(f"bench: {len(doc['runs'])} runs in {doc['elapsed_s']:.0f}s; results in {out}")
    from bench import pinned_report

    # the gang runs' pod-group attempt figures, side by side (docs/benchmarks.md has
    # them too, under each size's table)
    for line in pinned_report.pod_group_tables(doc):
        print(line)
    if opts.init_pods:
        # report.latest_results passes over a scale run: regenerating now would write the
        # previous pinned matrix's tables again, or none
        print("bench: docs not regenerated (an --init-pods run; see docs/performance.md)")
    elif not args.no_docs:
        from bench import report

        written = report.write_docs(report.latest_results(out_dir))
        print("bench: wrote " + ", ".join(str(p.relative_to(procs.ROOT)) for p in written))
    return 0
