"""Guard: every metric of SchedulerMetrics is used by the scheduler outside metrics.py.

A metric registered and never recorded is exported as a series that always reads zero
(issue 15 found eight). This is a static check: each collector attribute of
SchedulerMetrics must appear as ``.attribute`` (not assigned) in some module of the
scheduler package other than metrics.py; tests do not count. Whether the recording moves
the sample is shown per metric elsewhere (test_metrics_wiring.py and each component's
tests).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client.metrics import MetricWrapperBase

from scheduler.metrics import SchedulerMetrics

PACKAGE = Path(__file__).resolve().parents[2] / "scheduler"


def metric_attributes() -> list[str]:
    metrics = SchedulerMetrics()
    return sorted(n for n, v in vars(metrics).items() if isinstance(v, MetricWrapperBase))


def code_lines() -> list[str]:
    """Every non-comment line of the package, metrics.py left out."""
    lines: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "metrics.py":
            continue
        for line in path.read_text().splitlines():
            code = line.split("#", 1)[0]
            if code.strip():
                lines.append(code)
    return lines


def test_the_guard_sees_the_metrics_and_the_package() -> None:
    # the check below must not pass vacuously
    assert len(metric_attributes()) >= 20
    assert "schedule_attempts" in metric_attributes()
    assert any(".schedule_attempts." in line for line in code_lines())


@pytest.mark.parametrize("attribute", metric_attributes())
def test_every_metric_is_recorded_somewhere(attribute: str) -> None:
    # ".name" not followed by an assignment ("x.name = ..." defines, it does not record)
    use = re.compile(rf"\.{attribute}\b(?!\s*=[^=])")
    users = [line.strip() for line in code_lines() if use.search(line)]
    assert users, (
        f"SchedulerMetrics.{attribute} is registered but nothing in scheduler/ records it: "
        "record it where upstream does, or remove it"
    )
