"""Every watch expires (410 Gone) and deletes happen that no watch ever delivers.

The nodes are full of pods this scheduler bound; more pods wait, unschedulable. Then,
with the API server down (SIGKILL), half the bound pods and some of the waiting ones are
deleted in etcd itself and etcd is compacted to its latest revision. When the API server
comes back, its watch cache starts at the new revision, so every watch resumed from an
older resourceVersion gets 410 Gone (the case proves it with a watch of its own) and the
deletes are in no watch at all. The scheduler must re-list, see the pods gone from the
list, free their room and place the waiting pods.

Invariants: a pre-gap watch gets 410; the waiting pods that survived are all bound
(convergence); pods deleted in the gap are never bound; no pod bound twice; no node
over-committed."""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from typing import Any

from kas_dev.cluster.nodes import NodeGroup
from tests.faults import invariants
from tests.faults.harness import Bed, SchedulerSettings, pods_named, wait_until
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult

NS = "expiry"
ETCD_PREFIX = "/registry"  # kube-apiserver's default --etcd-prefix


def _etcd(bed: Bed, call: str, body: dict[str, Any]) -> dict[str, Any]:
    """etcd's v3 JSON gateway (the API server is down; etcd is not)."""
    assert bed.local.state is not None
    url = f"http://127.0.0.1:{bed.local.state.ports['etcd']}/v3/{call}"
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return dict(json.loads(resp.read()))


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def delete_pods_in_etcd(bed: Bed, namespace: str, names: list[str]) -> int:
    deleted = 0
    for n in names:
        out = _etcd(bed, "kv/deleterange", {"key": _b64(f"{ETCD_PREFIX}/pods/{namespace}/{n}")})
        deleted += int(out.get("deleted", 0))
    return deleted


def compact_etcd(bed: Bed) -> int:
    head = _etcd(bed, "kv/range", {"key": _b64(f"{ETCD_PREFIX}/"), "keys_only": True, "limit": 1})
    revision = int(head["header"]["revision"])
    _etcd(bed, "kv/compaction", {"revision": revision, "physical": True})
    return revision


def watch_status(bed: Bed, namespace: str, resource_version: str) -> int:
    """The HTTP code (or the code of the first ERROR event) of a watch resumed from
    `resource_version`: 410 when that version has expired."""
    status, out = bed.cluster.admin.request(
        "GET",
        f"/api/v1/namespaces/{namespace}/pods?watch=1&resourceVersion={resource_version}"
        "&timeoutSeconds=1",
    )
    if status != 200:
        return status
    # a watch answers with one JSON event per line; the first tells whether it expired
    text = out if isinstance(out, str) else json.dumps(out)
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("type") == "ERROR":
            return int((ev.get("object") or {}).get("code") or 0)
        return 200
    return 200


def _unschedulable(p: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in (p.get("status") or {}).get("conditions") or []
    )


def run(ctx: RunContext, result: CaseResult) -> None:
    node_count = 10 if ctx.full else 4
    per_node = 4  # fillers of 1 cpu on 4-cpu nodes
    settings = SchedulerSettings()
    bed = Bed(
        ctx.workdir,
        [NodeGroup(count=node_count, name_prefix="we", cpu="4", memory="16Gi")],
        ctx.say,
    )
    try:
        bed.namespace(NS)
        sched = bed.start_scheduler("a", settings)
        fillers = pods_named("filler", node_count * per_node, cpu="1")
        bed.create_pods(NS, fillers)
        filler_names = {p["metadata"]["name"] for p in fillers}
        met, _ = wait_until(
            lambda: (
                filler_names
                <= {p["metadata"]["name"] for p in bed.pods(NS) if p["spec"].get("nodeName")}
            ),
            60 + len(fillers) / settings.qps,
        )
        result.check("the fillers are bound before the gap", met)
        waiting = pods_named("waiting", node_count * 2, cpu="1")
        bed.create_pods(NS, waiting)
        waiting_names = sorted(p["metadata"]["name"] for p in waiting)
        # every waiting pod has been tried and found unschedulable (the scheduler's
        # own PodScheduled=False condition, as the API server holds it)
        wait_until(
            lambda: all(
                _unschedulable(p)
                for p in bed.pods(NS)
                if p["metadata"]["name"] in set(waiting_names)
            ),
            30 + 2 * settings.pod_max_backoff,
        )
        listed = bed.cluster.api("GET", f"/api/v1/namespaces/{NS}/pods")
        rv_before = listed["metadata"]["resourceVersion"]
        relists_before = sched.metric_or_none("scheduler_informer_relists_total", resource="pods")

        # --- the gap: API server down, deletes done in etcd, history compacted
        bed.kill_apiserver()
        gone_bound = sorted(filler_names)[: len(filler_names) // 2]
        # a quarter of the waiting pods go too: they must never be bound
        gone_waiting = waiting_names[: len(waiting_names) // 4]
        survivors = set(waiting_names) - set(gone_waiting)
        deleted = delete_pods_in_etcd(bed, NS, gone_bound + gone_waiting)
        revision = compact_etcd(bed)
        ctx.say(f"deleted {deleted} pods in etcd, compacted at revision {revision}")
        t0 = time.monotonic()
        bed.start_apiserver()
        ctx.say(f"kube-apiserver back in {time.monotonic() - t0:.1f}s")
        result.figure("pods deleted during the gap", deleted)

        t1 = time.monotonic()
        code = watch_status(bed, NS, rv_before)
        result.check("a watch from before the gap gets 410 Gone", code == 410, f"got {code}")

        # converge: the freed room (len(gone_bound) cpus) holds every surviving waiting pod
        met, _ = wait_until(
            lambda: (
                survivors
                <= {p["metadata"]["name"] for p in bed.pods(NS) if p["spec"].get("nodeName")}
            ),
            60 + 3 * settings.pod_max_backoff,
            1.0,
        )
        result.figure(
            "seconds from the API server's return to convergence", round(time.monotonic() - t1, 1)
        )
        unbound = invariants.unbound(bed.pods(NS), survivors)
        result.check(
            "the scheduler converges: every surviving waiting pod bound",
            met,
            f"unbound: {unbound[:8]}" if unbound else f"{len(survivors)} bound",
        )
        relists_after = sched.metric_or_none("scheduler_informer_relists_total", resource="pods")
        result.figure(
            "scheduler_informer_relists_total{resource=pods} during the gap",
            "absent"
            if relists_before is None or relists_after is None
            else relists_after - relists_before,
        )
        # the scheduler's own account, for the record (the check above is the case's own watch)
        log = sched.proc.log_path.read_text(errors="replace")
        result.figure(
            "scheduler informers that logged an expired watch", log.count("watch expired")
        )
        binds = bed.audit.binds({NS})
        bound_gone = sorted({c.name for c in binds if c.ok and c.name in set(gone_waiting)})
        result.check(
            "pods deleted during the gap are never bound",
            not bound_gone,
            ", ".join(bound_gone[:5]),
        )
        invariants.bound_at_most_once(result, binds)
        invariants.no_overcommit(result, bed)
    finally:
        bed.close()


CASE = Case(
    "watch_expiry",
    "etcd compacted while the API server is down: every watch gets 410, deletes missed",
    needs_cluster=True,
    run=run,
)
