"""`python -m bench failover ...`: options, the result file, the closing table.

The result file (bench/results/failover-<UTC time>.json, rewritten after every run so an
interrupted benchmark keeps what it measured) holds the command, the machine, the
versions, the pinning plan, the lease settings, the cluster's start-up figures, one entry
per (phase, contender) and the side-by-side rows."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import failover, pinning, procs
from bench import failover_figures as ff


def add_parser(sub: Any, fn: Callable[[argparse.Namespace], int]) -> None:
    f = sub.add_parser("failover", help="leader fail-over and cold start, both schedulers")
    f.add_argument("--nodes", type=int, default=5000, help="kwok nodes (default 5000)")
    f.add_argument(
        "--bound-pods",
        type=int,
        default=20000,
        help="pods created already bound before every run (default 20000)",
    )
    f.add_argument(
        "--pending", type=int, default=1000, help="pending pods each run schedules (default 1000)"
    )
    f.add_argument(
        "--schedulers",
        default=",".join(failover.CONTENDERS),
        help="comma-separated, of upstream and ours-async (default both)",
    )
    f.add_argument(
        "--contender-cpu", type=int, help="the replicas' core (default: the highest one)"
    )
    f.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds a phase may take to bind every pod (default 300)",
    )
    f.add_argument("--out", help="result file (default bench/results/failover-<time>.json)")
    f.add_argument("--keep", action="store_true", help="keep the cluster's files and logs")
    f.set_defaults(fn=fn)


def figures_by_contender(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """contender -> phase -> figures, from the result file's runs."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in runs:
        if r.get("figures"):
            out.setdefault(r["scheduler"], {})[r["phase"]] = r["figures"]
    return out


def run(
    args: argparse.Namespace,
    machine: dict[str, Any],
    versions_of: Callable[[], Any],
    progress: Callable[[str, bool], None],
) -> int:
    wanted = tuple(s.strip() for s in args.schedulers.split(",") if s.strip())
    unknown = [s for s in wanted if s not in failover.CONTENDERS]
    if unknown or not wanted:
        print(
            f"bench: failover takes {', '.join(failover.CONTENDERS)}, not {unknown}",
            file=sys.stderr,
        )
        return 2
    if min(args.nodes, args.pending) < 1 or args.bound_pods < 0:
        print("bench: --nodes and --pending must be >= 1, --bound-pods >= 0", file=sys.stderr)
        return 2
    try:
        plan = pinning.plan(os.sched_getaffinity(0), args.contender_cpu)
    except ValueError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    if "ours-async" in wanted:
        ok, why = procs.ours_available()
        if not ok:
            print(f"bench: our scheduler cannot start: {why}", file=sys.stderr)
            return 1
    # the harness, and through it the control plane it starts, off the replicas' core
    pinning.pin_self(plan.control_plane)
    opts = failover.FailoverOptions(
        nodes=args.nodes,
        bound_pods=args.bound_pods,
        pending=args.pending,
        schedulers=wanted,
        timeout_s=args.timeout,
        keep=args.keep,
    )
    out_dir = procs.ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else out_dir / f"failover-{stamp}.json"
    doc: dict[str, Any] = {
        "suite": "failover",
        "command": "python -m bench " + shlex.join(sys.argv[1:]),
        "started": stamp,
        "machine": machine,
        "versions": versions_of(),
        "pinning": plan.describe(),
        "options": {
            "nodes": opts.nodes,
            "bound_pods": opts.bound_pods,
            "pending": opts.pending,
            "schedulers": list(wanted),
            "leader_election": failover.LEASE_SETTINGS,
            "settle_s": failover.SETTLE_S,
            "qps": opts.qps,
            "burst": opts.burst,
            "concurrency": opts.concurrency,
        },
        "cluster": {},
        "runs": [],
    }
    t0 = time.monotonic()

    def save() -> None:
        doc["elapsed_s"] = round(time.monotonic() - t0, 1)
        doc["table"] = ff.side_by_side(figures_by_contender(doc["runs"]))
        out.write_text(json.dumps(doc, indent=1))

    def on_result(r: dict[str, Any]) -> None:
        doc["runs"].append(r)
        save()
        status = "ok" if r["ok"] else f"NOT OK ({r['error']})"
        figs = r.get("figures") or {}
        progress(
            f"[{r['phase']} x {r['scheduler']}] {status}; first bind "
            f"{figs.get('origin_to_first_bind_s')} s, all bound "
            f"{figs.get('origin_to_all_bound_s')} s, CPU {figs.get('cpu_s')} s",
            True,
        )

    def on_cluster(info: dict[str, Any]) -> None:
        doc["cluster"] = info
        save()

    print(
        f"bench: failover: {', '.join(wanted)} at {opts.nodes} nodes, {opts.bound_pods} "
        f"bound pods, {opts.pending} pending; replicas on CPU {sorted(plan.contender)}, "
        f"control plane and harness on {sorted(plan.control_plane)} -> {out}",
        flush=True,
    )
    try:
        asyncio.run(failover.run(opts, plan, progress, on_result, on_cluster))
    except KeyboardInterrupt:
        print(f"\nbench: interrupted; {len(doc['runs'])} finished runs in {out}")
        return 130
    save()
    print(ff.table(ff.side_by_side(figures_by_contender(doc["runs"]))))
    print(f"bench: {len(doc['runs'])} runs in {doc['elapsed_s']:.0f}s; results in {out}")
    return 0 if all(r["ok"] for r in doc["runs"]) else 1
