"""A churn soak of gangs (GenericWorkload): PodGroups of 2-8 members with gang policy,
three priorities, both disruption modes, mixed with single pods of the same
priorities (a single preemptor takes an all-members group as one unit), created and deleted
(whole groups: members then PodGroup) for --minutes (the full form: 30), with nodes
cordoned and uncordoned, so that pod-group preemption keeps happening.

Every pod asks for the same 500m (8 fit a 4-cpu node), so whether a pending group could
run - minCount slots on schedulable nodes once pods of lower priority are preempted -
is a plain count, checked once the churn stops.

Invariants: never a partial gang (audit: per group, accepted binds are 0 or at least
minCount, a shortfall allowed only where a member's bind failed because the churn had
deleted it; and sampled every 10 s: no group whose members all still exist has between
1 and minCount-1 bound in two samples in a row); no victim of an all-members group survives its siblings'
deletion by the scheduler (audit); no pod bound twice; no victim deleted twice; no node
over-committed (sampled); no gang or pod stuck once the churn stops."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from kas_dev.cluster.nodes import NodeGroup
from tests.checker import quantity
from tests.faults import audit, invariants
from tests.faults.harness import PRODUCTION, Bed, Sampler, wait_until
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult
from tests.faults.soak import SchedulerDeleteWebhook
from tests.kube import pod_manifest

NS = "gang-soak"
GATE = "--feature-gates=GenericWorkload=true"
CLASSES = {"gsoak-low": 10, "gsoak-mid": 100, "gsoak-high": 1000}
WEIGHTS = (0.5, 0.35, 0.15)
POD_CPU = "500m"
NODES = 8
GROUP_LABEL = "soak-group"
PODGROUPS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups"


@dataclass
class Unit:
    """What the churn created together: a gang (members and its PodGroup) or a pod."""

    name: str
    members: list[str]
    min_count: int  # 1 for a single pod
    disruption: str  # "single" or "all"
    gang: bool


def _create_unit(admin: Any, rng: random.Random, index: int) -> Unit | None:
    cls = rng.choices(list(CLASSES), WEIGHTS)[0]
    if rng.random() < 0.3:  # a single pod: it may preempt gang members (units) too
        name = f"p-{index:06d}"
        status, _ = admin.request("POST", f"/api/v1/namespaces/{NS}/pods",
                                  pod_manifest(name, cpu=POD_CPU, priority_class=cls))  # fmt: skip
        return Unit(name, [name], 1, "single", gang=False) if status == 201 else None
    name = f"g-{index:06d}"
    size = rng.randint(2, 8)
    min_count = rng.choice((size, max(2, size - 1)))
    disruption = rng.choice(("single", "all"))
    status, _ = admin.request("POST", PODGROUPS, {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                 "priorityClassName": cls, "disruptionMode": {disruption: {}}},
    })  # fmt: skip
    if status != 201:
        return None
    members = []
    for i in range(size):
        pod = pod_manifest(f"{name}-{i}", cpu=POD_CPU, priority_class=cls,
                           labels={GROUP_LABEL: name})  # fmt: skip
        pod["spec"]["schedulingGroup"] = {"podGroupName": name}
        if admin.request("POST", f"/api/v1/namespaces/{NS}/pods", pod)[0] == 201:
            members.append(f"{name}-{i}")
    return Unit(name, members, min_count, disruption, gang=True)


def _delete_unit(admin: Any, unit: Unit) -> None:
    for m in unit.members:
        admin.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{m}")
    if unit.gang:
        admin.request("DELETE", f"{PODGROUPS}/{unit.name}")


def placeable_pending(
    units: list[Unit], pods: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> list[str]:
    """Live units with nothing bound that could run: highest priority first, a unit takes
    minCount slots on schedulable nodes where the pods of its priority or higher (bound
    there, or placed here before it) leave room. With equal-sized pods this is exact."""
    slots: dict[str, int] = {}
    for n in nodes:
        if n["spec"].get("unschedulable") or n["metadata"].get("deletionTimestamp"):
            continue
        slots[n["metadata"]["name"]] = int(
            quantity(n["status"]["allocatable"].get("cpu", "0")) / quantity(POD_CPU)
        )
    by_name = {p["metadata"]["name"]: p for p in pods if not p["metadata"].get("deletionTimestamp")}
    held: dict[str, list[int]] = defaultdict(list)
    for p in by_name.values():
        if p["spec"].get("nodeName"):
            held[p["spec"]["nodeName"]].append(int(p["spec"].get("priority") or 0))
    pending: list[tuple[int, Unit]] = []
    for u in units:
        live = [by_name[m] for m in u.members if m in by_name]
        if len(live) < u.min_count or any(p["spec"].get("nodeName") for p in live):
            continue
        pending.append((int(live[0]["spec"].get("priority") or 0), u))
    out = []
    for prio, u in sorted(pending, key=lambda x: -x[0]):
        room = {n: free - sum(1 for q in held[n] if q >= prio) for n, free in slots.items()}
        if sum(max(0, r) for r in room.values()) < u.min_count:
            continue
        need = u.min_count
        for n, r in room.items():
            take = min(max(0, r), need)
            held[n].extend([prio] * take)
            need -= take
        out.append(u.name)
    return out


def _partial_now(units: list[Unit], pods: list[dict[str, Any]]) -> list[str]:
    """Gangs whose members all still exist (none terminating) with 1..minCount-1 bound."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    out = []
    for u in units:
        if not u.gang or any(
            m not in by_name or by_name[m]["metadata"].get("deletionTimestamp") for m in u.members
        ):
            continue
        bound = sum(1 for m in u.members if by_name[m]["spec"].get("nodeName"))
        if 0 < bound < u.min_count:
            out.append(f"{u.name}: {bound}/{u.min_count}")
    return out


def run(ctx: RunContext, result: CaseResult) -> None:
    minutes = ctx.minutes if ctx.minutes is not None else (30.0 if ctx.full else 1.0)
    settings = PRODUCTION
    rng = random.Random(20261205)
    bed = Bed(
        ctx.workdir,
        [NodeGroup(count=NODES, name_prefix="gs", cpu="4", memory="16Gi")],
        ctx.say,
        generic_workload=True,
    )
    try:
        bed.namespace(NS)
        bed.priority_classes(CLASSES)
        hook = bed.webhook(SchedulerDeleteWebhook(bed.cluster, NS))
        sched = bed.start_scheduler("a", settings, extra_args=[GATE])
        admin = bed.local.admin(timeout=30)
        units: list[Unit] = []  # every unit created, live or not
        live: list[Unit] = []
        deleted_by_churn: set[str] = set()
        overcommits: list[str] = []
        partials: list[str] = []
        counts: Counter[str] = Counter()
        cordoned: list[str] = []
        t0 = time.monotonic()
        end = t0 + minutes * 60

        previous: set[str] = set()

        def sample() -> None:
            nonlocal previous
            pods = bed.pods(NS)
            overcommits.extend(invariants.overcommit_violations(bed))
            # a group's binds are separate calls: a sample can fall between them, so
            # only a group seen partial by two samples in a row (10 s apart) counts
            now = set(_partial_now(live, pods))
            partials.extend(sorted(now & previous))
            counts["partial gangs seen by one sample only (binds in flight)"] += len(now - previous)
            previous = now
            counts["samples"] += 1

        def node_churn() -> None:
            if cordoned:
                admin.request("PATCH", f"/api/v1/nodes/{cordoned.pop()}",
                              {"spec": {"unschedulable": False}}, "application/merge-patch+json")  # fmt: skip
            name = f"gs-{rng.randrange(NODES)}"
            if admin.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}},
                             "application/merge-patch+json")[0] == 200:  # fmt: skip
                cordoned.append(name)
                counts["nodes cordoned"] += 1

        def progress() -> None:
            ctx.say(f"  t={time.monotonic() - t0:5.0f}s live units={len(live)} "
                    f"created={counts['units created']} victims={sum(hook.deletes.values())} "
                    f"bound={len(invariants_bound(bed))}")  # fmt: skip

        samplers = [Sampler(10.0, sample), Sampler(20.0, node_churn), Sampler(30.0, progress)]
        capacity = NODES * 8
        while time.monotonic() < end:
            for _ in range(rng.randint(1, 2)):
                unit = _create_unit(admin, rng, counts["units created"])
                if unit is not None:
                    units.append(unit)
                    live.append(unit)
                    counts["units created"] += 1
                    counts["gangs created" if unit.gang else "pods created"] += 1
            # keep about 1.4x the capacity in pods alive: enough pressure for preemptions
            while sum(len(u.members) for u in live) > capacity * 1.4:
                gone = live.pop(rng.randrange(len(live)))
                _delete_unit(admin, gone)
                deleted_by_churn.update(gone.members)
                counts["units deleted"] += 1
            for s in samplers:
                s.tick()
            time.sleep(1.0)
        if cordoned:
            admin.request("PATCH", f"/api/v1/nodes/{cordoned.pop()}",
                          {"spec": {"unschedulable": False}}, "application/merge-patch+json")  # fmt: skip
        churn_seconds = time.monotonic() - t0
        ctx.say(f"churn over after {churn_seconds:.0f}s; settling")
        settle = 60 + 3 * settings.pod_max_backoff
        wait_until(lambda: not placeable_pending(live, bed.pods(NS), bed.nodes()), settle, 2.0)
        stuck = placeable_pending(live, bed.pods(NS), bed.nodes())
        result.check("no gang or pod stuck (every pending unit that could run is bound)",
                     not stuck, f"{len(stuck)} could run: {stuck[:6]}")  # fmt: skip
        # a preemption still deleting when the pods settle is judged once it is done,
        # not half-way: the audit checks wait for 5 s without a DELETE of the scheduler
        # (dry runs included) at the webhook
        waited = _deletions_quiet(hook, quiet=5.0, limit=60.0)
        result.check("the scheduler's deletions end (5 s without one)", waited is not None,
                     "still deleting after 60 s" if waited is None
                     else f"the last one {waited:.1f} s after the pods settled")  # fmt: skip
        sample()
        for k, v in counts.items():
            result.figure(k, v)
        result.figure("minutes of churn", round(churn_seconds / 60, 1))
        result.check("no node over-committed (sampled during the churn)", not overcommits,
                     "; ".join(sorted(set(overcommits))[:5]))  # fmt: skip
        result.check("never a partial gang (sampled: members all present, 1..minCount-1 bound, twice in a row)",
                     not partials, "; ".join(partials[:5]))  # fmt: skip
        _audit_checks(result, bed, units, deleted_by_churn)
        invariants.webhook_admitted_once(result, hook, bed.audit.pod_deletes({NS}))
        invariants.bound_at_most_once(result, bed.audit.binds({NS}))
        result.figure("scheduler alive at the end", sched.alive())
    finally:
        bed.close()


def _deletions_quiet(hook: SchedulerDeleteWebhook, quiet: float, limit: float) -> float | None:
    """Seconds until no DELETE of the scheduler's (dry runs included) has reached the
    webhook for `quiet` seconds and none is in flight; None when that takes over `limit`."""

    def seen() -> int:
        return sum(hook.deletes.values()) + sum(hook.dry_runs.values())

    start = changed = time.monotonic()
    last = seen()
    while time.monotonic() - start < limit:
        time.sleep(0.5)
        now = seen()
        if now != last or hook.in_flight:
            last, changed = now, time.monotonic()
        elif time.monotonic() - changed >= quiet:
            return changed - start
    return None


def invariants_bound(bed: Bed) -> list[str]:
    return [p["metadata"]["name"] for p in bed.pods(NS) if p["spec"].get("nodeName")]


def _audit_checks(result: CaseResult, bed: Bed, units: list[Unit], churned: set[str]) -> None:
    binds = bed.audit.binds({NS})
    accepted: Counter[str] = Counter()
    failed_gone: Counter[str] = Counter()
    group_of = {m: u for u in units if u.gang for m in u.members}
    for c in binds:
        u = group_of.get(c.name)
        if u is None:
            continue
        if c.ok:
            accepted[u.name] += 1
        elif c.name in churned:
            failed_gone[u.name] += 1
    partial = [
        f"{u.name}: {accepted[u.name]}/{u.min_count}"
        for u in units
        if u.gang
        and 0 < accepted[u.name] < u.min_count
        and accepted[u.name] + failed_gone[u.name] < u.min_count
    ]
    result.figure("gangs bound", sum(1 for u in units if u.gang and accepted[u.name]))
    result.check("never a partial gang (audit: accepted binds per group 0 or >= minCount)",
                 not partial, "; ".join(partial[:5]))  # fmt: skip
    # victims: the scheduler's own DELETEs
    deletes = [c for c in bed.audit.pod_deletes({NS}) if c.user.startswith("fault-scheduler")]
    invariants.deleted_at_most_once(result, deletes)
    by_scheduler = {c.name for c in deletes if c.ok}
    torn = []
    for u in units:
        if not u.gang or u.disruption != "all":
            continue
        hit = [m for m in u.members if m in by_scheduler]
        # siblings deleted by the scheduler: the rest must be gone too (deleted by it,
        # or by the churn, or never bound)
        if hit:
            survivors = [m for m in u.members if m not in by_scheduler and m not in churned
                         and _was_bound(binds, m)]  # fmt: skip
            if survivors:
                torn.append(f"{u.name}: {len(hit)} preempted, {survivors[:3]} left")
    result.figure("all-members groups preempted",
                  sum(1 for u in units if u.disruption == "all"
                      and any(m in by_scheduler for m in u.members)))  # fmt: skip
    result.check("no victim of an all-members group survives its siblings' preemption",
                 not torn, "; ".join(torn[:5]))  # fmt: skip


def _was_bound(binds: list[audit.Call], name: str) -> bool:
    return any(c.ok and c.name == name for c in binds)


CASE = Case(
    "gang_soak",
    "churn of gangs (both disruption modes), pods and priorities for --minutes",
    needs_cluster=True,
    run=run,
)
