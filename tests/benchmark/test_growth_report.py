"""bench.growth_report: points from pinned result files, the table, the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import growth_report as gr


def _run(
    contender: str,
    size: int,
    cpu: float,
    rss: float,
    *,
    workload: str = "SchedulingBasic",
    ok: bool = True,
    init: int = 1000,
    measured: int = 500,
) -> dict[str, Any]:
    return {
        "size": size,
        "scheduler": contender,
        "shape": "drain",
        "ok": ok,
        "workload": {"name": workload, "init_pods": init, "measured_pods": measured},
        "measured": {"cpu_ms_per_pod": cpu},
        "process": {"peak_rss_mib": rss},
    }


def test_points_count_the_cluster_fill_and_keep_the_later_file() -> None:
    first = {
        "clusters": {"5000": {"init_pods": {"created": 150000, "seconds": 500}}},
        "runs": [
            _run("upstream", 5000, 30.0, 5000.0),
            _run("ours-async", 5000, 2.0, 1500.0),
            _run("ours-async", 5000, 9.0, 9.0, ok=False),  # a failed run stays out
            _run("ours-async", 5000, 7.0, 7.0, workload="TopologySpreading"),
            _run("ceiling", 5000, 0.1, 50.0),
        ],
    }
    later = {
        "clusters": {"1000": {}, "5000": {"init_pods": 150000}},
        "runs": [
            _run("ours-async", 5000, 1.0, 1400.0),
            _run("upstream", 1000, 10.0, 800.0),
            _run("ours-async", 1000, 0.5, 300.0),
        ],
    }
    by = gr.points([first, later])
    assert sorted(by) == ["ours-async", "upstream"]
    assert by["ours-async"] == [
        gr.Point(1000, 1500, 0.5, 300.0),
        gr.Point(5000, 151500, 1.0, 1400.0),
    ]
    assert by["upstream"] == [
        gr.Point(1000, 1500, 10.0, 800.0),
        gr.Point(5000, 151500, 30.0, 5000.0),
    ]


def test_table_gives_ours_over_upstream_and_a_dash_for_a_missing_side() -> None:
    by = {
        "upstream": [gr.Point(5000, 151500, 30.0, 5000.0)],
        "ours-async": [gr.Point(5000, 151500, 1.5, 1500.0), gr.Point(15000, 20000, 2.0, None)],
    }
    rows = gr.table(by)
    assert rows[2] == "| 5000 | 151500 | 30.00 | 1.50 | 0.050 | 5000 | 1500 | 0.30 |"
    assert rows[3] == "| 15000 | 20000 | - | 2.00 | - | - | - | - |"


def test_plot_writes_a_png(tmp_path: Path) -> None:
    by = {
        "upstream": [gr.Point(1000, 1500, 10.0, 800.0), gr.Point(5000, 151500, 30.0, 5000.0)],
        "ours-async": [gr.Point(1000, 1500, 0.5, 300.0), gr.Point(5000, 151500, 1.0, None)],
    }
    out = gr.plot(by, tmp_path / "g" / "growth.png", "t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
