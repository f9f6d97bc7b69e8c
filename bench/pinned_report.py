"""The pinned suite's section of docs/benchmarks.md and its figures.

`rows`, `cpu_curves` and `render` are pure (unit-tested); `plots` draws the PNGs with
matplotlib. A figure that is missing in a result (a failed run, a size the machine could
not hold) shows as "-" and the reason is listed under the table, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.stats import median, ratio

UPSTREAM, OURS, CEILING = "upstream", "ours-async", "ceiling"

METRICS: dict[str, tuple[str, ...]] = {
    "cpu_ms_per_pod": ("measured", "cpu_ms_per_pod"),
    "cpu_ms_per_any_bound_pod": ("measured", "cpu_ms_per_any_bound_pod"),
    "also_bound": ("measured", "also_bound_in_window"),
    "throughput": ("measured", "throughput"),
    "p50": ("measured", "latency_s", "p50"),
    "p99": ("measured", "latency_s", "p99"),
    "rss_mib": ("process", "peak_rss_mib"),
    "victims": ("preemption", "victims", "total"),
    "victims_per_preemptor": ("preemption", "victims", "mean"),
    "startup_s": ("measured", "startup_s"),
    "bound": ("measured", "bound"),
    "created": ("measured", "created"),
    # gang runs only (bench/scrape.py): the mean pod-group attempt duration, over
    # result=scheduled (upstream's CI ceiling) and over every result, and the attempts
    "pg_scheduled_ms": ("pod_group_attempts", "scheduled", "mean_ms"),
    "pg_scheduled_attempts": ("pod_group_attempts", "scheduled", "attempts"),
    "pg_all_ms": ("pod_group_attempts", "all", "mean_ms"),
    "pg_attempts": ("pod_group_attempts", "all", "attempts"),
}
PG_METRICS = ("pg_scheduled_ms", "pg_scheduled_attempts", "pg_all_ms", "pg_attempts")


def _get(d: Any, path: Sequence[str]) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


Key = tuple[int, str, str]  # size, workload, shape


def rows(doc: dict[str, Any]) -> dict[Key, dict[str, dict[str, Any]]]:
    """(size, workload, shape) -> contender -> metric -> median over its runs. Runs that
    did not complete count in `runs` and give their error; their figures stay out (a run
    cut by its deadline has a throughput, but not one comparable to a complete run)."""
    groups: dict[Key, dict[str, list[dict[str, Any]]]] = {}
    for r in doc.get("runs", []):
        key = (int(r["size"]), r["workload"]["name"], r["shape"])
        groups.setdefault(key, {}).setdefault(r["scheduler"], []).append(r)
    out: dict[Key, dict[str, dict[str, Any]]] = {}
    for key, by in groups.items():
        out[key] = {}
        for contender, rs in by.items():
            good = [r for r in rs if r.get("ok")]
            row: dict[str, Any] = {
                "runs": len(rs),
                "ok": len(good),
                "errors": [r["error"] for r in rs if r.get("error")],
            }
            for name, path in METRICS.items():
                row[name] = median(_get(r, path) for r in good)
            out[key][contender] = row
    return out


def merge(docs: Sequence[dict[str, Any]], sources: Sequence[str]) -> dict[str, Any]:
    """Several pinned result files as one: runs in file order (a later run of the same
    size, workload, shape and contender replaces an earlier one), clusters by size."""
    if not docs:
        raise ValueError("nothing to merge")
    out = dict(docs[-1])
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    clusters: dict[str, Any] = {}
    for d in docs:
        clusters.update(d.get("clusters", {}))
        for r in d.get("runs", []):
            key = (r.get("size"), r["workload"]["name"], r.get("shape"), r.get("scheduler"))
            latest.pop(key, None)  # keep file order, the later one wins
            latest[key] = r
    out["runs"] = list(latest.values())
    out["clusters"] = clusters
    out["command"] = " ; ".join(str(d.get("command")) for d in docs)
    out["started"] = ", ".join(str(d.get("started")) for d in docs)
    out["elapsed_s"] = round(sum(float(d.get("elapsed_s") or 0) for d in docs), 1)
    out["sources"] = list(sources)
    return out


def ratios(by: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """ours / upstream for every metric of one (size, workload, shape)."""
    up, ours = by.get(UPSTREAM, {}), by.get(OURS, {})
    return {m: ratio(ours.get(m), up.get(m)) for m in METRICS}


def cpu_curves(
    doc: dict[str, Any], shape: str = "drain"
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """workload -> contender -> [(nodes, CPU ms per bound pod)] sorted by nodes (the
    ceiling left out: it does no scheduling)."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for (size, workload, sh), by in rows(doc).items():
        if sh != shape:
            continue
        for contender, row in by.items():
            if contender == CEILING or row["cpu_ms_per_pod"] is None:
                continue
            out.setdefault(workload, {}).setdefault(contender, []).append(
                (size, row["cpu_ms_per_pod"])
            )
    for by_c in out.values():
        for pts in by_c.values():
            pts.sort()
    return out


def not_held(doc: dict[str, Any]) -> list[str]:
    """For each workload and contender that failed at some size: the sizes it failed at
    and the largest size where it completed (what the machine could not hold, said)."""
    done: dict[tuple[str, str], set[int]] = {}
    failed: dict[tuple[str, str], set[int]] = {}
    for (size, workload, _), by in rows(doc).items():
        for contender, row in by.items():
            key = (workload, contender)
            if row["ok"]:
                done.setdefault(key, set()).add(size)
            if row["ok"] < row["runs"]:
                failed.setdefault(key, set()).add(size)
    out = []
    for (workload, contender), sizes in sorted(failed.items()):
        ok = sorted(done.get((workload, contender), set()))
        largest = f"largest size that ran: {ok[-1]} nodes" if ok else "no size ran"
        out.append(
            f"{workload} x {contender}: did not complete at "
            f"{', '.join(str(s) for s in sorted(sizes))} nodes ({largest})"
        )
    return out


def _num(v: Any, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _pair(by: dict[str, dict[str, Any]], metric: str, digits: int, scale: float = 1.0) -> str:
    """ "upstream / ours (ratio)" for one metric."""
    up = by.get(UPSTREAM, {}).get(metric)
    ours = by.get(OURS, {}).get(metric)
    r = ratio(ours, up)
    u = None if up is None else up * scale
    o = None if ours is None else ours * scale
    return f"{_num(u, digits)} / {_num(o, digits)} ({'-' if r is None else f'{r:.2f}x'})"


def pod_group_table(table: dict[Key, dict[str, dict[str, Any]]], size: int) -> list[str]:
    """The gang runs' pod-group attempt figures at one size, both schedulers side by
    side; no lines when no run of that size has them (every non-gang workload)."""
    have = [
        (workload, shape, by)
        for (sz, workload, shape), by in table.items()
        if sz == size and any(row.get(m) is not None for row in by.values() for m in PG_METRICS)
    ]
    if not have:
        return []
    lines = [
        f"Pod-group scheduling attempts at {size} nodes: the mean of "
        "`scheduler_podgroup_scheduling_attempt_duration_seconds` (sum over count, from the "
        "contender's start to the last measured bind) over result=scheduled, the label set "
        "of upstream's CI ceiling (8/10/12 ms for 1000/2000/3000 gangs of 3 at 5000 nodes, set "
        "before v1.37.2: bench/scrape.py), and over every result; and the attempts. "
        "Each cell: upstream / ours-async (ours / upstream).",
        "",
        "| workload | shape | mean ms, scheduled | attempts, scheduled | mean ms, all results "
        "| attempts, all results |",
        "|---|---|---|---|---|---|",
    ]
    for workload, shape, by in have:
        lines.append(
            f"| {workload} | {shape} | {_pair(by, 'pg_scheduled_ms', 2)} | "
            f"{_pair(by, 'pg_scheduled_attempts', 0)} | {_pair(by, 'pg_all_ms', 2)} | "
            f"{_pair(by, 'pg_attempts', 0)} |"
        )
    return lines


def pod_group_tables(doc: dict[str, Any]) -> list[str]:
    """`pod_group_table` for every size of a result file (what the suite prints at its
    end)."""
    table = rows(doc)
    out: list[str] = []
    for size in sorted({k[0] for k in table}):
        lines = pod_group_table(table, size)
        out += ["", *lines] if lines else []
    return out


def render(doc: dict[str, Any], source: str, images: Sequence[str] = ()) -> str:
    m, v, o = doc.get("machine", {}), doc.get("versions", {}), doc.get("options", {})
    pin = doc.get("pinning", {})
    table = rows(doc)
    contender_masks = sorted(
        {
            str(_get(r, ("process", "affinity")))
            for r in doc.get("runs", [])
            if _get(r, ("process", "affinity"))
        }
    )
    logged = sorted(
        {
            str(_get(r, ("process", "gomaxprocs_logged")))
            for r in doc.get("runs", [])
            if _get(r, ("process", "gomaxprocs_logged")) is not None
        }
    )
    lines = [
        "## Suite `pinned` (scheduler-bound)",
        "",
        f"- command: `{doc.get('command')}` (started {doc.get('started', '?')}, "
        f"{doc.get('elapsed_s', '?')} s in all; result file `{source}`)",
        f"- machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
        f"{m.get('memory_gib', '?')} GiB, Linux {m.get('kernel', '?')}, "
        f"Python {m.get('python', '?')}",
        "- versions: " + ", ".join(f"{k} `{val}`" for k, val in v.items()),
        f"- pinning: contender on CPU {pin.get('contender_cpus')} (GOMAXPROCS "
        f"{pin.get('contender_gomaxprocs')} for kube-scheduler), control plane and harness "
        f"on CPU {pin.get('control_plane_cpus')}; the contender's threads as the kernel "
        f"reported them during the runs: {', '.join(contender_masks) or '-'}; "
        f"GOMAXPROCS kube-scheduler logged at start: {', '.join(logged) or '-'}",
        f"- every contender: clientConnection qps {o.get('qps')}, burst {o.get('burst')}; "
        f"arrival shape at {o.get('arrival_rate')} creates/s; measured pod counts x"
        f"{o.get('pods_scale')}; nodes {'kwok-managed' if o.get('kwok_nodes') else 'static'}",
    ]
    loads = [r["host"]["loadavg_1m"] for r in doc.get("runs", []) if r.get("host")]
    if loads:
        lines.append(
            f"- load average (1 min) as each run started: {min(loads):.1f}..{max(loads):.1f} "
            "(above 2 means other work shared these cores: read single figures with care)"
        )
    lines += [
        "",
        "Clusters (one per size, reused by every run of that size):",
        "",
        "| nodes | control plane up s | nodes created s | idle control-plane CPU % | "
        "node leases renewed in the last 60 s |",
        "|---:|---:|---:|---|---:|",
    ]
    for size, info in sorted(doc.get("clusters", {}).items(), key=lambda kv: int(kv[0])):
        cp = info.get("control_plane") or {}
        cpu = ", ".join(f"{k} {val:g}" for k, val in (cp.get("cpu_percent") or {}).items())
        lease = f"{cp.get('node_leases_renewed_last_60s', '-')}/{cp.get('node_leases', '-')}"
        err = f" **{info['error']}**" if info.get("error") else ""
        lines.append(
            f"| {size} | {info.get('cluster_up_s', '-')} | {info.get('nodes_created_s', '-')} "
            f"| {cpu or '-'}{err} | {lease} |"
        )
    sizes = sorted({k[0] for k in table})
    for size in sizes:
        lines += [
            "",
            f"### {size} nodes",
            "",
            "Each cell: upstream / ours-async (ours / upstream). CPU ms per bound pod and "
            "p99: lower is better; pods/s: higher is better.",
            "",
            "| workload | shape | pods bound | CPU ms / pod | pods/s | ceiling pods/s | "
            "p99 ms | peak RSS MiB | victims / preemptor | start-up s |",
            "|---|---|---|---|---|---:|---|---|---|---|",
        ]
        for (sz, workload, shape), by in table.items():
            if sz != size:
                continue
            up, ours = by.get(UPSTREAM, {}), by.get(OURS, {})
            bound = (
                f"{_num(up.get('bound'), 0)}/{_num(up.get('created'), 0)} · "
                f"{_num(ours.get('bound'), 0)}/{_num(ours.get('created'), 0)}"
            )
            vic = (
                _pair(by, "victims_per_preemptor", 2)
                if up.get("victims") is not None or ours.get("victims") is not None
                else "-"
            )
            lines.append(
                f"| {workload} | {shape} | {bound} | {_pair(by, 'cpu_ms_per_pod', 2)} | "
                f"{_pair(by, 'throughput', 0)} | "
                f"{_num(by.get(CEILING, {}).get('throughput'), 0)} | "
                f"{_pair(by, 'p99', 0, 1000.0)} | {_pair(by, 'rss_mib', 0)} | {vic} | "
                f"{_pair(by, 'startup_s', 1)} |"
            )
        for (sz, workload, shape), by in table.items():
            up, ours = by.get(UPSTREAM, {}), by.get(OURS, {})
            if sz != size or (up.get("also_bound") is None and ours.get("also_bound") is None):
                continue
            lines += [
                "",
                f"{workload} ({shape}) creates preemptors at a fixed rate for as long as the run "
                f"lasts; counting those bound inside the window as well ("
                f"{_num(up.get('also_bound'), 0)} · {_num(ours.get('also_bound'), 0)}), CPU ms "
                f"per bound pod is {_pair(by, 'cpu_ms_per_any_bound_pod', 2)}.",
            ]
        pod_groups = pod_group_table(table, size)
        lines += ["", *pod_groups] if pod_groups else []
    errors = [(k, c, e) for k, by in table.items() for c, row in by.items() for e in row["errors"]]
    held = not_held(doc)
    if held:
        lines += ["", "What this machine could not hold:", ""]
        lines += [f"- {x}" for x in held]
    if errors:
        lines += ["", "Runs that did not complete (their figures are left out above):", ""]
        lines += [f"- {s} nodes {w} {sh} x {c}: {e}" for (s, w, sh), c, e in errors]
    if images:
        lines.append("")
        lines += [f"![{Path(i).stem}]({i})" for i in images]
    lines.append("")
    return "\n".join(lines)


COLORS = {UPSTREAM: "#4c72b0", OURS: "#dd8452", "ours-sync": "#c44e52"}


def plots(doc: dict[str, Any], folder: Path) -> list[Path]:
    """CPU ms per bound pod against node count (drain shape): SchedulingBasic on its
    own, and every workload in a grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = cpu_curves(doc)
    if not curves:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []

    def draw(ax: Any, workload: str) -> None:
        for contender, pts in sorted(curves.get(workload, {}).items()):
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, marker="o", label=contender, color=COLORS.get(contender))
        ax.set_xscale("log")
        sizes = sorted({x for pts in curves.get(workload, {}).values() for x, _ in pts})
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        top = max((y for pts in curves.get(workload, {}).values() for _, y in pts), default=1.0)
        ax.set_ylim(0, top * 1.15)
        ax.grid(alpha=0.3)

    if "SchedulingBasic" in curves:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        draw(ax, "SchedulingBasic")
        ax.set_xlabel("nodes")
        ax.set_ylabel("scheduler CPU ms per bound pod")
        ax.set_title("SchedulingBasic, drain, one pinned core each")
        ax.legend()
        fig.tight_layout()
        path = folder / "pinned-cpu-per-pod-basic.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        out.append(path)
    names = sorted(curves)
    cols = min(3, len(names))
    nrows = (len(names) + cols - 1) // cols
    width = max(4.2 * cols, 7.5)  # room for the title over a single panel
    fig, axes = plt.subplots(nrows, cols, figsize=(width, 3.2 * nrows + 0.4), squeeze=False)
    for i, w in enumerate(names):
        ax = axes[i // cols][i % cols]
        draw(ax, w)
        ax.set_title(w, fontsize=10)
        ax.set_xlabel("nodes", fontsize=8)
        ax.set_ylabel("CPU ms / bound pod", fontsize=8)
    for j in range(len(names), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Scheduler CPU per bound pod against node count (drain, pinned)", fontsize=11)
    fig.tight_layout()
    path = folder / "pinned-cpu-per-pod.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    out.append(path)
    return out
