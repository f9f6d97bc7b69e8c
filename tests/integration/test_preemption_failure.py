"""Preemption when things go wrong or compete, against the real control plane:

- the API server refuses a victim's DELETE (the webhook says no): the task fails, the
  last victim is left alone, the preemptor is requeued (not stuck) and lands once the
  refusal stops; nothing stays gated;
- two preemptors of equal priority aimed at the only node that can take one of them:
  the first wins, the second sees its nomination and evicts nobody;
- a higher-priority preemptor arriving while a lower one's DELETEs are held: it takes
  the space (as with synchronous preemption), the lower one's nomination is cleared,
  and no victim is deleted twice.

One cluster and one scheduler for the module; each test has its own node and namespace.
The scheduler runs with an identity of its own and the API server's audit log records its
writes: DELETEs, and refusals, are counted there as requests with their answer, not as
webhook calls. The API server may call the webhook twice for one graceful DELETE, allowed
or refused (its update started from a stale watch-cache copy is retried from etcd), and
never for a second DELETE of a pod already terminating (tests.preemption_helpers).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.faults import audit
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import (
    BASE_TIME,
    PodWatch,
    RecordingWebhook,
    audited_identity,
    bound,
    create_priority_classes,
    delete_counts,
    delete_requests,
    disruption_target,
    node_of,
    set_start_time,
    victim_manifest,
    wait_deletes_audited,
    wait_running,
    webhook_ends,
)
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = pytest.mark.cluster

NODES = ("refuse", "twin", "overtake")
SCHED_USER = "failure-scheduler"  # the scheduler's client identity (in the audit log)


@dataclass
class Env:
    cluster: ClusterHandle
    sched: SchedulerProcess
    audit: audit.AuditLog


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("failure")
    groups = [
        NodeGroup(count=1, name_prefix=n, cpu="4", memory="16Gi", labels={"role": n}) for n in NODES
    ]
    log = audit.AuditLog(d / "audit.log")
    local = LocalCluster(d / "cluster")
    local.up(groups, extra_apiserver_args=audit.apiserver_args(d / "audit-policy.json", log.path))
    cluster = ClusterHandle(local)
    # pod backoff 1 s .. 2 s: also the re-activation delays of a preemptor that keeps
    # failing, so the refusal test sees them grow without waiting long
    cfg = write_config(d / "config.yaml", podInitialBackoffSeconds=1, podMaxBackoffSeconds=2)
    kubeconfig = audited_identity(local, SCHED_USER, d / "identities")
    sched = SchedulerProcess(kubeconfig, cfg, d / "s.log")
    try:
        create_priority_classes(cluster, {"low": 100, "mid": 500, "high": 900})
        sched.start()
        yield Env(cluster, sched, log)
    finally:
        sched.stop()
        local.down()


def _victims(cluster: ClusterHandle, ns: str, node: str, n: int, cpu: str) -> list[str]:
    """n low-priority pods on `node`, v0 started first (most important of equals)."""
    names = [f"v{i}" for i in range(n)]
    for v in names:
        cluster.create_pod(ns, victim_manifest(v, node, "low", cpu))
    wait_running(cluster, ns, names)
    for i, v in enumerate(names):
        set_start_time(cluster, ns, v, BASE_TIME + dt.timedelta(minutes=i))
    return names


def _preemptor(name: str, role: str, cls: str) -> dict[str, Any]:
    return pod_manifest(name, cpu="3", priority_class=cls, nodeSelector={"role": role})


def _sent(env: Env, ns: str, name: str) -> list[audit.Call]:
    """The scheduler's DELETE requests for pod `name`, in the order they were received."""
    return [c for c in delete_requests(env.audit, ns, SCHED_USER) if c.name == name]


def _gated(sched: SchedulerProcess) -> float:
    return sched.metric("scheduler_pending_pods", queue="gated")


def _unschedulable_message(cluster: ClusterHandle, ns: str, name: str) -> str:
    p = cluster.get_pod(ns, name) or {}
    for c in (p.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c.get("message", ""))
    return ""


def test_a_refused_victim_delete_requeues_the_preemptor_which_lands_once_allowed(
    env: Env,
) -> None:
    cluster, sched = env.cluster, env.sched
    ns = cluster.create_namespace("refuse")
    _victims(cluster, ns, "refuse-0", 2, "2")  # both must go; v1 is the last victim
    hook = RecordingWebhook(cluster, ns)
    hook.start()
    try:
        hook.refuse = {"v0"}
        errors_before = sched.metric(
            "scheduler_preemption_goroutines_execution_total", result="error"
        )
        cluster.create_pod(ns, _preemptor("preemptor", "refuse", "high"))
        # refused, retried, refused again: requeued, not stuck; but a refusal that
        # persists is no hot loop: the first retry comes at once, further ones back off
        # (requests as the API server received them; the webhook may be called twice
        # for one of them)
        wait_for(lambda: sum(c.code == 403 for c in _sent(env, ns, "v0")) >= 3, timeout=30,
                 what=f"three refused DELETEs of v0\n{sched.tail()}")  # fmt: skip
        starts = [c.received for c in _sent(env, ns, "v0")]
        assert len(starts) <= 4, f"a retry loop: {len(starts)} DELETEs"
        assert starts[2] - starts[1] >= 0.9, starts
        assert (
            sched.metric("scheduler_preemption_goroutines_execution_total", result="error")
            >= errors_before + 3
        )
        # the last victim is left alone while another victim failed
        assert not _sent(env, ns, "v1")
        assert "v1" not in hook.users
        v1 = cluster.get_pod(ns, "v1")
        assert v1 is not None and disruption_target(v1) is None
        assert not v1["metadata"].get("deletionTimestamp")
        assert not node_of(cluster, ns, "preemptor")

        hook.refuse = set()
        wait_for(lambda: node_of(cluster, ns, "preemptor") == "refuse-0", timeout=60,
                 what=f"preemptor bound after the refusal stopped\n{sched.tail()}")  # fmt: skip
        wait_deletes_audited(env.audit, ns, SCHED_USER, ["v0", "v1"])
        wait_for(lambda: any(c.ok for c in _sent(env, ns, "v0")), timeout=10,
                 what="v0's allowed DELETE in the audit log")  # fmt: skip
        assert [c.code for c in _sent(env, ns, "v1")] == [200]
        # the refused ones (403, each one request however many webhook calls), then one
        codes = [c.code for c in _sent(env, ns, "v0")]
        assert len(codes) >= 4 and codes == [403] * (len(codes) - 1) + [200], codes
        wait_for(lambda: _gated(sched) == 0, timeout=10, what="no pod left gated")
        assert sched.metric("scheduler_goroutines", operation="preemption") == 0
        assert (
            sched.metric("scheduler_preemption_goroutines_execution_total", result="success") >= 1
        )
    finally:
        hook.stop()


def test_two_equal_preemptors_for_one_node_the_second_sees_the_nomination(env: Env) -> None:
    cluster, sched = env.cluster, env.sched
    ns = cluster.create_namespace("twin")
    victims = _victims(cluster, ns, "twin-0", 4, "900m")
    hook = RecordingWebhook(cluster, ns)
    hook.start()
    watch = PodWatch(cluster, ns).start()
    try:
        hook.delay = 1.0  # the first preemption is still running when the second comes
        cluster.create_pod(ns, _preemptor("first", "twin", "mid"))
        wait_for(lambda: hook.in_flight >= 1, timeout=30, what="first's DELETEs in flight")
        cluster.create_pod(ns, _preemptor("second", "twin", "mid"))
        wait_for(lambda: node_of(cluster, ns, "first") == "twin-0", timeout=60,
                 what=f"first bound\n{sched.tail()}")  # fmt: skip
        msg = wait_for(lambda: "preemption:" in (m := _unschedulable_message(cluster, ns, "second")) and m,
                       timeout=30, what="second unschedulable after trying preemption")  # fmt: skip
        # upstream's form: a FitError over the dry-run statuses after "preemption: "
        assert re.search(r"preemption: 0/\d+ nodes are available: ", msg), msg
        assert not node_of(cluster, ns, "second")
        # v0 (most important) survives, the three others went once each
        wait_deletes_audited(env.audit, ns, SCHED_USER, victims[1:])
        assert delete_counts(env.audit, ns, SCHED_USER) == dict.fromkeys(victims[1:], 1)
        assert cluster.get_pod(ns, "v0") is not None
        # the second never held a nomination
        assert all(
            not (o.get("status") or {}).get("nominatedNodeName") for _, o in watch.history("second")
        )
        wait_for(lambda: _gated(sched) == 0, timeout=10, what="no pod left gated")
    finally:
        watch.stop()
        hook.stop()
        cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/second")


def test_a_higher_preemptor_takes_the_space_of_a_running_lower_preemption(env: Env) -> None:
    cluster, sched = env.cluster, env.sched
    ns = cluster.create_namespace("overtake")
    victims = _victims(cluster, ns, "overtake-0", 4, "900m")
    hook = RecordingWebhook(cluster, ns)
    hook.start()
    watch = PodWatch(cluster, ns).start()
    try:
        hook.delay = 2.0
        cluster.create_pod(ns, _preemptor("lower", "overtake", "mid"))
        wait_for(lambda: hook.in_flight >= 1, timeout=30, what="lower's DELETEs in flight")
        watch.wait("lower", lambda o: _nominated(o) == "overtake-0")
        cluster.create_pod(ns, _preemptor("higher", "overtake", "high"))
        wait_for(lambda: node_of(cluster, ns, "higher") == "overtake-0", timeout=60,
                 what=f"higher bound\n{sched.tail()}")  # fmt: skip
        # both picked the same three victims; each was deleted exactly once
        wait_deletes_audited(env.audit, ns, SCHED_USER, victims[1:])
        assert delete_counts(env.audit, ns, SCHED_USER) == dict.fromkeys(victims[1:], 1)
        assert cluster.get_pod(ns, "v0") is not None
        # the higher one decided while the lower one's DELETEs were still held
        higher_nominated = watch.first_seen("higher", lambda o: _nominated(o) == "overtake-0")
        assert higher_nominated is not None
        assert higher_nominated < max(webhook_ends(hook, victims[1:]).values())
        # the lower one lost its nomination (cleared by the higher one's task) and stays
        watch.wait("lower", lambda o: not _nominated(o) and not bound(o)
                   and _after_nomination(watch, "lower", o), what="lower's nomination cleared")  # fmt: skip
        wait_for(lambda: "preemption:" in _unschedulable_message(cluster, ns, "lower"),
                 timeout=30, what="lower unschedulable after trying preemption again")  # fmt: skip
        assert not node_of(cluster, ns, "lower")
        assert not (cluster.get_pod(ns, "lower") or {}).get("status", {}).get("nominatedNodeName")
        assert delete_counts(env.audit, ns, SCHED_USER) == dict.fromkeys(victims[1:], 1)
        wait_for(lambda: _gated(sched) == 0, timeout=15, what="no pod left gated")
        assert sched.metric("scheduler_goroutines", operation="preemption") == 0
    finally:
        watch.stop()
        hook.stop()
        cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/lower")


def _nominated(obj: dict[str, Any]) -> str:
    return str((obj.get("status") or {}).get("nominatedNodeName") or "")


def _after_nomination(watch: PodWatch, name: str, obj: dict[str, Any]) -> bool:
    """`obj` is a version of the pod that comes after one carrying a nomination."""
    seen = False
    for _, o in watch.history(name):
        if _nominated(o):
            seen = True
        if o is obj:
            return seen
    return False
