"""The API server SIGKILLed and restarted while preemptions are in flight.

Nodes are full of low-priority pods; each round creates high-priority pods that can only
run by preempting them. Victim DELETEs are slowed at an admission webhook (1 s each), so
the kill lands while the scheduler's preemption tasks are waiting on the API server.
Then the API server is started again on the same port and data.

Invariants (API server state): no pod bound twice, each victim deleted once (audit log:
DELETEs that took effect), no node over-committed, every preemptor bound in the end.
The webhook's own count of DELETE calls is reported, not checked: a DELETE cut off by
the kill is legitimately sent again."""

from __future__ import annotations

import time

from kas_dev.cluster.nodes import NodeGroup
from tests.faults import invariants
from tests.faults.harness import Bed, SchedulerSettings, wait_until
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult
from tests.faults.scenarios import CLASSES, bound_names, fill_with_victims, preemptors
from tests.webhook import DeleteWebhook

NS = "kill"
PER_ROUND = 4  # preemptors per round, 1 cpu each
DOWN_SECONDS = 3.0  # how long the API server stays dead
DELETE_DELAY = 1.0


def run(ctx: RunContext, result: CaseResult) -> None:
    rounds = 5 if ctx.full else 2
    node_count = 6 if ctx.full else 4
    settings = SchedulerSettings()
    bed = Bed(
        ctx.workdir,
        [NodeGroup(count=node_count, name_prefix="ak", cpu="4", memory="16Gi")],
        ctx.say,
    )
    try:
        bed.namespace(NS)
        bed.priority_classes(CLASSES)
        nodes = [f"ak-{i}" for i in range(node_count)]
        fill_with_victims(bed, NS, nodes, per_node=4, cpu="1")
        hook = bed.webhook(DeleteWebhook(bed.cluster, NS))
        hook.delay = DELETE_DELAY
        sched = bed.start_scheduler("a", settings)
        # a preemptor waits for its victims' DELETEs (DELETE_DELAY each, in parallel),
        # a backoff (at most podMaxBackoff) and its bind; the API server's restart may
        # take a minute on a loaded machine
        per_round_timeout = 90.0 + 3 * settings.pod_max_backoff + PER_ROUND * DELETE_DELAY
        all_preemptors: set[str] = set()
        kills = 0
        for r in range(rounds):
            pods = preemptors(f"high-{r}", PER_ROUND, cpu="1")
            names = {p["metadata"]["name"] for p in pods}
            all_preemptors |= names
            calls_before = sum(hook.deletes.values())
            bed.create_pods(NS, pods)

            def delete_started(before: int = calls_before) -> bool:
                return sum(hook.deletes.values()) > before

            def round_bound(want: set[str] = names) -> bool:
                return want <= bound_names(bed, NS)

            met, _ = wait_until(delete_started, 60, 0.05)
            if not met:
                ctx.say(f"round {r}: no victim DELETE reached the webhook in 60s")
            ctx.say(f"round {r}: {hook.in_flight} DELETE(s) in flight: SIGKILL kube-apiserver")
            bed.kill_apiserver()
            kills += 1
            time.sleep(DOWN_SECONDS)  # the fault's length, not a synchronisation
            t0 = time.monotonic()
            bed.start_apiserver()
            ctx.say(f"round {r}: kube-apiserver back in {time.monotonic() - t0:.1f}s")
            met, _ = wait_until(round_bound, per_round_timeout, 1.0)
            ctx.say(f"round {r}: preemptors bound: {met}")
        result.figure("API server kills", kills)
        result.figure("scheduler alive after the kills", sched.alive())
        missing = sorted(all_preemptors - bound_names(bed, NS))
        result.check(
            "no preemptor stuck (every preemptor bound)",
            not missing,
            f"unbound: {missing[:8]}" if missing else f"{len(all_preemptors)} bound",
        )
        invariants.bound_at_most_once(result, bed.audit.binds({NS}))
        invariants.deleted_at_most_once(
            result, bed.audit.pod_deletes({NS}), victims=len(all_preemptors)
        )
        result.figure("webhook: DELETE calls", sum(hook.deletes.values()))
        result.figure("webhook: most calls for one victim", max(hook.deletes.values(), default=0))
        invariants.no_overcommit(result, bed)
    finally:
        bed.close()


CASE = Case(
    "apiserver_kill",
    "kube-apiserver SIGKILLed and restarted while victim DELETEs are in flight",
    needs_cluster=True,
    run=run,
)
