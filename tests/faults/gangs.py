"""Gangs (GenericWorkload PodGroups) through faults, with three replicas and a short lease.

1. The leader SIGKILLed while a gang waits for its last member (its members held at
   PreEnqueue); the member arrives while no one leads. The next leader binds the gang.
2. The leader SIGKILLed while the victims of a pod-group preemption are being deleted
   (every victim DELETE held 1.5 s at an admission webhook). The next leader finishes the
   job: the gang ends bound, no victim is deleted twice.
3. Victim DELETEs refused while a gang needs to preempt a whole lower-priority group
   whose disruption mode is `all`; then allowed. The gang ends bound and the victim
   group is gone whole (no member of it survives its siblings).
4. Members deleted while their gangs are scheduled: every gang whose surviving members
   still reach minCount ends with them all bound.

Invariants (audit log and final objects): no gang ever has between 1 and minCount-1
members bound (a shortfall is only allowed where a member's bind was refused because
the test had deleted it); no pod bound twice; no victim deleted twice; every gang that
fits ends bound; no node over-committed."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter, defaultdict
from typing import Any

from kas_dev.cluster.nodes import NodeGroup
from tests.faults import invariants
from tests.faults.harness import (
    FAST_LEASE,
    PRODUCTION_LEASE,
    Bed,
    Replica,
    SchedulerSettings,
    wait_until,
)
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult
from tests.faults.scenarios import CLASSES, HIGH, LOW
from tests.kube import pod_manifest
from tests.preemption_helpers import victim_manifest
from tests.webhook import DeleteWebhook

NS = "gangs"
GATE = "--feature-gates=GenericWorkload=true"
GROUP_LABEL = "fault-gang"
PODGROUPS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups"


def _pool(name: str) -> dict[str, str]:
    return {"pool": name}


def _pod_group(bed: Bed, name: str, min_count: int, priority_class: str, *,
               disruption: str = "single") -> None:  # fmt: skip
    bed.cluster.api("POST", PODGROUPS, {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": min_count}},
            "priorityClassName": priority_class,
            "disruptionMode": {disruption: {}},
        },
    })  # fmt: skip


def _members(group: str, count: int, cpu: str, priority_class: str, pool: str,
             start: int = 0) -> list[dict[str, Any]]:  # fmt: skip
    out = []
    for i in range(start, start + count):
        pod = pod_manifest(f"{group}-{i}", cpu=cpu, priority_class=priority_class,
                           labels={GROUP_LABEL: group}, nodeSelector=_pool(pool))  # fmt: skip
        pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        out.append(pod)
    return out


def _bound(bed: Bed, group: str) -> set[str]:
    return {
        p["metadata"]["name"]
        for p in bed.pods(NS)
        if p["metadata"].get("labels", {}).get(GROUP_LABEL) == group
        and p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
    }


def _leader(bed: Bed, replicas: list[Replica]) -> Replica | None:
    holder = bed.lease().get("holderIdentity")
    return next((r for r in replicas if r.alive() and holder and r.identity() == holder), None)


def _kill_leader(ctx: RunContext, result: CaseResult, bed: Bed, replicas: list[Replica],
                 why: str) -> Replica | None:  # fmt: skip
    """SIGKILLs the leader; returns the replica that takes over (None: none did)."""
    old = _leader(bed, replicas)
    if not result.check(f"a leader to kill ({why})", old is not None, f"lease: {bed.lease()}"):
        return None
    assert old is not None
    old.signal(signal.SIGKILL)
    t0 = time.monotonic()
    ctx.say(f"SIGKILL {old.name} ({why})")
    wait_until(lambda: not old.alive(), 10, 0.05)  # reaped: no longer counted as a leader
    others = [r for r in replicas if r is not old]
    met, new = wait_until(lambda: _leader(bed, others), 90, 0.1)
    if result.check(f"another replica takes over ({why})", met, f"lease: {bed.lease()}"):
        result.figure(f"seconds from SIGKILL to takeover ({why})", round(time.monotonic() - t0, 1))
    return new if met else None


def _groups_never_partial(result: CaseResult, bed: Bed, min_counts: dict[str, int],
                          deleted_by_test: set[str]) -> None:  # fmt: skip
    """From the audit log: per group, accepted binds are 0 or at least minCount, unless
    the shortfall is made of members the test deleted whose bind was refused for it."""
    accepted: Counter[str] = Counter()
    refused_gone: Counter[str] = Counter()
    for c in bed.audit.binds({NS}):
        group = c.name.rsplit("-", 1)[0]
        if group not in min_counts:
            continue
        if c.ok:
            accepted[group] += 1
        elif c.name in deleted_by_test:
            refused_gone[group] += 1
    partial = {
        g: f"{accepted[g]} bound of minCount {m}"
        for g, m in min_counts.items()
        if 0 < accepted[g] < m and accepted[g] + refused_gone[g] < m
    }
    explained = sum(1 for g, m in min_counts.items() if 0 < accepted[g] < m) - len(partial)
    result.figure("groups with a shortfall made of members deleted mid-bind", explained)
    result.check(
        "never a partial gang (audit: accepted binds per group 0 or >= minCount)",
        not partial,
        "; ".join(f"{g}: {v}" for g, v in list(partial.items())[:5])
        or f"{sum(1 for g in min_counts if accepted[g])} groups bound",
    )


def run(ctx: RunContext, result: CaseResult) -> None:
    lease = PRODUCTION_LEASE if ctx.full else FAST_LEASE
    settings = SchedulerSettings(lease=lease)
    churn_gangs = 12 if ctx.full else 6
    nodes = [
        NodeGroup(count=2, name_prefix="wait", cpu="4", memory="32Gi", labels=_pool("wait")),
        NodeGroup(
            count=3, name_prefix="victims", cpu="4", memory="32Gi", labels=_pool("victims")
        ),
        NodeGroup(count=2, name_prefix="whole", cpu="4", memory="32Gi", labels=_pool("whole")),
        NodeGroup(
            count=churn_gangs // 2,
            name_prefix="churn",
            cpu="4",
            memory="32Gi",
            labels=_pool("churn"),
        ),
    ]
    bed = Bed(ctx.workdir, nodes, ctx.say, generic_workload=True)
    min_counts: dict[str, int] = {}
    deleted_by_test: set[str] = set()
    try:
        bed.namespace(NS)
        bed.priority_classes(CLASSES)
        hook = bed.webhook(DeleteWebhook(bed.cluster, NS))
        replicas = [bed.start_scheduler(n, settings, extra_args=[GATE]) for n in ("a", "b", "c")]
        met, _ = wait_until(lambda: _leader(bed, replicas), 30 + lease.duration)
        if not result.check("one replica leads", met, f"lease: {bed.lease()}"):
            return

        # --- 1: the leader killed while a gang waits for its last member
        _pod_group(bed, "waiting", 4, HIGH)
        min_counts["waiting"] = 4
        bed.create_pods(NS, _members("waiting", 3, "1", HIGH, "wait"))
        time.sleep(2.0)
        result.check("3 of minCount 4 members: none bound", not _bound(bed, "waiting"))
        if _kill_leader(ctx, result, bed, replicas, "gang waiting for members") is None:
            return
        bed.create_pods(NS, _members("waiting", 1, "1", HIGH, "wait", start=3))
        met, _ = wait_until(lambda: len(_bound(bed, "waiting")) == 4, 60)
        result.check("the waiting gang ends bound whole under the new leader", met,
                     f"bound: {sorted(_bound(bed, 'waiting'))}")  # fmt: skip

        # --- 2: the leader killed while its victims' DELETEs are held
        victims = [victim_manifest(f"v-{n}-{i}", f"victims-{n}", LOW, "1")
                   for n in range(3) for i in range(4)]  # fmt: skip
        bed.create_pods(NS, victims)
        # held for less than a fenced write's deadline (the lease's renew deadline)
        hook.delay = 1.5
        _pod_group(bed, "preemptor", 6, HIGH)
        min_counts["preemptor"] = 6
        bed.create_pods(NS, _members("preemptor", 6, "1", HIGH, "victims"))
        met, _ = wait_until(lambda: sum(hook.deletes.values()) > 0, 60, 0.05)
        result.check("the gang's victim DELETEs reach the webhook", met)
        if _kill_leader(ctx, result, bed, replicas, "victim DELETEs in flight") is None:
            return
        met, _ = wait_until(lambda: len(_bound(bed, "preemptor")) == 6, 120, 1.0)
        result.check("the preempting gang ends bound whole after the takeover", met,
                     f"bound: {sorted(_bound(bed, 'preemptor'))}")  # fmt: skip
        hook.delay = 0.0
        victim_deletes = bed.audit.pod_deletes({NS})
        result.figure("victims deleted for 6 members",
                      len({c.pod for c in victim_deletes if c.ok and c.name.startswith("v-")}))  # fmt: skip

        # --- 3: a whole lower-priority group to preempt, its DELETEs refused, then allowed
        _pod_group(bed, "whole", 4, LOW, disruption="all")
        min_counts["whole"] = 4
        bed.create_pods(NS, _members("whole", 4, "2", LOW, "whole"))
        met, _ = wait_until(lambda: len(_bound(bed, "whole")) == 4, 60)
        if not result.check("the low-priority all-members group is bound", met):
            return
        hook.refuse_all = True
        _pod_group(bed, "evictor", 2, HIGH)
        min_counts["evictor"] = 2
        bed.create_pods(NS, _members("evictor", 2, "3", HIGH, "whole"))
        # the scheduler dry-runs the group's DELETEs first: the refusal meets those
        met, _ = wait_until(
            lambda: sum(hook.dry_run_refused.values()) + sum(hook.refused.values()) > 0, 60, 0.1
        )
        result.check("victim DELETEs of the whole group are refused", met)
        time.sleep(2 * settings.pod_initial_backoff + 1)
        result.check("nothing of the evictor bound while its victims stay",
                     not _bound(bed, "evictor"), str(sorted(_bound(bed, "evictor"))))  # fmt: skip
        result.check("no member of the all-members group deleted while a DELETE is refused",
                     len(_bound(bed, "whole")) == 4, f"left: {sorted(_bound(bed, 'whole'))}")  # fmt: skip
        result.figure("dry-run DELETEs refused while refusing",
                      sum(hook.dry_run_refused.values()))  # fmt: skip
        hook.refuse_all = False
        met, _ = wait_until(lambda: len(_bound(bed, "evictor")) == 2,
                            90 + 3 * settings.pod_max_backoff, 1.0)  # fmt: skip
        result.check("the evictor ends bound once DELETEs are allowed", met)
        left = {
            p["metadata"]["name"] for p in bed.pods(NS)
            if p["metadata"].get("labels", {}).get(GROUP_LABEL) == "whole"
            and not p["metadata"].get("deletionTimestamp")
        }  # fmt: skip
        result.check("the all-members victim group is gone whole, no member survives",
                     not left, f"surviving: {sorted(left)}")  # fmt: skip

        # --- 4: members deleted while their gangs are scheduled
        rng = random.Random(20261205)
        plan: dict[str, int] = {}
        manifests: list[dict[str, Any]] = []
        for g in range(churn_gangs):
            name = f"churn{g:02d}"
            _pod_group(bed, name, 3, HIGH)
            min_counts[name] = 3
            plan[name] = rng.choice((0, 1, 2))  # members to delete of 4
            manifests += _members(name, 4, "500m", HIGH, "churn")
        doomed = [f"{g}-{i}" for g, k in plan.items() for i in rng.sample(range(4), k)]
        deleter = threading.Thread(
            target=lambda: _delete_soon(bed, doomed, deleted_by_test), daemon=True
        )
        deleter.start()
        bed.create_pods(NS, manifests)
        deleter.join(60)
        survivors = {g: 4 - k for g, k in plan.items()}

        def settled() -> bool:
            return all(len(_bound(bed, g)) == n for g, n in survivors.items() if n >= 3)

        met, _ = wait_until(settled, 90, 1.0)
        short = {g: len(_bound(bed, g)) for g, n in survivors.items()
                 if n >= 3 and len(_bound(bed, g)) != n}  # fmt: skip
        result.check("every gang whose survivors reach minCount ends with them all bound",
                     met, str(short))  # fmt: skip
        result.figure("members deleted mid-scheduling", len(deleted_by_test))

        # --- invariants over the whole run
        _groups_never_partial(result, bed, min_counts, deleted_by_test)
        invariants.bound_at_most_once(result, bed.audit.binds({NS}))
        scheduler_users = {r.user for r in replicas}
        deletes = [c for c in bed.audit.pod_deletes({NS}) if c.user in scheduler_users]
        invariants.deleted_at_most_once(result, deletes)
        invariants.no_overcommit(result, bed)
    finally:
        bed.close()


def _delete_soon(bed: Bed, names: list[str], deleted: set[str]) -> None:
    """Deletes each named pod as soon as it exists (the test's own user, not a
    scheduler's): members vanish while their groups are taken, assumed or bound."""
    pending = list(names)
    deadline = time.monotonic() + 30
    admin = bed.local.admin(timeout=10)
    tried: defaultdict[str, int] = defaultdict(int)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            status, _ = admin.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")
            tried[name] += 1
            if status in (200, 202):
                deleted.add(name)
                pending.remove(name)
        time.sleep(0.02)


CASE = Case(
    "gangs",
    "gangs: the leader killed while a gang waits and while its victims go; victim "
    "DELETEs refused; members deleted mid-cycle",
    needs_cluster=True,
    run=run,
)
