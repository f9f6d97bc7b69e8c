"""An unschedulable backlog with the production client settings, two replicas.

No fault at all: 20 nodes, and thousands of pods that fit nowhere (each asks for more
cpu than any node has). The scheduler tries each, writes its PodScheduled=False status
and a FailedScheduling event, all through clientConnection qps 50 / burst 100, while the
leader must keep renewing its Lease (15s/10s/2s). A cluster out of capacity must keep a
stable leader.

Invariants (audit log: every Lease write that took effect, by which replica, when):
no leader change while the backlog is worked through; the longest time between two
successful renewals is under renewDeadline / 2."""

from __future__ import annotations

import itertools
import time

from kas_dev.cluster.nodes import NodeGroup
from tests.faults.harness import LEASE_NAME, PRODUCTION, Bed, pods_named, wait_until
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult

NS = "backlog"


def renewal_gaps(times: list[float], start: float, end: float) -> float:
    """The longest stretch in [start, end] without a successful Lease write."""
    inside = sorted(t for t in times if start <= t <= end)
    points = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(points))


def run(ctx: RunContext, result: CaseResult) -> None:
    pods = 3000 if ctx.full else 1000
    duration = 600.0 if ctx.full else 45.0
    settings = PRODUCTION
    assert settings.lease is not None
    lease = settings.lease
    bed = Bed(ctx.workdir, [NodeGroup(count=20, name_prefix="bl", cpu="4", memory="16Gi")], ctx.say)
    try:
        bed.namespace(NS)
        a = bed.start_scheduler("a", settings)
        met, _ = wait_until(
            lambda: a.identity() and bed.lease().get("holderIdentity") == a.identity(),
            30 + lease.duration,
        )
        if not result.check("a leads", met, f"lease: {bed.lease()}"):
            return
        b = bed.start_scheduler("b", settings)
        transitions0 = int(bed.lease().get("leaseTransitions") or 0)
        start = time.time()
        ctx.say(f"creating {pods} pods that fit nowhere")
        created = bed.create_pods(NS, pods_named("big", pods, cpu="64"))
        result.figure("pods created", created)
        result.figure("seconds to create them", round(time.time() - start, 1))
        end = start + duration
        while time.time() < end:
            spec = bed.lease()
            ctx.say(f"  t={time.time() - start:4.0f}s holder={spec.get('holderIdentity', '')[-8:]} "
                    f"transitions={int(spec.get('leaseTransitions') or 0) - transitions0} "
                    f"a alive={a.alive()} b alive={b.alive()}")  # fmt: skip
            if not (a.alive() or b.alive()):
                ctx.say("  both replicas have exited: the outcome is settled, stopping early")
                break
            time.sleep(min(10.0, max(0.0, end - time.time())))
        end = time.time()
        writes = [c for c in bed.audit.lease_writes(LEASE_NAME) if c.ok]
        ordered = sorted(writes, key=lambda c: c.completed)
        # a change: a write during the run by another replica than the write before it
        changes = sum(
            1 for x, y in itertools.pairwise(ordered) if y.completed >= start and x.user != y.user
        )
        transitions = int(bed.lease().get("leaseTransitions") or 0) - transitions0
        gap = renewal_gaps([c.completed for c in writes], start, end)
        result.figure("observed seconds", round(end - start, 1))
        result.figure("leader changes (Lease writes by another replica)", changes)
        result.figure("leaseTransitions added", transitions)
        result.figure("longest Lease renewal gap (s)", round(gap, 2))
        result.figure(
            "status patches (audit)",
            sum(1 for c in bed.audit.calls() if c.resource == "pods/status"),
        )
        result.figure("replicas alive at the end", f"a={a.alive()} b={b.alive()}")
        result.check("0 leader changes", changes == 0 and transitions == 0,
                     f"{changes} holder changes, {transitions} transitions")  # fmt: skip
        result.check(
            f"longest renewal gap < renewDeadline/2 = {lease.renew_deadline / 2:g}s",
            gap < lease.renew_deadline / 2,
            f"{gap:.2f}s",
        )
    finally:
        bed.close()


CASE = Case(
    "backlog",
    "unschedulable backlog, production qps/burst/lease, two replicas: a stable leader",
    needs_cluster=True,
    run=run,
)
