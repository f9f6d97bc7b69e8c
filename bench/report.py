"""From result files to docs/benchmarks.md and docs/benchmarks/*.png.

`summarize` and `render_markdown` are pure (unit-tested); `write_docs` does the I/O and
the matplotlib plots. Every figure in the generated page comes from a result file: the
page names the file, the command, the machine and the versions."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench import pinned_report
from bench.stats import median, ratio

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
IMAGES = ROOT / "docs" / "benchmarks"
ORDER = ("upstream", "ours-async", "ours-sync", "ceiling")
OURS = ("ours-async", "ours-sync")


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


FIELDS: dict[str, tuple[str, ...]] = {
    "throughput": ("measured", "throughput"),
    "p50": ("measured", "latency_s", "p50"),
    "p90": ("measured", "latency_s", "p90"),
    "p99": ("measured", "latency_s", "p99"),
    "victims": ("preemption", "victims", "total"),
    "victims_per_preemptor": ("preemption", "victims", "mean"),
    "preemptors_bound": ("preemption", "preemptors_bound"),
    "preemptor_p50": ("preemption", "time_to_bind_s", "p50"),
    "preemptor_p99": ("preemption", "time_to_bind_s", "p99"),
    "cpu_s": ("process", "cpu_s_measured"),
    "cpu_s_total": ("process", "cpu_s_total"),
    "rss_mib": ("process", "peak_rss_mib"),
    "calls_per_pod": ("api_calls", "per_scheduled_pod"),
    "bound": ("measured", "bound"),
    "create_rate": ("measured", "create_rate"),
    "created": ("measured", "created"),
}


def summarize(runs: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Medians over the repetitions of each (workload, scheduler). Failed runs count in
    `runs`/`ok`; their figures are left out of the medians (a run that timed out has a
    throughput, but not one comparable to complete runs)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        key = (r["workload"]["name"], r["scheduler"])
        groups.setdefault(key, []).append(r)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, rs in groups.items():
        good = [r for r in rs if r.get("ok")]
        s: dict[str, Any] = {
            "runs": len(rs),
            "ok": len(good),
            "errors": [r["error"] for r in rs if r.get("error")],
        }
        s["by_call"] = (_get(good[0], "api_calls", "by_call") or {}) if good else {}
        for name, path in FIELDS.items():
            s[name] = median(_get(r, *path) for r in good)
            s[name + "_all"] = [_get(r, *path) for r in good]
        out[key] = s
    return out


def ratios(summary: dict[tuple[str, str], dict[str, Any]], workload: str) -> dict[str, Any]:
    """ours/upstream for throughput, p99 and victims; every contender's fraction of the
    ceiling's throughput."""
    up = summary.get((workload, "upstream"), {})
    ceil = summary.get((workload, "ceiling"), {})
    out: dict[str, Any] = {}
    for s in ORDER:
        row = summary.get((workload, s))
        if row is None:
            continue
        r: dict[str, Any] = {"of_ceiling": ratio(row.get("throughput"), ceil.get("throughput"))}
        if s in OURS:
            r["throughput_vs_upstream"] = ratio(row.get("throughput"), up.get("throughput"))
            r["p99_vs_upstream"] = ratio(row.get("p99"), up.get("p99"))
            r["victims_vs_upstream"] = ratio(row.get("victims"), up.get("victims"))
        out[s] = r
    return out


def _f(v: Any, digits: int = 1, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}{unit}"
    return f"{v}{unit}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f}%"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def render_suite(doc: dict[str, Any], source: str, images: Sequence[str] = ()) -> str:
    summary = summarize(doc["runs"])
    workloads = list(dict.fromkeys(r["workload"]["name"] for r in doc["runs"]))
    schedulers = [s for s in ORDER if any(k[1] == s for k in summary)]
    m, v, o = doc.get("machine", {}), doc.get("versions", {}), doc.get("options", {})
    lines = [
        f"## Suite `{doc['suite']}`",
        "",
        f"- command: `{doc['command']}` (started {doc.get('started', '?')}, "
        f"{doc.get('elapsed_s', '?')} s in all; result file `{source}`)",
        f"- machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
        f"{m.get('memory_gib', '?')} GiB, Linux {m.get('kernel', '?')}, "
        f"Python {m.get('python', '?')}",
        "- versions: " + ", ".join(f"{k} `{val}`" for k, val in v.items()),
        f"- every contender: clientConnection qps {o.get('qps')}, burst {o.get('burst')}; "
        f"harness creates and ceiling binds {o.get('concurrency')} in flight; "
        f"{o.get('repeat')} repetition(s), figures are medians",
    ]
    busy = [r for r in doc["runs"] if (r.get("host") or {}).get("other_apiservers")]
    if busy:
        loads = [r["host"]["loadavg_1m"] for r in doc["runs"] if r.get("host")]
        lines.append(
            f"- **shared machine**: in {len(busy)} of {len(doc['runs'])} runs other clusters "
            "(other people's work) were running on the same cores; load average at the start "
            f"of measuring {min(loads):.1f}..{max(loads):.1f}. Compare within a repetition, "
            "and read single figures with care"
        )
    for s, why in (doc.get("skipped") or {}).items():
        lines.append(f"- {s} not run: {why}")
    lines += [
        "",
        "| workload | nodes/init/measured | scheduler | runs ok | creates/s | pods/s | "
        "of ceiling | p50 ms | p90 ms | p99 ms | victims (per preemptor) | "
        "preemptor p50/p99 ms | CPU s | peak RSS MiB | API calls/pod |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    wl = {r["workload"]["name"]: r["workload"] for r in doc["runs"]}
    for w in workloads:
        rat = ratios(summary, w)
        size = f"{wl[w]['nodes']}/{wl[w]['init_pods']}/{wl[w]['measured_pods']}"
        for s in schedulers:
            row = summary.get((w, s))
            if row is None:
                continue
            vic = (
                "-"
                if row["victims"] is None
                else f"{row['victims']:.0f} ({_f(row['victims_per_preemptor'], 2)})"
            )
            pre = (
                "-"
                if row["preemptor_p50"] is None
                else f"{_ms(row['preemptor_p50'])}/{_ms(row['preemptor_p99'])}"
            )
            lines.append(
                f"| {w} | {size} | {s} | {row['ok']}/{row['runs']} | "
                f"{_f(row['create_rate'], 0)} | {_f(row['throughput'])} | "
                f"{_pct(rat[s]['of_ceiling'])} | "
                f"{_ms(row['p50'])} | {_ms(row['p90'])} | {_ms(row['p99'])} | {vic} | {pre} | "
                f"{_f(row['cpu_s'], 2)} | {_f(row['rss_mib'], 0)} | "
                f"{_f(row['calls_per_pod'], 2)} |"
            )
    ours = [s for s in OURS if s in schedulers]
    if ours and "upstream" in schedulers:
        lines += [
            "",
            "Ratios, ours / upstream (throughput: higher is better; p99 and "
            "victims: lower is better):",
            "",
            "| workload | scheduler | throughput | p99 latency | victims |",
            "|---|---|---:|---:|---:|",
        ]
        for w in workloads:
            rat = ratios(summary, w)
            for s in ours:
                if s in rat:
                    r = rat[s]
                    lines.append(
                        f"| {w} | {s} | {_x(r['throughput_vs_upstream'])} | "
                        f"{_x(r['p99_vs_upstream'])} | {_x(r['victims_vs_upstream'])} |"
                    )
    lines += [
        "",
        "API calls of each contender, by verb and resource (first complete "
        "repetition; the informers' LIST/WATCH calls are counted once each):",
        "",
        "| workload | scheduler | calls |",
        "|---|---|---|",
    ]
    for w in workloads:
        for s in schedulers:
            row = summary.get((w, s))
            if row and row["by_call"]:
                top = sorted(row["by_call"].items(), key=lambda kv: -kv[1])
                main = [f"{k} {v}" for k, v in top if not k.startswith(("watch ", "list "))]
                rest = sum(v for k, v in top if k.startswith(("watch ", "list ")))
                lines.append(f"| {w} | {s} | {', '.join(main[:6])}; list/watch {rest} |")
    errors = [(k, e) for k, row in summary.items() for e in row["errors"]]
    if errors:
        lines += ["", "Runs that did not complete:", ""]
        lines += [f"- {w} x {s}: {e}" for (w, s), e in errors]
    if images:
        lines.append("")
        lines += [f"![{Path(i).stem}]({i})" for i in images]
    lines.append("")
    return "\n".join(lines)


HEADER = """# Benchmarks

Generated by `python -m bench report` from the newest result file of each suite in
bench/results/ (that one command rewrites this page and every figure in
docs/benchmarks/); do not edit by hand. `python -m bench run --suite pinned`, `--suite
smoke` or `--suite default` measure anew and regenerate it at the end.

## The scheduler-bound ("pinned") suite

`python -m bench run --suite pinned` (bench/pinned.py; `python -m bench list` shows the
matrix and what it costs per size: runs, pods scheduled, pods the harness creates; the
wall time follows those counts, `--pods-scale 0.5` halves the measured ones). The
figure that compares schedulers is **scheduler CPU milliseconds per bound pod**, beside
pods/s and latency under an equal CPU budget:
- **pinning**: every contender (upstream kube-scheduler, ours-async, the raw-bind ceiling
  `python -m bench.binder`) runs on one core of its own (CPU 1, set in the child before
  exec; kube-scheduler also gets GOMAXPROCS=1); etcd, kube-apiserver,
  kube-controller-manager, kwok and the harness run on the other (CPU 0). The result
  file records the plan and the masks the kernel reported for every thread;
- **one cluster per size** (500, 1000, 5000 kwok nodes, created by the harness), reused
  by every workload and contender; before each run the harness restores the workload's
  init pods exactly (victims recreated, everything else deleted) and each run starts a
  fresh contender process;
- **drain**: all measured pods exist before the contender starts. pods/s = (bound - 1)
  / (last bind - first bind), for every contender alike; CPU ms per pod = the
  contender's user+system CPU (psutil, sampled every 20 ms, interpolated) between the
  first and the last bind / (bound - 1); p50/p99 = bind seen - contender start (no pod
  waited for its create); **start-up s** = contender start to first bind (exec, informer
  sync, first cycle), kept out of the per-pod figures. In the preemption workloads
  the window opens at the contender's first victim deletion when that comes before
  its first bind (upstream decides its preemptions before binding any preemptor), and
  then pods/s and CPU per pod divide by every bound pod;
- **arrival**: the contender binds a warm-up pod, then the measured pods are created at
  a fixed rate (`--rate`, default 100/s: below what one control-plane core sustains);
  pods/s = bound / (last bind - first create); CPU per pod = CPU over that window /
  bound; p50/p99 = bind seen - create sent;
- **nodes**: kwok-managed (kwok's stages here: node-initialize, pod-ready,
  pod-complete, pod-delete): kwok marks every bound pod Running, one status write per
  pod that both schedulers then receive as an update, as from a kubelet; it keeps no
  node leases and writes no node heartbeats (the clusters table counts the leases and
  shows the idle control plane's CPU at each size). `--no-kwok-nodes` makes static
  nodes, as scheduler_perf's (no kubelet, no pod status writes);
- **peak RSS**: the kernel's VmHWM of the contender; **victims / preemptor**: pods
  deleted in the run (init pods only: nothing else deletes them), charged to the
  preemptor bound on the victim's node;
- workloads: upstream's scheduler_perf test cases (test/integration/scheduler_perf of
  v1.37.2; bench/pinned_workloads.py cites the file and template of each, and says
  where and why the shapes differ), plus **Memory**: 5000 nodes with 20000 pods in the
  scheduler's cache (15000 bound before it starts, 5000 drained by it);
- subsets: `--sizes 500,1000`, `--workloads SchedulingBasic,...`, `--schedulers
  upstream,ours-async`, `--shapes drain`, `--pods-scale 0.5`, `--no-memory`; the
  terminal shows which run of how many, elapsed time and pods bound so far. Several
  pinned result files (sizes run apart, one workload rerun) make one section:
  `python -m bench report bench/results/pinned-A.json bench/results/pinned-B.json`
  (a later run of the same size, workload, shape and contender replaces an earlier
  one); sections of suites whose result files are not given are kept as they were;
- the figures: `docs/benchmarks/pinned-cpu-per-pod-basic.png` (SchedulingBasic) and
  `docs/benchmarks/pinned-cpu-per-pod.png` (every workload), CPU ms per bound pod
  against node count, drain shape.

## The end-to-end suites (smoke, default)

How the figures are measured (bench/runner.py):
- every run starts a fresh local cluster (etcd, kube-apiserver, kube-controller-manager,
  kwok; docs/local-control-plane.md), creates the nodes and the init pods already bound
  (spec.nodeName), then starts the contender as a plain process with its own
  ServiceAccount token, and binds one warm-up pod before measuring;
- **creates/s**: how fast the harness sent the measured pods' creates (64 in flight,
  admin identity, no client-side limit): it must stay above pods/s;
- **pods/s**: measured pods / (last bind seen - first create sent), from a watch on the
  harness side with monotonic timestamps; the **ceiling** is a raw binder
  (`python -m bench.binder`, no scheduling) binding pre-created pods round-robin through
  pods/binding: its figure is (binds - 1) / (last - first bind seen);
- **p50/p90/p99**: create sent to bind seen, per measured pod;
- **victims**: pods deleted during the run (all deletions are preemptions: nothing else
  deletes); per preemptor: charged to the preemptor bound on the victim's node;
- **CPU s**: the contender's user+system CPU during the measured window (psutil);
  **peak RSS**: the kernel's VmHWM of the process;
- **API calls/pod**: every request the contender made in its lifetime (start, informer
  LIST/WATCH, binds, events, status patches, deletes), counted in the kube-apiserver's
  audit log filtered to the contender's user (apiserver_request_total has no user
  label), divided by the pods it bound (measured, churn, warm-up).

Workloads (bench/workloads.py; modelled on test/integration/scheduler_perf):
- **SchedulingBasic**: plain 100m/500Mi pods on 4-CPU/32Gi/110-pod nodes;
- **SchedulingMixed**: measured pods take turns among plain, required node affinity
  (two of three zones), required pod anti-affinity on hostname (groups of at most a
  quarter of the nodes), zone topology spread (maxSkew 1, DoNotSchedule), and a
  toleration of the taint a tenth of the nodes carry;
- **PreemptionBasic**: four 900m priority-0 pods per node; measured pods are 3000m
  priority-10000 preemptors, each must evict three;
- **PreemptionAsync**: as upstream's: the same full nodes, 3000m preemptors created at
  5/s while ordinary 100m pods are measured;
- **Unschedulable**: 9-CPU pods that fit nowhere, created at 5/s, alongside measured
  plain pods.

The `smoke` suite (50 nodes) is for a quick check of everything, about 10 s per run
(most of it starting the cluster); `default` is sized for a 2-core machine: 500 nodes,
as upstream's 500Nodes variants. Upstream's 5000-node sizes were not run on this machine
(`--nodes 5000` scales any suite, with the init pods in proportion).

"""


def render_suites_table() -> str:
    """The suites as bench/workloads.py defines them (`--nodes`/`--pods` rescale them)."""
    from bench.workloads import SUITES

    lines = [
        "| suite | workload | nodes | init pods | measured pods | churn | deadline |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for name, ws in SUITES.items():
        for w in ws:
            churn = (
                f"{w.churn_role} {w.churn_per_second:g}/s, at most {w.churn_max}"
                if w.churn_role
                else "-"
            )
            lines.append(
                f"| {name} | {w.name} | {w.nodes} | {w.init_pods} | "
                f"{w.measured_pods} | {churn} | {w.timeout_s:.0f} s |"
            )
    return "\n".join(lines) + "\n\n"


def _is_pinned(doc: dict[str, Any]) -> bool:
    return str(doc.get("suite")) == "pinned"


def render_markdown(docs: Sequence[tuple[dict[str, Any], str, Sequence[str]]]) -> str:
    return (
        HEADER
        + render_suites_table()
        + "\n".join(
            pinned_report.render(d, src, imgs) if _is_pinned(d) else render_suite(d, src, imgs)
            for d, src, imgs in docs
        )
    )


def latest_results(folder: Path) -> list[Path]:
    """The newest result file of each suite in `folder`. A pinned run with `--init-pods`
    (start-up at scale, usually one size and one workload) never stands for the pinned
    suite: its figures are written up by hand in docs/performance.md."""
    newest: dict[str, Path] = {}
    for p in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if (doc.get("options") or {}).get("init_pods"):
            continue
        newest[doc.get("suite", p.stem)] = p  # names sort by their UTC timestamp
    return sorted(newest.values(), key=suite_order)


def suite_order(path: Path) -> tuple[int, str]:
    """pinned first (the scheduler-bound comparison), then smoke, then default, then any
    other suite by name."""
    try:
        name = str(json.loads(path.read_text()).get("suite", path.stem))
    except (OSError, ValueError):
        name = path.stem
    return ({"pinned": 0, "smoke": 1, "default": 2}.get(name, 9), name)


def _plots(doc: dict[str, Any], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(doc["runs"])
    workloads = list(dict.fromkeys(r["workload"]["name"] for r in doc["runs"]))
    schedulers = [s for s in ORDER if any(k[1] == s for k in summary)]
    colors = {
        "upstream": "#4c72b0",
        "ours-async": "#dd8452",
        "ours-sync": "#c44e52",
        "ceiling": "#8c8c8c",
    }
    folder.mkdir(parents=True, exist_ok=True)
    out = []

    def bars(
        metric: str, title: str, ylabel: str, scale: float, who: Sequence[str], name: str
    ) -> None:
        fig, ax = plt.subplots(figsize=(9, 4.2))
        width = 0.8 / max(1, len(who))
        for j, s in enumerate(who):
            xs, ys, lo, hi = [], [], [], []
            for i, w in enumerate(workloads):
                row = summary.get((w, s))
                if not row or row[metric] is None:
                    continue
                vals = [x * scale for x in row[metric + "_all"] if x is not None]
                med = row[metric] * scale
                xs.append(i + (j - (len(who) - 1) / 2) * width)
                ys.append(med)
                lo.append(med - min(vals))
                hi.append(max(vals) - med)
            if xs:
                ax.bar(xs, ys, width, label=s, color=colors.get(s), yerr=[lo, hi], capsize=3)
        ax.set_xticks(range(len(workloads)), workloads, rotation=15)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title} (suite {doc['suite']}; median, bars = min..max)")
        ax.legend()
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        path = folder / f"{doc['suite']}-{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        out.append(path)

    # measured pods bound over time, first complete repetition of each contender
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for r in doc["runs"]:
        if r.get("ok") and r.get("timeline"):
            first.setdefault((r["workload"]["name"], r["scheduler"]), r)
    if first:
        cols = min(3, len(workloads))
        rows = (len(workloads) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
        for i, w in enumerate(workloads):
            ax = axes[i // cols][i % cols]
            for s in schedulers:
                r = first.get((w, s))
                if r:
                    xs, ys = zip(*r["timeline"], strict=True)
                    ax.plot(xs, ys, label=s, color=colors.get(s))
            ax.set_title(w, fontsize=10)
            ax.set_xlabel("s after first create (ceiling: first bind)", fontsize=8)
            ax.set_ylabel("measured pods bound", fontsize=8)
            ax.grid(alpha=0.3)
        for j in range(len(workloads), rows * cols):
            axes[j // cols][j % cols].axis("off")
        axes[0][0].legend(fontsize=8)
        fig.suptitle(f"Measured pods bound over time (suite {doc['suite']})")
        fig.tight_layout()
        path = folder / f"{doc['suite']}-timeline.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        out.append(path)

    bars("throughput", "Measured pods per second", "pods/s", 1.0, schedulers, "throughput")
    sched_only = [s for s in schedulers if s != "ceiling"]
    bars("p99", "Create-to-bind latency, p99", "ms", 1000.0, sched_only, "p99")
    bars("cpu_s", "Scheduler CPU seconds in the measured window", "CPU s", 1.0, schedulers, "cpu")
    return out


def write_docs(files: Sequence[Path], docs_path: Path = DOCS, images: Path = IMAGES) -> list[Path]:
    parts = []
    written: list[Path] = []
    loaded = []
    for f in files:
        try:
            src = str(f.resolve().relative_to(ROOT))
        except ValueError:
            src = str(f)
        loaded.append((json.loads(f.read_text()), src))
    pinned = [(d, src) for d, src in loaded if _is_pinned(d)]
    if len(pinned) > 1:
        # several pinned result files (sizes run apart, a rerun of one workload) make
        # one section: the page has one table per size
        merged = pinned_report.merge([d for d, _ in pinned], [src for _, src in pinned])
        loaded = [(d, src) for d, src in loaded if not _is_pinned(d)]
        loaded.insert(0, (merged, ", ".join(src for _, src in pinned)))
    for doc, src in loaded:
        if not doc.get("runs"):
            continue
        pngs = pinned_report.plots(doc, images) if _is_pinned(doc) else _plots(doc, images)
        written += pngs
        rel = [str(p.relative_to(docs_path.parent)) for p in pngs]
        parts.append((doc, src, rel))
    text = render_markdown(parts)
    if docs_path.exists():
        have = {str(d.get("suite")) for d, _, _ in parts}
        kept = [
            body for name, body in suite_sections(docs_path.read_text()).items() if name not in have
        ]
        if kept:
            text = text.rstrip("\n") + "\n\n" + "\n".join(kept)
    docs_path.write_text(text)
    return [docs_path, *written]


def suite_sections(markdown: str) -> dict[str, str]:
    """The `## Suite `NAME`` sections of a generated page, by suite name. A suite whose
    result file is not at hand keeps its section (result files are not committed, and a
    page regenerated on another checkout must not lose what was measured before)."""
    out: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in markdown.splitlines():
        if line.startswith("## "):
            if name is not None:
                out[name] = "\n".join(lines).rstrip("\n") + "\n"
            name, lines = None, []
            if line.startswith("## Suite `"):
                name = line.split("`")[1]
        if name is not None:
            lines.append(line)
    if name is not None:
        out[name] = "\n".join(lines).rstrip("\n") + "\n"
    return out
