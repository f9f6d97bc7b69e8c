"""Asynchronous preemption, proven against the real control plane: a webhook holds every
victim DELETE for DELAY seconds at the API server itself.

Upstream's PreemptionAsync shape on one node: four 900m low-priority pods on 4 CPU, a
3-CPU preemptor must evict three (two in parallel, then the last one: the task takes at
least 2 x DELAY). While the DELETEs are held, ordinary pods are created for other nodes:

- mode Async (the default): they are all bound before the preemption's last DELETE is
  answered;
- mode Sync: none is bound before it, the loop waits for the API calls.

Each test runs its own scheduler process (fresh metrics) on its own nodes and namespace
of one shared cluster; the metrics of the task are checked against what really happened.
The scheduler runs with an identity of its own and the API server's audit log records its
writes: "one DELETE per victim" counts its DELETE requests there, not webhook calls (the
API server may call the webhook twice for one graceful DELETE, and never for a second
DELETE of a pod already terminating; tests.preemption_helpers).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.faults import audit
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import (
    BASE_TIME,
    SCHED,
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

DELAY = 2.0
ORDINARY = 10
MODES = ("Async", "Sync")


@dataclass
class Env:
    cluster: ClusterHandle
    audit: audit.AuditLog
    identities: Path  # where each test's scheduler gets its client certificate


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("async")
    groups = []
    for mode in MODES:
        m = mode.lower()
        groups += [
            NodeGroup(count=1, name_prefix=f"{m}-pre", cpu="4", memory="16Gi",
                      labels={"role": f"{m}-pre"}),
            NodeGroup(count=2, name_prefix=f"{m}-free", cpu="8", memory="32Gi",
                      labels={"role": f"{m}-free"}),
        ]  # fmt: skip
    log = audit.AuditLog(d / "audit.log")
    local = LocalCluster(d / "cluster")
    local.up(groups, extra_apiserver_args=audit.apiserver_args(d / "audit-policy.json", log.path))
    handle = ClusterHandle(local)
    try:
        create_priority_classes(handle, {"low": 100, "high": 1000})
        yield Env(handle, log, d / "identities")
    finally:
        local.down()


def _user(mode: str) -> str:
    return f"{mode.lower()}-scheduler"


@dataclass
class Run:
    victims: list[str]  # most important first: the last is deleted last
    survivor: str
    preemptor: str
    ordinary: list[str]
    created_at: float  # when the ordinary pods were created (monotonic)
    in_flight_at_create: int
    goroutines_while_held: float


def _run(env: Env, tmp: Path, mode: str) -> tuple[Run, SchedulerProcess,
                                                 RecordingWebhook, PodWatch]:  # fmt: skip
    cluster = env.cluster
    m = mode.lower()
    ns = cluster.create_namespace(f"preempt-{m}")
    node = f"{m}-pre-0"
    names = [f"v{i}" for i in range(4)]
    for n in names:
        cluster.create_pod(ns, victim_manifest(n, node, "low", "900m"))
    wait_running(cluster, ns, names)
    for i, n in enumerate(names):  # v0 started first: the most important of equals
        set_start_time(cluster, ns, n, BASE_TIME.replace(minute=i))
    hook = RecordingWebhook(cluster, ns)
    hook.start()
    hook.delay = DELAY
    watch = PodWatch(cluster, ns).start()
    cfg = write_config(
        tmp / f"{m}.yaml",
        profiles=[{
            "schedulerName": SCHED,
            "pluginConfig": [{"name": "DefaultPreemption", "args": {"mode": mode}}],
        }],
    )  # fmt: skip
    kubeconfig = audited_identity(cluster.local, _user(mode), env.identities)
    sched = SchedulerProcess(kubeconfig, cfg, tmp / f"{m}.log").start()
    cluster.create_pod(
        ns,
        pod_manifest(
            "preemptor", cpu="3", priority_class="high", nodeSelector={"role": f"{m}-pre"}
        ),
    )
    # the first DELETEs are held at the API server: the task is in flight
    wait_for(
        lambda: hook.in_flight >= 1, timeout=30, what=f"a victim DELETE in flight\n{sched.tail()}"
    )
    goroutines = sched.metric("scheduler_goroutines", operation="preemption")
    created_at = time.monotonic()
    ordinary = [f"ordinary-{i}" for i in range(ORDINARY)]
    for o in ordinary:
        cluster.create_pod(ns, pod_manifest(o, cpu="100m", nodeSelector={"role": f"{m}-free"}))
    in_flight = hook.in_flight
    wait_for(lambda: all(node_of(cluster, ns, o) for o in ordinary) and node_of(cluster, ns, "preemptor"),
             timeout=60, what=f"all pods bound\n{sched.tail()}")  # fmt: skip
    # v0 is the most important of the four: it stays; v3 is the least: deleted last
    run = Run(["v1", "v2", "v3"], "v0", "preemptor", ordinary, created_at, in_flight, goroutines)
    return run, sched, hook, watch


def _check_common(env: Env, run: Run, sched: SchedulerProcess, hook: RecordingWebhook,
                  watch: PodWatch, mode: str) -> dict[str, float]:  # fmt: skip
    cluster, user = env.cluster, _user(mode)
    ns, node = f"preempt-{mode.lower()}", f"{mode.lower()}-pre-0"
    assert run.in_flight_at_create >= 1, "the ordinary pods must be created while a DELETE is held"
    assert node_of(cluster, ns, run.preemptor) == node
    assert node_of(cluster, ns, run.survivor) == node
    # exactly one DELETE request per victim from the scheduler, none for the survivor,
    # all allowed (the audit log: every request, whatever its answer)
    wait_deletes_audited(env.audit, ns, user, run.victims)
    assert delete_counts(env.audit, ns, user) == dict.fromkeys(run.victims, 1)
    sent = {c.name: c for c in delete_requests(env.audit, ns, user)}
    assert all(c.ok for c in sent.values()), sent
    for v in run.victims:
        # as the API server held it at the DELETE it carried out: DisruptionTarget set by
        # the scheduler, no one else's DELETE before it
        assert set(hook.users.get(v, [])) == {user}, hook.users.get(v)
        old = hook.last_old_object(v, user)
        assert old is not None, f"no DELETE of {v} reached the webhook"
        cond = disruption_target(old)
        assert cond is not None and cond["reason"] == "PreemptionByScheduler"
    # the last victim's DELETE is sent only after the others were answered (the API
    # server's own clock, both ends of each request)
    assert sent["v3"].received >= max(sent["v1"].completed, sent["v2"].completed), sent
    # webhook times (time.monotonic(), the clock of the watch): when each victim's last
    # admission call was answered, and when the first one started
    ends = webhook_ends(hook, run.victims)
    assert set(ends) == set(run.victims)
    starts = [t for t, pod, what in list(hook.log) if what == "start"]

    # metrics: one task, a success, lasting at least the two held phases
    metric = sched.metric
    assert metric("scheduler_preemption_goroutines_execution_total", result="success") == 1
    assert metric("scheduler_preemption_goroutines_execution_total", result="error") == 0
    assert metric("scheduler_preemption_goroutines_duration_seconds_count", result="success") == 1
    took = metric("scheduler_preemption_goroutines_duration_seconds_sum", result="success")
    held = ends["v3"] - min(starts)
    assert 2 * DELAY <= held <= took + 0.5, (held, took)
    assert took < 2 * DELAY + 5, took
    assert metric("scheduler_preemption_victims_count") == 1
    assert metric("scheduler_preemption_victims_sum") == 3
    assert metric("scheduler_preemption_victims_bucket", le="2.0") == 0
    assert metric("scheduler_preemption_victims_bucket", le="4.0") == 1
    # PostFilter ran once per unschedulable cycle of the preemptor, and at least once
    attempts = metric("scheduler_preemption_attempts_total")
    assert attempts >= 1
    assert attempts == metric("scheduler_schedule_attempts_total", result="unschedulable")
    wait_for(lambda: sched.metric("scheduler_pending_pods", queue="gated") == 0, timeout=10,
             what="no pod gated")  # fmt: skip
    assert sched.metric("scheduler_goroutines", operation="preemption") == 0
    # the preemptor carried its nomination while the victims went
    watch.wait(run.preemptor, lambda o: (o.get("status") or {}).get("nominatedNodeName") == node
               and not bound(o))  # fmt: skip
    return ends


def _bound_at(watch: PodWatch, name: str) -> float:
    """When the watch first showed the pod bound."""
    watch.wait(name, bound)
    t = watch.first_seen(name, bound)
    assert t is not None
    return t


def test_async_mode_binds_other_pods_while_the_preemption_calls_are_in_flight(
    env: Env, tmp_path: Path
) -> None:
    run, sched, hook, watch = _run(env, tmp_path, "Async")
    try:
        ends = _check_common(env, run, sched, hook, watch, "Async")
        assert run.goroutines_while_held == 1
        bound_at = {o: _bound_at(watch, o) for o in run.ordinary}
        last_answered = ends["v3"]
        late = {
            o: t - last_answered for o, t in bound_at.items() if t is None or t >= last_answered
        }
        assert late == {}, f"bound only after the preemption's last DELETE: {late}"
    finally:
        watch.stop()
        sched.stop()
        hook.stop()


def test_sync_mode_makes_other_pods_wait_for_the_preemption_calls(
    env: Env, tmp_path: Path
) -> None:
    run, sched, hook, watch = _run(env, tmp_path, "Sync")
    try:
        ends = _check_common(env, run, sched, hook, watch, "Sync")
        bound_at = {o: _bound_at(watch, o) for o in run.ordinary}
        last_answered = ends["v3"]
        early = {o: t for o, t in bound_at.items() if t <= last_answered}
        assert early == {}, "bound while the synchronous preemption's calls were in flight"
    finally:
        watch.stop()
        sched.stop()
        hook.stop()
