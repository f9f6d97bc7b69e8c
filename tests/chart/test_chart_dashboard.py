"""The chart's Grafana dashboard queries only metrics (and labels) that the scheduler
really exports: checked against scheduler.metrics' own registry, no helm needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

from scheduler.metrics import SchedulerMetrics

DASHBOARD = (
    Path(__file__).resolve().parents[2]
    / "charts"
    / "kube-async-scheduler"
    / "dashboards"
    / "kube-async-scheduler.json"
)
# labels added by the scrape, not by the scheduler
SCRAPE_LABELS = {"job", "instance", "namespace", "pod", "service", "le"}


def exported() -> tuple[set[str], dict[str, set[str]]]:
    registry = SchedulerMetrics().registry
    names: set[str] = set()
    labels: dict[str, set[str]] = {}
    for collector, sample_names in registry._collector_to_names.items():
        names.update(sample_names)
        for n in sample_names:
            labels[n] = set(getattr(collector, "_labelnames", ()))
    return names, labels


def expressions() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_dashboard_metrics_exist() -> None:
    names, _ = exported()
    used = {m for e in expressions() for m in re.findall(r"\bscheduler_[a-z_]+", e)}
    assert used, "the dashboard queries no scheduler metric"
    assert used <= names, f"not exported by scheduler.metrics: {sorted(used - names)}"


def test_dashboard_labels_exist() -> None:
    _, labels = exported()
    for e in expressions():
        metrics = set(re.findall(r"\bscheduler_[a-z_]+", e))
        grouped = {lbl.strip() for g in re.findall(r"by \(([^)]*)\)", e) for lbl in g.split(",")}
        selected = set(re.findall(r"([a-z_]+)=~?\"", e))
        for metric in metrics:
            unknown = (grouped | selected) - labels[metric] - SCRAPE_LABELS
            assert not unknown, f"{metric} has no label(s) {sorted(unknown)} in: {e}"
