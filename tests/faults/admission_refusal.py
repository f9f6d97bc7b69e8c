"""Binds and victim DELETEs refused, then slowed, at validating admission webhooks.

Part 1, binds: every pods/binding CREATE in one namespace is refused (403) until each
pod has been refused at least once, then allowed with 0.5 s of latency. Every pod must
end bound, exactly once.
Part 2, victim DELETEs: nodes full of low-priority pods, high-priority preemptors; every
victim DELETE is refused until each preemptor has seen a refusal, then allowed with 1 s
of latency. Every preemptor must end bound; each victim deleted once.

Invariants: webhook counts (admitted binds per pod <= 1, admitted DELETEs per victim
<= 1), the audit log (accepted binds and DELETEs per pod <= 1), preemptors bound, no
node over-committed."""

from __future__ import annotations

from collections import Counter

from kas_dev.cluster.nodes import NodeGroup
from tests.faults import invariants
from tests.faults.harness import Bed, SchedulerSettings, pods_named, wait_until
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult
from tests.faults.scenarios import CLASSES, bound_names, fill_with_victims, preemptors
from tests.webhook import BindingWebhook, DeleteWebhook

BINDS, VICTIMS = "binds", "victims"
POOL = {"pool": "victims"}


def run(ctx: RunContext, result: CaseResult) -> None:
    bind_pods = 60 if ctx.full else 20
    victim_nodes = 6 if ctx.full else 3
    preemptor_count = 2 * victim_nodes
    settings = SchedulerSettings()
    nodes = [
        NodeGroup(count=2, name_prefix="free", cpu="8", memory="32Gi"),
        NodeGroup(count=victim_nodes, name_prefix="full", cpu="4", memory="16Gi", labels=POOL),
    ]
    bed = Bed(ctx.workdir, nodes, ctx.say)
    try:
        bed.namespace(BINDS)
        bed.namespace(VICTIMS)
        bed.priority_classes(CLASSES)
        fill_with_victims(bed, VICTIMS, [f"full-{i}" for i in range(victim_nodes)], 4, "1")
        bind_hook = bed.webhook(BindingWebhook(bed.cluster, BINDS))
        delete_hook = bed.webhook(DeleteWebhook(bed.cluster, VICTIMS))
        bind_hook.refuse_all = True
        delete_hook.refuse_all = True
        bed.start_scheduler("a", settings)

        # --- part 1: binds refused, then slow
        pods = pods_named("b", bind_pods, cpu="100m")
        names = {p["metadata"]["name"] for p in pods}
        bed.create_pods(BINDS, pods)
        # each pod refused once: the first attempts, then one backoff (<= podMaxBackoff)
        met, _ = wait_until(
            lambda: set(bind_hook.refused) >= names, 60 + 2 * settings.pod_max_backoff
        )
        ctx.say(f"binds refused: {sum(bind_hook.refused.values())} (every pod once: {met})")
        bind_hook.refuse_all = False
        bind_hook.delay = 0.5
        met, _ = wait_until(
            lambda: names <= bound_names(bed, BINDS),
            60 + 3 * settings.pod_max_backoff + 0.5 * bind_pods,
            1.0,
        )
        result.check("every pod bound once binds are allowed again", met,
                     f"unbound: {sorted(names - bound_names(bed, BINDS))[:8]}" if not met else f"{len(names)} bound")  # fmt: skip
        admitted = Counter({k: v - bind_hook.refused[k] for k, v in bind_hook.deletes.items()})
        twice = {k: v for k, v in admitted.items() if v > 1}
        result.figure("bind attempts refused", sum(bind_hook.refused.values()))
        result.check("webhook: admitted binds per pod <= 1", not twice, str(twice)[:300])

        # --- part 2: victim DELETEs refused, then slow
        want = preemptors("high", preemptor_count, cpu="1", nodeSelector=POOL)
        high = {p["metadata"]["name"] for p in want}
        bed.create_pods(VICTIMS, want)
        met, _ = wait_until(
            lambda: sum(delete_hook.refused.values()) >= preemptor_count,
            60 + 2 * settings.pod_max_backoff,
        )
        ctx.say(f"victim DELETEs refused: {sum(delete_hook.refused.values())} ({met})")
        delete_hook.refuse_all = False
        delete_hook.delay = 1.0
        met, _ = wait_until(
            lambda: high <= bound_names(bed, VICTIMS),
            90 + 3 * settings.pod_max_backoff + preemptor_count,
            1.0,
        )
        result.check("no preemptor stuck (every preemptor bound)", met,
                     f"unbound: {sorted(high - bound_names(bed, VICTIMS))[:8]}" if not met else f"{len(high)} bound")  # fmt: skip
        deleted = len({c.pod for c in bed.audit.pod_deletes({VICTIMS}) if c.ok})
        # one 1-cpu victim makes room for one 1-cpu preemptor: more is a preemption that
        # was decided again (a refused DELETE leaves the first victim in place)
        result.figure("victims beyond one per preemptor", deleted - preemptor_count)
        invariants.webhook_admitted_once(result, delete_hook, bed.audit.pod_deletes({VICTIMS}))
        invariants.deleted_at_most_once(
            result, bed.audit.pod_deletes({VICTIMS}), victims=preemptor_count
        )
        invariants.bound_at_most_once(result, bed.audit.binds({BINDS, VICTIMS}))
        invariants.no_overcommit(result, bed)
    finally:
        bed.close()


CASE = Case(
    "admission_refusal",
    "binds and victim DELETEs refused, then slowed, at admission webhooks",
    needs_cluster=True,
    run=run,
)
