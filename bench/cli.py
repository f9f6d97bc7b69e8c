"""`python -m bench run|report|list`.

    python -m bench run --suite smoke [--nodes N] [--pods N] [--repeat K]
                        [--schedulers upstream,ours-async,ours-sync,ceiling]
                        [--workloads SchedulingBasic,...] [--qps Q --burst B]
    python -m bench run --suite pinned [--sizes 500,1000,5000] [--workloads ...]
                        [--schedulers upstream,ours-async,ceiling] [--shapes drain,arrival]
                        [--rate 100] [--pods-scale 1.0] [--no-memory]
    python -m bench report [bench/results/FILE.json ...]
    python -m bench list
    python -m bench growth bench/results/pinned-*.json [--workload W] [--out PNG]
    python -m bench failover [--nodes 5000] [--bound-pods 20000] [--pending 1000]

The pinned suite (scheduler-bound: each contender on a core of its own, one cluster per
size) is described in bench/pinned.py; the fail-over benchmark in bench/failover.py.

`run` writes bench/results/<suite>-<UTC time>.json (after every single run, so an
interrupted suite keeps what it measured), then regenerates docs/benchmarks.md and
docs/benchmarks/*.png from the newest result file of each suite (`--no-docs` skips that).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import failover_cli, growth_report, pinned_cli, pinned_workloads, procs, report
from bench.runner import Options, run_one
from bench.workloads import SUITES, suite

RESULTS = procs.ROOT / "bench" / "results"


def _machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def _versions(bin_dir: Path) -> dict[str, str]:
    v = {
        name: procs.version_of([str(bin_dir / name), "--version"])
        for name in ("kube-apiserver", "kube-scheduler", "etcd", "kwok")
    }
    v["kube-async-scheduler"] = procs.version_of([*procs.OURS_CLI, "--version"])
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=procs.ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = "unknown"
    v["git_commit"] = commit
    return v


_last_line = [0.0]


def _progress(message: str, newline: bool) -> None:
    """A live line on a terminal; elsewhere (a log) one progress line per 5 s."""
    if sys.stdout.isatty():
        print(f"\r\033[K{message}", end="\n" if newline else "", flush=True)
        return
    now = time.monotonic()
    if newline or now - _last_line[0] >= 5.0:
        _last_line[0] = now
        print(message, flush=True)


def _run(args: argparse.Namespace) -> int:
    from kas_dev.cluster.binaries import find_binaries
    from kas_dev.cluster.errors import ClusterError

    try:
        bins = find_binaries(
            needed=("etcd", "kube-apiserver", "kube-controller-manager", "kwok", "kube-scheduler")
        )
    except ClusterError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    if args.suite == "pinned":
        return pinned_cli.run(args, _machine(), lambda: _versions(bins.bin_dir))
    if args.schedulers is None:
        args.schedulers = ",".join(procs.SCHEDULERS)
    try:
        workloads = suite(
            args.suite, args.nodes, args.pods, args.workloads.split(",") if args.workloads else None
        )
    except ValueError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    wanted = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in procs.SCHEDULERS]
    if unknown:
        print(
            f"bench: unknown scheduler(s) {', '.join(unknown)} "
            f"(known: {', '.join(procs.SCHEDULERS)})",
            file=sys.stderr,
        )
        return 2
    skipped: dict[str, str] = {}
    if any(s.startswith("ours") for s in wanted):
        ok, why = procs.ours_available()
        if not ok:
            for s in wanted:
                if s.startswith("ours"):
                    skipped[s] = f"`kube-async-scheduler run` not available: {why}"
            print(f"bench: skipping ours-*: `kube-async-scheduler run` is not available ({why})")
    contenders = [s for s in wanted if s not in skipped]
    if not contenders:
        print("bench: nothing to run", file=sys.stderr)
        return 2

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    # a run with slowed deletes is its own section of the report
    suite_label = args.suite + (f"-delete-{args.delete_latency:g}s" if args.delete_latency else "")
    out = Path(args.out) if args.out else RESULTS / f"{suite_label}-{stamp}.json"
    opts = Options(
        qps=args.qps,
        burst=args.burst,
        concurrency=args.concurrency,
        keep=args.keep,
        delete_latency=args.delete_latency,
    )
    doc: dict[str, Any] = {
        "suite": suite_label,
        "command": "python -m bench " + shlex.join(sys.argv[1:]),
        "started": stamp,
        "machine": _machine(),
        "versions": _versions(bins.bin_dir),
        "options": {
            "qps": opts.qps,
            "burst": opts.burst,
            "concurrency": opts.concurrency,
            "delete_latency_s": opts.delete_latency,
            "repeat": args.repeat,
            "schedulers": contenders,
        },
        "skipped": skipped,
        "workloads": [w.name for w in workloads],
        "runs": [],
    }
    total = args.repeat * len(workloads) * len(contenders)
    i = 0
    t_start = time.monotonic()
    print(
        f"bench: suite {args.suite}: {len(workloads)} workloads x {len(contenders)} "
        f"contenders x {args.repeat} repetitions = {total} runs -> {out}"
    )
    for rep in range(args.repeat):
        for w in workloads:
            for c in contenders:
                i += 1
                label = f"[{i}/{total}] {w.name} x {c} (rep {rep + 1})"
                try:
                    r = asyncio.run(run_one(w, c, opts, _progress, label))
                except KeyboardInterrupt:
                    print(f"\nbench: interrupted; {len(doc['runs'])} finished runs in {out}")
                    return 130
                r["rep"] = rep
                doc["runs"].append(r)
                doc["elapsed_s"] = round(time.monotonic() - t_start, 1)
                out.write_text(json.dumps(doc, indent=1))
                m = r.get("measured") or {}
                status = "ok" if r["ok"] else f"NOT OK ({r['error']})"
                tp = m.get("throughput")
                tp_text = f"; measured throughput {tp:.1f} pods/s" if tp else ""
                _progress(f"{label}: {status}{tp_text}", True)
    print(f"bench: {total} runs in {time.monotonic() - t_start:.0f}s; results in {out}")
    if not args.no_docs:
        others = [
            f
            for f in report.latest_results(RESULTS)
            if json.loads(f.read_text()).get("suite") != args.suite
        ]
        written = report.write_docs(sorted([out, *others], key=report.suite_order))
        print("bench: wrote " + ", ".join(str(p.relative_to(procs.ROOT)) for p in written))
    return 0


def _failover(args: argparse.Namespace) -> int:
    from kas_dev.cluster.binaries import find_binaries
    from kas_dev.cluster.errors import ClusterError

    try:
        bins = find_binaries(
            needed=("etcd", "kube-apiserver", "kube-controller-manager", "kwok", "kube-scheduler")
        )
    except ClusterError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    return failover_cli.run(args, _machine(), lambda: _versions(bins.bin_dir), _progress)


def _growth(args: argparse.Namespace) -> int:
    files = [Path(f) for f in args.files]
    docs = [json.loads(f.read_text()) for f in files]
    by = growth_report.points(docs, args.workload, args.shape)
    if not by:
        print(
            f"bench: no completed {args.workload} ({args.shape}) run in those files",
            file=sys.stderr,
        )
        return 1
    print("\n".join(growth_report.table(by)))
    title = f"{args.workload} ({args.shape}, pinned): cost against cluster size"
    out = growth_report.plot(by, Path(args.out), title)
    print(f"bench: wrote {out}")
    return 0


def _report(args: argparse.Namespace) -> int:
    files = [Path(f) for f in args.files] if args.files else report.latest_results(RESULTS)
    if not files:
        print(f"bench: no result files in {RESULTS}", file=sys.stderr)
        return 1
    written = report.write_docs(files)
    print("bench: wrote " + ", ".join(str(p) for p in written))
    return 0


def _list(_: argparse.Namespace) -> int:
    for name, ws in SUITES.items():
        print(f"suite {name}:")
        for w in ws:
            churn = (
                f", churn {w.churn_role} {w.churn_per_second:g}/s (max {w.churn_max})"
                if w.churn_role
                else ""
            )
            print(
                f"  {w.name:<16} {w.nodes} nodes, {w.init_pods} init, "
                f"{w.measured_pods} measured{churn}, deadline {w.timeout_s:.0f}s"
            )
    print("suite pinned (one cluster per size; --sizes, --pods-scale rescale):")
    for w in pinned_workloads.select():
        churn = f", churn {w.churn} every {w.churn_interval_s:g}s" if w.churn else ""
        print(
            f"  {w.nodes:>5} nodes {w.name:<26} {w.init_pods:>5} init ({w.init_set}), "
            f"{w.measured_pods:>5} measured ({w.measured}){churn}; shapes "
            f"{','.join(w.shapes)}{' + ceiling' if w.ceiling else ''}"
        )
    from bench.pinned import matrix, matrix_cost

    todo = matrix(
        pinned_workloads.select(), list(pinned_cli.DEFAULT_SCHEDULERS), ["drain", "arrival"]
    )
    for size, c in matrix_cost(todo).items():
        print(
            f"  {size:>5} nodes: {c['runs']} runs, {c['scheduled']} pods scheduled, "
            f"{c['created']} pods created by the harness"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a suite")
    r.add_argument("--suite", default="smoke", choices=[*sorted(SUITES), "pinned"])
    r.add_argument("--nodes", type=int, help="node count for every workload")
    r.add_argument("--pods", type=int, help="measured pods for every workload")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument(
        "--schedulers",
        help=f"default: {','.join(procs.SCHEDULERS)} "
        f"(pinned: {','.join(pinned_cli.DEFAULT_SCHEDULERS)})",
    )
    r.add_argument("--workloads", help="comma-separated subset of the suite's workloads")
    r.add_argument(
        "--qps",
        type=float,
        default=5000.0,
        help="clientConnection.qps of every contender (default 5000)",
    )
    r.add_argument("--burst", type=int, default=5000, help="clientConnection.burst")
    r.add_argument(
        "--concurrency",
        type=int,
        default=64,
        help="in-flight creates of the harness and binds of the ceiling",
    )
    r.add_argument(
        "--delete-latency",
        type=float,
        default=0.0,
        help="seconds a real admission webhook holds every pod DELETE (default 0: none)",
    )
    r.add_argument("--out", help="result file (default bench/results/<suite>-<time>.json)")
    r.add_argument("--no-docs", action="store_true", help="do not regenerate docs/")
    r.add_argument("--keep", action="store_true", help="keep each run's directory and logs")
    pinned_cli.add_arguments(r)
    r.set_defaults(fn=_run)
    rep = sub.add_parser("report", help="regenerate docs/benchmarks.md from result files")
    rep.add_argument("files", nargs="*")
    rep.set_defaults(fn=_report)
    ls = sub.add_parser("list", help="show the suites")
    ls.set_defaults(fn=_list)
    failover_cli.add_parser(sub, _failover)
    g = sub.add_parser(
        "growth", help="CPU per pod and peak RSS against nodes and pods, from pinned results"
    )
    g.add_argument("files", nargs="+", help="pinned result files")
    g.add_argument("--workload", default="SchedulingBasic")
    g.add_argument("--shape", default="drain")
    g.add_argument("--out", default=str(procs.ROOT / "docs" / "benchmarks" / "growth.png"))
    g.set_defaults(fn=_growth)
    args = ap.parse_args(argv)
    return int(args.fn(args))
