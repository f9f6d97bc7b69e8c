"""bench.report: medians over repetitions, ratio table rendering, docs generation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import report


def _run(
    workload: str,
    scheduler: str,
    tp: float,
    p99: float,
    victims: int | None = None,
    ok: bool = True,
    rep: int = 0,
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "workload": {"name": workload, "nodes": 10, "init_pods": 40, "measured_pods": 100},
        "scheduler": scheduler,
        "rep": rep,
        "ok": ok,
        "error": None if ok else "only 3/100 measured pods bound in 60s",
        "measured": {
            "throughput": tp,
            "create_rate": 900.0,
            "bound": 100,
            "created": 100,
            "latency_s": {"p50": p99 / 2, "p90": p99 * 0.9, "p99": p99},
        },
        "process": {"cpu_s_measured": 1.5, "cpu_s_total": 2.0, "peak_rss_mib": 80.0},
        "api_calls": {"per_scheduled_pod": 2.0},
        "timeline": [(0.0, 0), (0.25, 40), (0.5, 100)],
    }
    if victims is not None:
        r["preemption"] = {
            "victims": {"total": victims, "mean": victims / 10},
            "preemptors_bound": 10,
            "time_to_bind_s": {"p50": 0.5, "p99": 1.0},
        }
    return r


def _doc(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "suite": "smoke",
        "command": "python -m bench run --suite smoke",
        "started": "20260101T000000Z",
        "elapsed_s": 12.0,
        "machine": {"cpu": "Test CPU", "cores": 2, "memory_gib": 24, "kernel": "6", "python": "3"},
        "versions": {"kube-scheduler": "v1.37.2"},
        "options": {"qps": 5000, "burst": 5000, "concurrency": 64, "repeat": 3},
        "skipped": {},
        "runs": runs,
    }


RUNS = [
    _run("PreemptionBasic", "upstream", 100.0, 2.0, victims=30, rep=0),
    _run("PreemptionBasic", "upstream", 120.0, 1.0, victims=30, rep=1),
    _run("PreemptionBasic", "upstream", 80.0, 3.0, victims=30, rep=2),
    _run("PreemptionBasic", "ours-async", 200.0, 0.5, victims=27),
    _run("PreemptionBasic", "ours-async", 1.0, 99.0, victims=1, ok=False, rep=1),
    _run("PreemptionBasic", "ceiling", 400.0, 0.1),
]
# the ceiling's pods are created before it starts: it reports no latency (bench.runner)
RUNS[-1]["measured"]["latency_s"] = {"p50": None, "p90": None, "p99": None}


def test_summary_takes_medians_of_complete_runs_only() -> None:
    s = report.summarize(RUNS)
    up = s[("PreemptionBasic", "upstream")]
    assert up["runs"] == 3 and up["ok"] == 3
    assert up["throughput"] == 100.0 and up["p99"] == 2.0
    ours = s[("PreemptionBasic", "ours-async")]
    assert ours["runs"] == 2 and ours["ok"] == 1 and ours["throughput"] == 200.0
    assert ours["errors"] == ["only 3/100 measured pods bound in 60s"]


def test_ratios_against_upstream_and_the_ceiling() -> None:
    r = report.ratios(report.summarize(RUNS), "PreemptionBasic")
    assert r["ours-async"]["throughput_vs_upstream"] == pytest.approx(2.0)
    assert r["ours-async"]["p99_vs_upstream"] == pytest.approx(0.25)
    assert r["ours-async"]["victims_vs_upstream"] == pytest.approx(0.9)
    assert r["ours-async"]["of_ceiling"] == pytest.approx(0.5)
    assert r["upstream"]["of_ceiling"] == pytest.approx(0.25)
    assert r["ceiling"]["of_ceiling"] == pytest.approx(1.0)
    assert "throughput_vs_upstream" not in r["upstream"]


def test_rendered_tables() -> None:
    md = report.render_suite(_doc(RUNS), "bench/results/x.json", ["benchmarks/smoke-x.png"])
    assert "`python -m bench run --suite smoke`" in md and "bench/results/x.json" in md
    assert "Test CPU, 2 cores" in md
    row = next(
        line
        for line in md.splitlines()
        if line.startswith("| PreemptionBasic | 10/40/100 | upstream |")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    # workload, size, scheduler, runs ok, creates/s, pods/s, of ceiling, p50, p90, p99,
    # victims, preemptor p50/p99, CPU, RSS, calls/pod
    assert cells[3:10] == ["3/3", "900", "100.0", "25%", "1000", "1800", "2000"]
    assert cells[10] == "30 (3.00)" and cells[11] == "500/1000"
    assert cells[12:] == ["1.50", "80", "2.00"]
    assert "| PreemptionBasic | ours-async | 2.00x | 0.25x | 0.90x |" in md
    assert "- PreemptionBasic x ours-async: only 3/100" in md
    assert "![smoke-x](benchmarks/smoke-x.png)" in md
    ceiling = next(line for line in md.splitlines() if "| ceiling |" in line)
    assert "| - | - | - |" in ceiling  # the ceiling has no latency of its own


def test_no_ratio_table_without_ours() -> None:
    md = report.render_suite(_doc([r for r in RUNS if r["scheduler"] != "ours-async"]), "f")
    assert "Ratios, ours / upstream" not in md


def test_write_docs_makes_page_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    f = tmp_path / "smoke-1.json"
    f.write_text(json.dumps(_doc(RUNS)))
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    written = report.write_docs([f], page, tmp_path / "docs" / "benchmarks")
    assert written[0] == page
    pngs = written[1:]
    assert {p.name for p in pngs} == {
        "smoke-timeline.png",
        "smoke-throughput.png",
        "smoke-p99.png",
        "smoke-cpu.png",
    }
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    text = page.read_text()
    assert text.startswith("# Benchmarks") and "](benchmarks/smoke-throughput.png)" in text


def test_latest_results_picks_the_newest_file_per_suite(tmp_path: Path) -> None:
    for name, suite in [
        ("smoke-1.json", "smoke"),
        ("smoke-2.json", "smoke"),
        ("default-1.json", "default"),
    ]:
        (tmp_path / name).write_text(json.dumps({"suite": suite, "runs": []}))
    assert [p.name for p in report.latest_results(tmp_path)] == ["smoke-2.json", "default-1.json"]
