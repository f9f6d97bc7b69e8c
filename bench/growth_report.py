"""How each contender's cost grows with the cluster: CPU per bound pod and peak RSS
against nodes and against pods, from pinned result files (issue 26's growth plot).

    python -m bench growth bench/results/pinned-A.json [pinned-B.json ...]
        [--workload SchedulingBasic] [--shape drain] [--out docs/benchmarks/growth.png]

Every run of the chosen workload and shape in the files is one point: its cluster's
nodes, the pods that cluster held while it ran (the cluster's `--init-pods` fill, the
workload's init pods and its measured pods) and the contender's CPU ms per bound pod and
peak RSS (medians when a point was run more than once; a later file's run of the same
nodes, pods and contender replaces an earlier one). `points` and `table` are pure
(unit-tested); `plot` draws the PNG with matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.stats import median, ratio

UPSTREAM, OURS = "upstream", "ours-async"
COLORS = {UPSTREAM: "#4c72b0", OURS: "#dd8452"}


@dataclass(frozen=True)
class Point:
    nodes: int
    pods: int
    cpu_ms_per_pod: float | None
    rss_mib: float | None


def _cluster_fill(cluster: Any) -> int:
    """The pods a pinned cluster was filled with before its workloads (`--init-pods`):
    the fill's record is a count or a mapping holding one."""
    fill = cluster.get("init_pods") if isinstance(cluster, dict) else None
    if isinstance(fill, int):
        return fill
    if isinstance(fill, dict):
        for key in ("created", "pods", "count"):
            if isinstance(fill.get(key), int):
                return int(fill[key])
    return 0


def points(
    docs: Sequence[dict[str, Any]], workload: str = "SchedulingBasic", shape: str = "drain"
) -> dict[str, list[Point]]:
    """contender -> points sorted by (nodes, pods); the raw-bind ceiling left out."""
    runs: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for doc in docs:
        clusters = doc.get("clusters", {})
        latest: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
        for r in doc.get("runs", []):
            w = r.get("workload", {})
            if w.get("name") != workload or r.get("shape") != shape or not r.get("ok"):
                continue
            if r.get("scheduler") not in (UPSTREAM, OURS):
                continue
            size = int(r["size"])
            pods = (
                _cluster_fill(clusters.get(str(size), clusters.get(size)))
                + int(w.get("init_pods", 0))
                + int(w.get("measured_pods", 0))
            )
            latest.setdefault((r["scheduler"], size, pods), []).append(r)
        runs.update(latest)  # a later file's runs of the same point replace earlier ones
    out: dict[str, list[Point]] = {}
    for (contender, nodes, pods), rs in runs.items():
        cpu = median(r.get("measured", {}).get("cpu_ms_per_pod") for r in rs)
        rss = median(r.get("process", {}).get("peak_rss_mib") for r in rs)
        out.setdefault(contender, []).append(Point(nodes, pods, cpu, rss))
    for pts in out.values():
        pts.sort(key=lambda p: (p.nodes, p.pods))
    return out


def _num(v: float | None, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def table(by: dict[str, list[Point]]) -> list[str]:
    """One markdown row per (nodes, pods): both contenders' CPU ms per bound pod and peak
    RSS, and ours / upstream for each."""
    keyed = {c: {(p.nodes, p.pods): p for p in pts} for c, pts in by.items()}
    keys = sorted({k for pts in keyed.values() for k in pts})
    lines = [
        "| nodes | pods | CPU ms/pod upstream | ours | ours/upstream "
        "| peak RSS MiB upstream | ours | ours/upstream |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k in keys:
        up, ours = keyed.get(UPSTREAM, {}).get(k), keyed.get(OURS, {}).get(k)
        up_cpu, our_cpu = (
            (up.cpu_ms_per_pod if up else None),
            (ours.cpu_ms_per_pod if ours else None),
        )
        up_rss, our_rss = (up.rss_mib if up else None), (ours.rss_mib if ours else None)
        lines.append(
            f"| {k[0]} | {k[1]} | {_num(up_cpu, 2)} | {_num(our_cpu, 2)} "
            f"| {_num(ratio(our_cpu, up_cpu), 3)} | {_num(up_rss, 0)} | {_num(our_rss, 0)} "
            f"| {_num(ratio(our_rss, up_rss), 2)} |"
        )
    return lines


def plot(by: dict[str, list[Point]], path: Path, title: str) -> Path:
    """Four panels: CPU ms per bound pod and peak RSS, each against nodes and against
    pods, one colour per contender (each point labelled with the other axis' count)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    panels = (
        (axes[0][0], "nodes", "cpu_ms_per_pod", "CPU ms per bound pod"),
        (axes[0][1], "pods", "cpu_ms_per_pod", "CPU ms per bound pod"),
        (axes[1][0], "nodes", "rss_mib", "peak RSS, MiB"),
        (axes[1][1], "pods", "rss_mib", "peak RSS, MiB"),
    )
    for ax, x_name, y_name, y_label in panels:
        other = "pods" if x_name == "nodes" else "nodes"
        for contender, pts in sorted(by.items()):
            shown = sorted(
                (p for p in pts if getattr(p, y_name) is not None),
                key=lambda p: (getattr(p, x_name), getattr(p, other)),
            )
            if not shown:
                continue
            xs = [getattr(p, x_name) for p in shown]
            ys = [getattr(p, y_name) for p in shown]
            # points, not a line: neighbours on one axis may differ on the other
            ax.plot(
                xs, ys, marker="o", linestyle="none", label=contender, color=COLORS.get(contender)
            )
            for p, x, y in zip(shown, xs, ys, strict=True):
                ax.annotate(
                    f"{getattr(p, other)} {other}",
                    (x, y),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=7,
                )
        ax.set_xscale("log")
        ax.set_xlabel(x_name)
        ax.set_ylabel(y_label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0][0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
