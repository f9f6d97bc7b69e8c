"""A burst of pods, most of which cannot fit: 5000 pods on 20 nodes that hold 2000.

Every pod that cannot run must learn why: a FailedScheduling event. The event recorder
buffers events and writes them through the client's qps; when its buffer overflows, the
drop must show in a metric (scheduler_events_dropped_total), never happen silently.

Invariants: every pod that fits is bound; within the time the configured qps allows for
all the writes the burst needs (binds, Scheduled and FailedScheduling events, status
patches) every pending pod has a FailedScheduling event, or the number without one is
at most what the dropped-events metric counts; no pod bound twice; no node
over-committed."""

from __future__ import annotations

import time
from typing import Any

from kas_dev.cluster.nodes import NodeGroup
from tests.faults import invariants
from tests.faults.harness import Bed, SchedulerSettings, pods_named, wait_until
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult

NS = "burst"
DROPPED_METRIC = "scheduler_events_dropped_total"
POD_CPU = "100m"
PODS_PER_NODE = 100  # 10 cpu nodes / 100m pods


def failed_scheduling(bed: Bed) -> set[str]:
    """Names of the pods that have a FailedScheduling event (events.k8s.io/v1)."""
    events: list[dict[str, Any]] = bed.list_all(f"/apis/events.k8s.io/v1/namespaces/{NS}/events")
    return {e["regarding"]["name"] for e in events if e.get("reason") == "FailedScheduling"}


def run(ctx: RunContext, result: CaseResult) -> None:
    nodes, pods = (20, 5000) if ctx.full else (6, 1500)
    fit = nodes * PODS_PER_NODE
    # production client settings in the full form; the reduced form doubles them to fit
    # in a CI minute (the recorder's buffer still overflows: it holds 1000 events)
    settings = (
        SchedulerSettings(qps=50, burst=100) if ctx.full else SchedulerSettings(qps=100, burst=200)
    )
    bed = Bed(
        ctx.workdir,
        [NodeGroup(count=nodes, name_prefix="bu", cpu="10", memory="64Gi", pods=110)],
        ctx.say,
    )
    try:
        bed.namespace(NS)
        # the pods are all there when the scheduler starts (as after a restart, or a
        # burst faster than any client creates pods here): it meets the whole burst at once
        t0 = time.monotonic()
        ctx.say(f"creating {pods} pods ({fit} fit)")
        bed.create_pods(NS, pods_named("p", pods, cpu=POD_CPU), workers=16)
        result.figure("seconds to create the pods", round(time.monotonic() - t0, 1))
        sched = bed.start_scheduler("a", settings)
        t0 = time.monotonic()
        pending = pods - fit
        # each bound pod: a bind and a Scheduled event; each pending pod: at least a
        # status patch and a FailedScheduling event. All go through the qps.
        writes = 2 * fit + 2 * pending
        allowed = max(0.0, (writes - settings.burst) / settings.qps)
        deadline = allowed + 30 + 2 * settings.pod_max_backoff  # slack for a loaded machine
        result.figure("writes needed", writes)
        result.figure("seconds the qps allows (from the scheduler's start)", round(allowed, 1))

        def state() -> tuple[set[str], set[str]]:
            pending_names = {
                p["metadata"]["name"] for p in bed.pods(NS) if not p["spec"].get("nodeName")
            }
            return pending_names, failed_scheduling(bed)

        def done() -> bool:
            pend, with_event = state()
            return len(pend) == pending and pend <= with_event

        met, _ = wait_until(done, max(0.0, deadline - (time.monotonic() - t0)), 5.0)
        result.figure(
            "seconds until every pending pod had its event",
            round(time.monotonic() - t0, 1) if met else None,
        )
        pend, with_event = state()
        missing = pend - with_event
        dropped = sched.metric_or_none(DROPPED_METRIC)
        result.figure("pods bound", pods - len(pend))
        result.figure("pending pods", len(pend))
        result.figure("pending pods without a FailedScheduling event", len(missing))
        result.figure(DROPPED_METRIC, "absent" if dropped is None else dropped)
        result.check(
            "every pod that fits is bound", pods - len(pend) == fit, f"{pods - len(pend)} of {fit}"
        )
        result.check(
            "every pending pod has a FailedScheduling event, or the drop is counted in a metric",
            not missing or (dropped is not None and dropped >= len(missing)),
            f"{len(missing)} without an event; {DROPPED_METRIC}: {'absent' if dropped is None else dropped}",
        )
        invariants.bound_at_most_once(result, bed.audit.binds({NS}))
        invariants.no_overcommit(result, bed)
    finally:
        bed.close()


CASE = Case(
    "burst",
    "5000 pods on 20 nodes holding 2000: every pending pod gets its event or the drop is counted",
    needs_cluster=True,
    run=run,
)
