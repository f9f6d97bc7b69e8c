"""A contender's /metrics in the pinned suite: the mean pod-group scheduling attempt
duration, cut and averaged as upstream's scheduler_perf does it.

Which figure upstream's CI ceiling is about (k8s.io/kubernetes):
- the metric: `scheduler_podgroup_scheduling_attempt_duration_seconds`, a histogram
  labelled `result` and `profile` (v1.37.2 pkg/scheduler/metrics/metrics.go:602-609),
  observed once per pod-group cycle with the root group's result: scheduled,
  unschedulable, waiting_on_preemption or error
  (pkg/scheduler/metrics/profile_metrics.go:53-80), the duration running from the
  start of scheduleOnePodGroup (pkg/scheduler/schedule_one_podgroup.go:88, before the
  snapshot update) to the end of submitPodGroupAlgorithmResult (:924-935), which
  includes the synchronous PATCH of the PodGroup's PodGroupInitiallyScheduled condition
  (:920, :943-964; ours writes conditions off the cycle, scheduler/group_status_writer.py);
- how scheduler_perf reads it: every collected histogram is reset when the measured
  op starts (test/integration/scheduler_perf/util.go:357-370) and, after it, averaged
  as the sum over the count of the series matching the selected labels, summed over the
  others (profile), in milliseconds (util.go:429-474; component-base
  metrics/testutil/metrics.go:256-258); the gang metric's `result` values are collected
  apart (test/integration/scheduler_perf/scheduler_perf.go:164-170);
- the ceiling: `threshold` 8, 10 and 12 with `thresholdMetricSelector` {name: that
  metric, labels: {result: scheduled}, dataBucket: Average, expectLower: true} on
  GangScheduling's 5000Nodes_1000Gangs_3000Pods, _2000Gangs_6000Pods and
  _3000Gangs_9000Pods (gangs of 3; "measured ~3.7 / ~5.0 / ~5.7 ms") in
  test/integration/scheduler_perf/gangscheduling/performance-config.yaml:53-59, 68-74
  and 83-89 of kubernetes/kubernetes commit 16913111deb1a4c4ff76f4ba7ffd9ebef397a303,
  from before the file moved to podgroup/gangscheduling/ (when the GangScheduling gate
  still existed). v1.37.2's podgroup/gangscheduling/performance-config.yaml sets no
  threshold at all, and no gang-of-1000 or gang-preemption case ever had one.

So the pinned suite reports, per gang run and contender, the mean over result=scheduled
(the ceiling's label set) and over every result, with the number of attempts of each.
Each run starts a fresh contender process (every counter at zero, as scheduler_perf's
reset) and the harness reads /metrics only after the last measured pod is bound (again
until every PodGroup's scheduled attempt is observed: bench/pinned.py
_pod_group_attempts): the figures cover every pod-group attempt of the run, and nothing
is scraped while it schedules.

`histograms`, `delta` and `attempt_figures` are pure (tests/benchmark/test_bench_scrape.py);
`fetch` is the one GET."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

ATTEMPT_METRIC = "scheduler_podgroup_scheduling_attempt_duration_seconds"
ALGORITHM_METRIC = "scheduler_podgroup_scheduling_algorithm_duration_seconds"
CEILING_LABELS: Mapping[str, str] = {"result": "scheduled"}
"""The label set upstream's ceiling selects (see the module's docstring)."""

Labels = tuple[tuple[str, str], ...]
"""A series' labels, sorted by name."""
Totals = dict[Labels, tuple[float, float]]
"""Series -> (sum, count) of one histogram."""

def histograms(text: str, name: str) -> Totals:
    """The `_sum` and `_count` of every series of histogram `name` in a Prometheus text
    exposition (what kube-scheduler's and our /metrics serve), read by the Prometheus
    client's own parser."""
    sums: dict[Labels, float] = {}
    counts: dict[Labels, float] = {}
    # samples are matched by their own names: without a TYPE line the parser makes
    # `<name>_sum` a family of its own
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            if sample.name == f"{name}_sum":
                sums[labels] = float(sample.value)
            elif sample.name == f"{name}_count":
                counts[labels] = float(sample.value)
    return {k: (sums.get(k, 0.0), counts[k]) for k in counts}


def delta(before: Totals, after: Totals) -> Totals:
    """What each series gained between two scrapes of one process (a series absent from
    `before` started at zero)."""
    out: Totals = {}
    for labels, (s, c) in after.items():
        s0, c0 = before.get(labels, (0.0, 0.0))
        out[labels] = (s - s0, c - c0)
    return out


def mean_of(totals: Totals, match: Mapping[str, str] | None = None) -> dict[str, float | None]:
    """Attempts and mean milliseconds over the series whose labels include `match` (every
    series without it), as scheduler_perf's Average: summed sums over summed counts."""
    want = set((match or {}).items())
    total_s = total_c = 0.0
    for labels, (s, c) in totals.items():
        if want <= set(labels):
            total_s += s
            total_c += c
    return {
        "attempts": int(total_c),
        "mean_ms": round(1000.0 * total_s / total_c, 3) if total_c else None,
    }


def attempt_figures(after: str, before: str = "") -> dict[str, object]:
    """The pod-group figures of one run from the /metrics text at its end (`before`: a
    scrape at its start; empty for a fresh process, whose counters are all zero)."""
    d = delta(histograms(before, ATTEMPT_METRIC), histograms(after, ATTEMPT_METRIC))
    results = sorted({v for labels in d for k, v in labels if k == "result"})
    algo = mean_of(delta(histograms(before, ALGORITHM_METRIC), histograms(after, ALGORITHM_METRIC)))
    return {
        "metric": ATTEMPT_METRIC,
        "scheduled": mean_of(d, CEILING_LABELS),
        "all": mean_of(d),
        "by_result": {r: mean_of(d, {"result": r}) for r in results},
        "algorithm": algo,
    }


async def fetch(port: int, host: str = "127.0.0.1", timeout_s: float = 60.0) -> str:
    """GET /metrics from a contender's HTTPS port, anonymously (the contender is started
    with /metrics among its always-allowed paths) and without verifying its self-signed
    certificate."""
    url = f"https://{host}:{port}/metrics"
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as session,
        session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r,
    ):
        body = await r.text()
        if r.status != 200:
            raise RuntimeError(f"GET {url}: HTTP {r.status}: {body[:200]}")
        return body
