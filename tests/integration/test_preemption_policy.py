"""PreemptionPolicy against the real control plane: what the scheduler does, measured
from the cluster (which pods got a deletionTimestamp, where the preemptor went, what the
policy's status says), with the scheduler run as a process with --preemption-policies.

Each scenario owns one kwok node (label pp=<id>), its own namespace and its own
preemptor PriorityClass; each policy names that class in `preemptors`, so the scenarios
share one cluster and one scheduler without one policy touching another's preemptor.
Victims are bound at creation (spec.nodeName); start times are set before the
preemptor exists. The victims' PriorityClass is shared ("pp-low").
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import (
    BASE_TIME,
    PodWatch,
    create_priority_classes,
    set_start_time,
    victim_manifest,
    wait_running,
)
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "charts/kube-async-scheduler/files/preemptionpolicy-crd.yaml"
POLICIES = "/apis/scheduling.kas.io/v1alpha1/preemptionpolicies"
MERGE = "application/merge-patch+json"
SCENARIOS = ("prot", "tol", "cool", "cap", "expl")
CLASSES = {"pp-zero": 0, "pp-low": 10, "pp-mid": 20} | {f"pp-hi-{s}": 1000 for s in SCENARIOS}


@dataclass
class Env:
    cluster: ClusterHandle
    sched: SchedulerProcess


def install_crd(cluster: ClusterHandle) -> None:
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        "crd/preemptionpolicies.scheduling.kas.io",
    )  # fmt: skip


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("policy")
    groups = [
        NodeGroup(count=1, name_prefix=s, cpu="6" if s == "cool" else "4", labels={"pp": s})
        for s in SCENARIOS
    ]
    local = LocalCluster(d / "cluster")
    local.up(groups)
    cluster = ClusterHandle(local)
    sched: SchedulerProcess | None = None
    try:
        install_crd(cluster)
        create_priority_classes(cluster, CLASSES)
        config = write_config(d / "config.yaml", podInitialBackoffSeconds=1, podMaxBackoffSeconds=1)
        sched = SchedulerProcess(
            cluster.kubeconfig, config, d / "s.log", extra_args=["--preemption-policies"]
        ).start()
        yield Env(cluster, sched)
    finally:
        if sched is not None:
            sched.stop()
        local.down()


# ---------------------------------------------------------------- helpers


def create_policy(cluster: ClusterHandle, name: str, spec: dict[str, Any]) -> None:
    cluster.api("POST", POLICIES, {
        "apiVersion": "scheduling.kas.io/v1alpha1", "kind": "PreemptionPolicy",
        "metadata": {"name": name}, "spec": spec,
    })  # fmt: skip


def patch_policy(cluster: ClusterHandle, name: str, spec: dict[str, Any]) -> None:
    cluster.api("PATCH", f"{POLICIES}/{name}", {"spec": spec}, content_type=MERGE)


def policy(cluster: ClusterHandle, name: str) -> dict[str, Any]:
    return dict(cluster.api("GET", f"{POLICIES}/{name}"))


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return dict(c)
    return {}


def wait_observed(cluster: ClusterHandle, name: str, generation: int) -> dict[str, Any]:
    def observed() -> dict[str, Any] | None:
        obj = policy(cluster, name)
        return obj if (obj.get("status") or {}).get("observedGeneration") == generation else None

    return dict(
        wait_for(observed, timeout=30, interval=0.02, what=f"policy {name} generation {generation}")
    )


def preemptor(name: str, scenario: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return pod_manifest(
        name, cpu=cpu, priority_class=f"pp-hi-{scenario}", nodeSelector={"pp": scenario}, **spec
    )


def bind_victims(cluster: ClusterHandle, ns: str, node: str, victims: dict[str, Any]) -> None:
    """victims: name -> (cpu, start offset seconds after BASE_TIME or None, extra)."""
    for name, (cpu, _, extra) in victims.items():
        cluster.create_pod(ns, victim_manifest(name, node, "pp-low", cpu, **extra))
    wait_running(cluster, ns, victims)
    for name, (_, start, _) in victims.items():
        if start is not None:
            set_start_time(cluster, ns, name, BASE_TIME + dt.timedelta(seconds=start))


def terminating(cluster: ClusterHandle, ns: str, name: str) -> bool:
    pod = cluster.get_pod(ns, name)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


def scheduled_message(cluster: ClusterHandle, ns: str, name: str) -> str:
    pod = cluster.get_pod(ns, name) or {}
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c.get("message") or "")
    return ""


def ever_disrupted(watch: PodWatch, name: str) -> bool:
    return any(
        obj["metadata"].get("deletionTimestamp")
        or any(c.get("type") == "DisruptionTarget" for c in obj["status"].get("conditions") or [])
        for _, obj in watch.history(name)
    )


# ---------------------------------------------------------------- tests


def test_a_protected_namespace_is_never_preempted_an_invalid_update_keeps_it_and_delete_frees_it(
    env: Env,
) -> None:
    cluster, ns = env.cluster, "pp-prot"
    cluster.create_namespace(ns)
    watch = PodWatch(cluster, ns).start()
    try:
        bind_victims(cluster, ns, "prot-0", {"guarded": ("4", 0, {})})
        create_policy(cluster, "protect", {
            "preemptors": {"priorityClassNames": ["pp-hi-prot"]},
            "protectedNamespaces": [ns, "kube-system"],
        })  # fmt: skip
        # from the API's answer (the first object of a new CRD takes the API server ~2 s
        # to store; that is not the scheduler's time)
        started = time.monotonic()
        assert ready(wait_observed(cluster, "protect", 1))["status"] == "True"
        took = time.monotonic() - started
        print(f"policy created -> in force and its status written: {took:.3f}s")
        assert took < 1.0, took
        meta = policy(cluster, "protect")["metadata"]  # nothing but status is written to it
        assert not meta.get("finalizers") and not any(
            "kopf" in a for a in meta.get("annotations") or {}
        )

        cluster.create_pod(ns, preemptor("pre", "prot", "4"))
        message = wait_for(
            lambda: (
                "PreemptionPolicy protect" in scheduled_message(cluster, ns, "pre")
                and scheduled_message(cluster, ns, "pre")
            ),
            what="the preemptor's message naming the policy",
        )
        assert "1 pod(s) in a protected namespace" in message
        wait_for(lambda: env.sched.metric(
            "scheduler_preemption_policy_refusals_total", policy="protect") >= 1)  # fmt: skip

        # an invalid update: Ready=False with the reason, generation 1 stays in force
        patch_policy(cluster, "protect", {
            "victims": {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
        })  # fmt: skip
        obj = wait_observed(cluster, "protect", 2)
        cond = ready(obj)
        assert cond["status"] == "False" and "must be non-empty for operator In" in cond["message"]
        assert obj["status"]["inForceGeneration"] == 1
        cluster.create_pod(ns, preemptor("pre2", "prot", "4"))
        wait_for(lambda: "PreemptionPolicy protect" in scheduled_message(cluster, ns, "pre2"))
        assert not ever_disrupted(watch, "guarded")
        assert cluster.get_pod(ns, "pre")["spec"].get("nodeName") is None  # type: ignore[index]
        wait_for(lambda: policy(cluster, "protect")["status"]["preemptionsRefused"] >= 2)

        # delete: the pending preemptors get their chance at once (no restart)
        started = time.monotonic()
        cluster.api("DELETE", f"{POLICIES}/protect")
        wait_for(lambda: terminating(cluster, ns, "guarded"), interval=0.02, what="the victim")
        took = time.monotonic() - started
        print(f"policy deleted -> victim terminating: {took:.3f}s")
        assert took < 1.0, took
    finally:
        watch.stop()


def test_toleration_spares_a_pod_that_started_recently(env: Env) -> None:
    cluster, ns = env.cluster, "pp-tol"
    cluster.create_namespace(ns)
    # "young" keeps the start time kwok gave it (now); "old" started long ago, so it is
    # the more important of the two and, without the policy, the one reprieved
    bind_victims(cluster, ns, "tol-0", {"old": ("2", 0, {}), "young": ("2", None, {})})
    create_policy(cluster, "tolerate", {
        "preemptors": {"priorityClassNames": ["pp-hi-tol"]}, "tolerationSeconds": 600,
    })  # fmt: skip
    wait_observed(cluster, "tolerate", 1)
    cluster.create_pod(ns, preemptor("pre", "tol", "2"))
    wait_for(lambda: terminating(cluster, ns, "old"), what="the old pod preempted")
    wait_for(lambda: (cluster.get_pod(ns, "pre") or {})["spec"].get("nodeName") == "tol-0")
    assert not terminating(cluster, ns, "young")
    wait_for(lambda: policy(cluster, "tolerate")["status"]["victimsChosen"] == 1)


def test_cooldown_spares_the_other_pods_of_an_owner_just_preempted(env: Env) -> None:
    cluster, ns = env.cluster, "pp-cool"
    cluster.create_namespace(ns)
    owners = {}
    for cm in ("cm-a", "cm-b"):
        made = cluster.api(
            "POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": cm}}
        )
        owners[cm] = {"ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": cm,
            "uid": made["metadata"]["uid"], "controller": True,
        }]}  # fmt: skip

    def owned(cm: str) -> dict[str, Any]:
        return {"labels": {"owner": cm}}

    # least important first: a1 (latest start), then a2, then b1
    victims = {"a1": ("2", 300, {}), "a2": ("2", 200, {}), "b1": ("2", 100, {})}
    for name, (cpu, _, _) in victims.items():
        body = victim_manifest(name, "cool-0", "pp-low", cpu, **owned(name[0]))
        body["metadata"].update(owners[f"cm-{name[0]}"])
        cluster.create_pod(ns, body)
    wait_running(cluster, ns, victims)
    for name, (_, start, _) in victims.items():
        set_start_time(cluster, ns, name, BASE_TIME + dt.timedelta(seconds=start))
    create_policy(cluster, "cooldown", {
        "preemptors": {"priorityClassNames": ["pp-hi-cool"]}, "cooldownSeconds": 600,
    })  # fmt: skip
    wait_observed(cluster, "cooldown", 1)

    cluster.create_pod(ns, preemptor("p1", "cool", "2"))
    wait_for(lambda: terminating(cluster, ns, "a1"), what="a1 preempted")
    wait_for(lambda: (cluster.get_pod(ns, "p1") or {})["spec"].get("nodeName") == "cool-0")
    # without the cooldown a2 (less important than b1) would go; cm-a is cooling down
    cluster.create_pod(ns, preemptor("p2", "cool", "2"))
    wait_for(lambda: terminating(cluster, ns, "b1"), what="b1 preempted")
    wait_for(lambda: (cluster.get_pod(ns, "p2") or {})["spec"].get("nodeName") == "cool-0")
    assert not terminating(cluster, ns, "a2")


def test_the_victim_cap_refuses_then_a_raised_cap_takes_effect_at_once(env: Env) -> None:
    cluster, ns = env.cluster, "pp-cap"
    cluster.create_namespace(ns)
    bind_victims(cluster, ns, "cap-0", {f"v{i}": ("1", i, {}) for i in range(4)})
    create_policy(cluster, "cap", {
        "preemptors": {"priorityClassNames": ["pp-hi-cap"]}, "maxVictimsPerPreemption": 3,
    })  # fmt: skip
    wait_observed(cluster, "cap", 1)
    cluster.create_pod(ns, preemptor("pre", "cap", "4"))
    message = wait_for(lambda: "PreemptionPolicy cap" in scheduled_message(cluster, ns, "pre")
                       and scheduled_message(cluster, ns, "pre"))  # fmt: skip
    assert "needed more victims than maxVictimsPerPreemption" in message
    assert not any(terminating(cluster, ns, f"v{i}") for i in range(4))

    started = time.monotonic()
    patch_policy(cluster, "cap", {"maxVictimsPerPreemption": 4})
    wait_for(lambda: all(terminating(cluster, ns, f"v{i}") for i in range(4)), interval=0.02)
    took = time.monotonic() - started
    print(f"cap raised -> 4 victims terminating: {took:.3f}s")
    assert took < 1.0, took
    wait_for(lambda: (cluster.get_pod(ns, "pre") or {})["spec"].get("nodeName") == "cap-0")
    wait_for(lambda: policy(cluster, "cap")["status"]["victimsChosen"] == 4)


def _explain(env: Env, key: str, *, output: str = "json") -> str:
    admin = env.sched.admin
    assert admin is not None
    res = subprocess.run(
        [sys.executable, "-m", "scheduler", "explain", key, "--url", env.sched.url, "-o", output,
         "--client-certificate", str(admin.cert), "--client-key", str(admin.key),
         "--certificate-authority", str(env.sched.server_ca)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return res.stdout


def _versions(cluster: ClusterHandle, *namespaces: str) -> dict[str, str]:
    out = {}
    for ns in namespaces:
        for p in cluster.list_pods(ns):
            out[f"pod/{ns}/{p['metadata']['name']}"] = p["metadata"]["resourceVersion"]
    for n in cluster.api("GET", "/api/v1/nodes")["items"]:
        out[f"node/{n['metadata']['name']}"] = n["metadata"]["resourceVersion"]
    for pol in cluster.api("GET", POLICIES)["items"]:
        out[f"policy/{pol['metadata']['name']}"] = pol["metadata"]["resourceVersion"]
    return out


def test_explain_predicts_the_preemption_and_the_placement_and_changes_nothing(env: Env) -> None:
    cluster, ns, sys_ns = env.cluster, "pp-expl", "pp-expl-sys"
    cluster.create_namespace(ns)
    cluster.create_namespace(sys_ns)
    # x1 started last, so it is the least important: without the policy the plan would
    # evict x1 alone; the policy protects sys_ns, so the plan must take y1 and y2 and
    # name the policy that shaped it
    bind_victims(cluster, sys_ns, "expl-0", {"x1": ("2", 30, {})})
    bind_victims(cluster, ns, "expl-0", {"y1": ("1", 10, {}), "y2": ("1", 20, {})})
    create_policy(cluster, "shape", {
        "preemptors": {"priorityClassNames": ["pp-hi-expl"]}, "protectedNamespaces": [sys_ns],
    })  # fmt: skip
    wait_observed(cluster, "shape", 1)
    cluster.create_pod(ns, preemptor("pre", "expl", "2", schedulingGates=[{"name": "pp/hold"}]))
    wait_for(lambda: _try_json(env, f"{ns}/pre"), what="the scheduler's cache holding the pod")

    before = _versions(cluster, ns, sys_ns)
    body = json.loads(_explain(env, f"{ns}/pre"))
    table = _explain(env, f"{ns}/pre", output="table")
    assert _versions(cluster, ns, sys_ns) == before, "explain changed the cluster"
    plan = body["now"]["preemption"]
    assert body["schedulingGates"] == ["pp/hold"] and body["lastAttempt"] is None
    assert plan["node"] == "expl-0" and plan["policies"] == ["shape"]
    assert sorted(v["pod"] for v in plan["victims"]) == [f"{ns}/y1", f"{ns}/y2"]
    assert "Preemption:    on node expl-0, 2 victim(s)" in table

    # lift the gate: the scheduler does what explain said
    cluster.api("PATCH", f"/api/v1/namespaces/{ns}/pods/pre", {"spec": {"schedulingGates": None}},
                content_type=MERGE)  # fmt: skip
    wait_for(lambda: terminating(cluster, ns, "y1") and terminating(cluster, ns, "y2"))
    wait_for(lambda: (cluster.get_pod(ns, "pre") or {})["spec"].get("nodeName") == "expl-0")
    assert not terminating(cluster, sys_ns, "x1")

    # a pod that cannot preempt (priority 0): the last attempt's verdict per node
    cluster.create_pod(ns, pod_manifest("waiter", cpu="2", priority_class="pp-zero",
                                        nodeSelector={"pp": "expl"}))  # fmt: skip
    body = wait_for(lambda: (b := _try_json(env, f"{ns}/waiter?nodes=true")) and b["lastAttempt"]
                    and b)  # fmt: skip
    nodes = {n["node"]: n for n in body["lastAttempt"]["nodes"]}
    assert nodes["expl-0"]["plugin"] == "NodeResourcesFit"
    assert nodes["expl-0"]["reason"] == "Insufficient cpu"
    assert body["now"]["result"] == "Unschedulable"
    assert body["now"]["preemption"]["node"] is None
    # free the capacity explain named: the pod goes there
    cluster.api("DELETE", f"/api/v1/namespaces/{sys_ns}/pods/x1?gracePeriodSeconds=0")
    wait_for(lambda: (cluster.get_pod(ns, "waiter") or {})["spec"].get("nodeName") == "expl-0")


def _try_json(env: Env, key: str) -> dict[str, Any] | None:
    code, text = env.sched.get(f"/explain/{key}")
    return json.loads(text) if code == 200 else None


def test_with_two_replicas_only_the_leader_writes_policy_status(
    make_cluster: Any, tmp_path: Path
) -> None:
    cluster = make_cluster(1)
    install_crd(cluster)
    cfg = write_config(
        tmp_path / "ha.yaml",
        profiles=[{"schedulerName": "pp-ha"}],
        leaderElection={
            "leaderElect": True, "resourceNamespace": "default", "resourceName": "pp-ha",
            "leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s",
        },
    )  # fmt: skip
    replicas = [
        SchedulerProcess(cluster.kubeconfig, cfg, tmp_path / f"r{i}.log",
                         extra_args=["--preemption-policies"])
        for i in range(2)
    ]  # fmt: skip
    try:
        for r in replicas:
            r.start()
        leader = wait_for(
            lambda: next(
                (r for r in replicas if r.metric("scheduler_leader_election_is_leader") == 1),
                None,
            ),
            what="a leader",
        )
        follower = next(r for r in replicas if r is not leader)
        create_policy(cluster, "ha", {"maxVictimsPerPreemption": 5})
        wait_observed(cluster, "ha", 1)
        patch_policy(cluster, "ha", {"maxVictimsPerPreemption": 6})
        wait_observed(cluster, "ha", 2)
        # the shipped example is accepted by the CRD's schema and by the scheduler
        cluster.kubectl("apply", "-f", str(ROOT / "deploy/examples/preemptionpolicy.yaml"))
        assert ready(wait_observed(cluster, "prod-preempts-batch", 1))["status"] == "True"
        writes = "scheduler_preemption_policy_status_writes_total"
        assert leader.metric(writes, result="success") >= 3
        assert follower.metric(writes) == 0
        # the leader leaves (its Lease is released): the new leader writes from now on
        leader.stop()
        wait_for(lambda: follower.metric("scheduler_leader_election_is_leader") == 1,
                 what="the follower leading")  # fmt: skip
        patch_policy(cluster, "ha", {"maxVictimsPerPreemption": 7})
        wait_observed(cluster, "ha", 3)
        assert follower.metric(writes, result="success") >= 1
    finally:
        for r in replicas:
            r.stop()
