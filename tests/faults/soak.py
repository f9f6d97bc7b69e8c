"""A churn soak: pods created and deleted, nodes added, cordoned, uncordoned and
deleted, three priorities so preemptions keep happening, for --minutes (the full form:
30); the scheduler's RSS is sampled throughout.

Every pod asks for the same 500m (8 fit a 4-cpu node), so whether a pending pod could
run - on some schedulable node, once the pods of lower priority there are preempted -
is a plain count, and "no preemptor stuck" can be checked exactly once churn stops.

Invariants: no pod bound twice (audit); each victim deleted once (the DELETE-counting
webhook, scheduler's DELETEs only, and the audit log); no node over-committed (sampled
every 10 s during the churn, tests/checker.py); no preemptor stuck once the churn stops
(every pending pod that could run is bound after a settle time from the configured
backoff); RSS growth over the second half under 5% (checked for runs of 10 minutes or
more: a shorter run is still warming up, and its figure is reported only)."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from typing import Any

import psutil  # type: ignore[import-untyped]

from kas_dev.cluster.nodes import NodeGroup, node_manifests
from tests.checker import quantity
from tests.faults import audit, invariants
from tests.faults.harness import PRODUCTION, Bed, Sampler, wait_until
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult
from tests.kube import pod_manifest
from tests.webhook import DeleteWebhook

NS = "soak"
CLASSES = {"soak-low": 10, "soak-mid": 100, "soak-high": 1000}
WEIGHTS = (0.5, 0.35, 0.15)
POD_CPU = "500m"
BASE_NODES = 8
MIN_RSS_CHECK_MINUTES = 10.0


class SchedulerDeleteWebhook(DeleteWebhook):
    """Counts only the scheduler replicas' DELETEs: the churn's own deletes (admin) and
    kwok's pass uncounted."""

    def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        req = body["request"]
        groups = req.get("userInfo", {}).get("groups") or []
        # the harness's own probe (webhook-probe) must be counted: start() waits for it
        if audit.SCHEDULER_GROUP not in groups and req.get("name") != "webhook-probe":
            return {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": req["uid"], "allowed": True},
            }
        return super()._review(body)


def placeable_pending(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> list[str]:
    """Pending pods that could run: highest priority first, each takes a slot on a
    schedulable node where the pods of its priority or higher (bound there, or placed
    here before it) leave one. With equal-sized pods this count is exact."""
    slots: dict[str, int] = {}
    for n in nodes:
        if n["spec"].get("unschedulable") or n["metadata"].get("deletionTimestamp"):
            continue
        cpu = quantity(n["status"]["allocatable"].get("cpu", "0"))
        slots[n["metadata"]["name"]] = int(cpu / quantity(POD_CPU))
    held: dict[str, list[int]] = defaultdict(list)  # node -> priorities of pods on it
    pending: list[tuple[int, str]] = []
    for p in pods:
        prio = int(p["spec"].get("priority") or 0)
        node = p["spec"].get("nodeName")
        if node:
            held[node].append(prio)
        elif not p["metadata"].get("deletionTimestamp"):
            pending.append((prio, p["metadata"]["name"]))
    out = []
    for prio, name in sorted(pending, reverse=True):
        for node, free in slots.items():
            if sum(1 for q in held[node] if q >= prio) < free:
                held[node].append(prio)
                out.append(name)
                break
    return out


def run(ctx: RunContext, result: CaseResult) -> None:
    minutes = ctx.minutes if ctx.minutes is not None else (30.0 if ctx.full else 1.0)
    settings = PRODUCTION
    rng = random.Random(20261201)
    bed = Bed(
        ctx.workdir,
        [NodeGroup(count=BASE_NODES, name_prefix="base", cpu="4", memory="16Gi")],
        ctx.say,
    )
    try:
        bed.namespace(NS)
        bed.priority_classes(CLASSES)
        hook = bed.webhook(SchedulerDeleteWebhook(bed.cluster, NS))
        sched = bed.start_scheduler("a", settings)
        proc = psutil.Process(sched.pid)
        admin = bed.local.admin(timeout=30)
        rss: list[tuple[float, int]] = []
        overcommits: list[str] = []
        counts: defaultdict[str, int] = defaultdict(int)
        live: list[str] = []
        added_nodes: list[str] = []
        cordoned: list[str] = []
        t0 = time.monotonic()
        end = t0 + minutes * 60

        def sample_rss() -> None:
            try:
                rss.append((time.monotonic() - t0, proc.memory_info().rss))
            except psutil.Error:
                counts["RSS samples missed (process gone)"] += 1

        def sample_overcommit() -> None:
            found = invariants.overcommit_violations(bed)
            overcommits.extend(found)
            counts["overcommit samples"] += 1

        def progress() -> None:
            ctx.say(f"  t={time.monotonic() - t0:5.0f}s live={len(live)} created={counts['pods created']} "
                    f"deleted={counts['pods deleted']} victims={sum(hook.deletes.values())} "
                    f"nodes +{counts['nodes added']} -{counts['nodes deleted']} cordoned={len(cordoned)} "
                    f"rss={rss[-1][1] / 2**20 if rss else 0:.0f}MiB")  # fmt: skip

        def node_churn() -> None:
            i = counts["nodes added"]
            manifest = node_manifests(
                [NodeGroup(count=1, name_prefix=f"extra-{i}", cpu="4", memory="16Gi")]
            )
            bed.local.create_nodes(manifest)
            added_nodes.append(manifest[0]["metadata"]["name"])
            counts["nodes added"] += 1
            if cordoned:  # uncordon the one cordoned last time
                name = cordoned.pop()
                admin.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": False}},
                              "application/merge-patch+json")  # fmt: skip
            name = rng.choice([f"base-{j}" for j in range(BASE_NODES)] + added_nodes)
            if admin.request("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}},
                             "application/merge-patch+json")[0] == 200:  # fmt: skip
                cordoned.append(name)
                counts["nodes cordoned"] += 1
            if len(added_nodes) > 3:  # keep a few extra nodes; delete the oldest
                gone = added_nodes.pop(0)
                if gone in cordoned:
                    cordoned.remove(gone)
                admin.request("DELETE", f"/api/v1/nodes/{gone}")
                counts["nodes deleted"] += 1

        samplers = [
            Sampler(5.0, sample_rss),
            Sampler(10.0, sample_overcommit),
            Sampler(15.0, node_churn),
            Sampler(30.0, progress),
        ]
        capacity = BASE_NODES * 8
        while time.monotonic() < end:
            for _ in range(rng.randint(2, 6)):
                name = f"s-{counts['pods created']:06d}"
                cls = rng.choices(list(CLASSES), WEIGHTS)[0]
                status, _ = admin.request("POST", f"/api/v1/namespaces/{NS}/pods",
                                          pod_manifest(name, cpu=POD_CPU, priority_class=cls))  # fmt: skip
                if status == 201:
                    live.append(name)
                    counts["pods created"] += 1
            # keep about 1.4x the base capacity alive: enough pressure for preemptions
            while len(live) > capacity * 1.4:
                name = live.pop(rng.randrange(len(live)))
                admin.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")
                counts["pods deleted"] += 1
            for s in samplers:
                s.tick()
            time.sleep(1.0)  # the churn's pace
        sample_rss()
        churn_seconds = time.monotonic() - t0
        ctx.say(f"churn over after {churn_seconds:.0f}s; settling")

        settle = 60 + 3 * settings.pod_max_backoff
        _met, stuck = wait_until(
            lambda: not placeable_pending(bed.pods(NS), bed.nodes()), settle, 2.0
        )
        stuck = placeable_pending(bed.pods(NS), bed.nodes())
        result.check("no preemptor stuck (every pending pod that could run is bound)", not stuck,
                     f"{len(stuck)} could run: {stuck[:6]}" if stuck else "")  # fmt: skip
        sample_overcommit()
        for k, v in counts.items():
            result.figure(k, v)
        result.figure("minutes of churn", round(churn_seconds / 60, 1))
        result.check("no node over-committed (sampled during the churn)", not overcommits,
                     "; ".join(sorted(set(overcommits))[:5]))  # fmt: skip
        invariants.webhook_admitted_once(result, hook, bed.audit.pod_deletes({NS}))
        invariants.deleted_at_most_once(result, bed.audit.pod_deletes({NS}))
        invariants.bound_at_most_once(result, bed.audit.binds({NS}))
        result.figure("scheduler alive at the end", sched.alive())

        half = churn_seconds / 2
        second = [v for t, v in rss if t >= half]
        if len(second) >= 4:
            start_mib = sum(second[:3]) / 3 / 2**20
            end_mib = sum(second[-3:]) / 3 / 2**20
            growth = (end_mib / start_mib - 1) * 100
            result.figure("RSS at half time (MiB)", round(start_mib, 1))
            result.figure("RSS at the end (MiB)", round(end_mib, 1))
            result.figure("RSS max (MiB)", round(max(v for _, v in rss) / 2**20, 1))
            result.figure("RSS growth over the second half (%)", round(growth, 2))
            if minutes >= MIN_RSS_CHECK_MINUTES:
                result.check("RSS growth over the second half < 5%", growth < 5, f"{growth:.2f}%")
    finally:
        bed.close()


CASE = Case(
    "soak",
    "churn of pods, nodes and priorities for --minutes with RSS sampled",
    needs_cluster=True,
    run=run,
)
