"""The Helm chart for real: `helm install` on a cluster with a real node, the scheduler's
pod started by a kubelet from the image built from the Dockerfile, Ready through its own
probes, scheduling and preempting from inside the pod, enforcing a PreemptionPolicy; a
real Prometheus scraping it as the ServiceMonitor says, every dashboard panel answering;
`helm upgrade` rolling a new configuration in; two scheduler pods sharing one Lease
handing over when the leader's pod is deleted; `helm uninstall` releasing the Lease.

There is no pod network (see charts values: hostNetwork, probeHost, apiServer): the pods
share the machine's loopback, so each release listens on a port of its own. That is also
why the leader-election pair is two releases of one replica sharing a Lease name rather
than one Deployment of two replicas: two host-network pods of one Deployment would both
bind the same port on the one network namespace all real nodes here share.

Few tests, each a whole story, in file order (they share the installed release); every
wait is on an observed state, with generous limits for a loaded 2-core machine."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kas_dev.cluster import prometheus
from kas_dev.cluster.ports import LOOPBACK, free_port
from kas_dev.cluster.scheduler_https import scheduler_get
from tests.e2e.conftest import KWOK_LABEL, RealCluster
from tests.helm_release import CHART, FAST_LEASE, helm, lease_holder, service_account_token
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import create_priority_classes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NS = "kas-e2e"
RELEASE = "kube-async-scheduler"
SECOND = "kube-async-scheduler-b"
LEASE = "kas-e2e-leader"
SCHED = "kube-async-scheduler"
WORK = "work"
LEASE_SECONDS = 6  # FAST_LEASE
DASHBOARD = CHART / "dashboards" / "kube-async-scheduler.json"


@dataclass
class Installed:
    rc: RealCluster
    values: Path
    port: int
    prom_url: str

    @property
    def cluster(self) -> ClusterHandle:
        return self.rc.handle


def _values(rc: RealCluster, port: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    api_port = rc.local.state.ports["kube-apiserver"] if rc.local.state else 0
    values: dict[str, Any] = {
        "image": {"pullPolicy": "Never"},
        # no pod network: the node's namespace, probes and API calls on loopback
        "hostNetwork": True,
        "probeHost": LOOPBACK,
        "apiServer": {"host": LOOPBACK, "port": api_port},
        "server": {"bindAddress": LOOPBACK, "securePort": port},
        # its APIService would point at a ClusterIP nothing routes here (no kube-proxy)
        "explainAPI": {"enabled": False},
        "nodeSelector": {"kas.local/real-node": "true"},
        "leaderElection": {"enabled": True, "resourceName": LEASE},
        # one port per release on the shared loopback: never two pods of one release
        "strategy": {"type": "Recreate"},
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
        "terminationGracePeriodSeconds": 20,
        # the pre-delete hook that lets the leader release its Lease on uninstall
        "gracefulUninstall": {"enabled": True},
    }
    for s in FAST_LEASE:
        key, val = s.split("=", 1)
        values["leaderElection"][key.split(".", 1)[1]] = val
    values.update(extra or {})
    return values


def _write(path: Path, values: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(values))
    return path


def _deployment(cluster: ClusterHandle, name: str) -> dict[str, Any]:
    out: dict[str, Any] = cluster.api("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{name}")
    return out


def _available(cluster: ClusterHandle, name: str) -> bool:
    d = _deployment(cluster, name)
    st = d.get("status", {})
    return (
        st.get("observedGeneration", 0) >= d["metadata"]["generation"]
        and st.get("updatedReplicas", 0) == d["spec"]["replicas"]
        and st.get("readyReplicas", 0) == d["spec"]["replicas"]
        and st.get("replicas", 0) == d["spec"]["replicas"]
    )


def _prometheus_token(cluster: ClusterHandle, d: Path) -> Path:
    cluster.api("POST", f"/api/v1/namespaces/{NS}/serviceaccounts",
                {"metadata": {"name": "prometheus"}})  # fmt: skip
    cluster.api(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {"metadata": {"name": "prometheus-kas-metrics"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": f"{RELEASE}-metrics-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": NS}]},
    )  # fmt: skip
    path = d / "prometheus-token"
    path.write_text(service_account_token(cluster, NS, "prometheus", 86400))
    return path


def _scheduler_pods(cluster: ClusterHandle, release: str) -> list[dict[str, Any]]:
    sel = f"app.kubernetes.io/instance={release}"
    return [p for p in cluster.list_pods(NS, sel) if not p["metadata"].get("deletionTimestamp")]


def _metrics(rc: RealCluster, port: int) -> str:
    """/metrics over HTTPS as the cluster's admin; the pod's self-signed certificate sits
    in its emptyDir, so it is not verified here."""
    status, body = scheduler_get(
        f"https://{LOOPBACK}:{port}", "/metrics", client=rc.local.admin_client_cert(), timeout=5
    )
    assert status == 200, body
    return body


def _is_leader(rc: RealCluster, port: int) -> bool:
    try:
        text = _metrics(rc, port)
    except OSError:
        return False
    return any(
        line.startswith("scheduler_leader_election_is_leader") and line.rstrip().endswith(" 1.0")
        for line in text.splitlines()
    )


def _bound_by(cluster: ClusterHandle, ns: str, name: str, scheduler: str = SCHED) -> str:
    """The node the pod is bound to, if the Scheduled event came from our scheduler's
    profile `scheduler` (its reportingController; upstream's would be default-scheduler).
    Each profile reports its own events, as upstream's recorder per profile
    (pkg/scheduler/profile/profile.go, recorderFact(cfg.SchedulerName))."""
    pod = cluster.get_pod(ns, name)
    if not pod or not pod["spec"].get("nodeName"):
        return ""
    for ev in cluster.events(ns):
        if (
            ev.get("regarding", {}).get("name") == name
            and ev.get("reason") == "Scheduled"
            and ev.get("reportingController") == scheduler
        ):
            return str(pod["spec"]["nodeName"])
    return ""


def _work_pod(name: str, cpu: str, scheduler: str = SCHED, pc: str | None = None) -> dict[str, Any]:
    return pod_manifest(
        name,
        scheduler_name=scheduler,
        cpu=cpu,
        priority_class=pc,
        nodeSelector={KWOK_LABEL: "true"},
        terminationGracePeriodSeconds=0,
    )


@pytest.fixture(scope="module")
def installed(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    rc = real_cluster
    d = tmp_path_factory.mktemp("release")
    port = free_port()
    values = _write(d / "values.yaml", _values(rc, port))
    helm(
        rc.handle, "install", RELEASE, str(CHART), "-n", NS, "--create-namespace", "-f", str(values)
    )
    # the ServiceMonitor the chart would create, made static: same job, path, interval
    sm_values = _write(
        d / "sm.yaml",
        {"serviceMonitor": {"enabled": True, "interval": "5s", "scrapeTimeout": "5s"}},
    )
    rendered = helm(
        rc.handle, "template", RELEASE, str(CHART), "-n", NS, "-f", str(values), "-f", str(sm_values),
        "--show-only", "templates/servicemonitor.yaml",
    ).stdout  # fmt: skip
    sm = yaml.safe_load(rendered)
    job = f"{RELEASE}-metrics"  # the Service the ServiceMonitor selects
    # Prometheus scrapes over TLS with its own ServiceAccount's token, bound to the chart's
    # metrics-reader ClusterRole, as an operator would bind the Prometheus Operator's
    token_file = _prometheus_token(rc.handle, d)
    scrape = prometheus.scrape_config(sm, job, [f"{LOOPBACK}:{port}"], token_file=token_file)
    url = prometheus.start(rc.local, scrape)
    cluster = rc.handle
    cluster.create_namespace(WORK)
    create_priority_classes(cluster, {"e2e-low": 100, "e2e-high": 1000})
    yield Installed(rc, values, port, url)
    helm(rc.handle, "uninstall", RELEASE, "-n", NS, check=False)
    helm(rc.handle, "uninstall", SECOND, "-n", NS, check=False)


def test_install_ready_schedules_and_preempts_from_the_pod(installed: Installed) -> None:
    cluster = installed.cluster
    wait_for(
        lambda: _available(cluster, RELEASE), timeout=300, interval=1, what="Deployment Available"
    )
    (pod,) = _scheduler_pods(cluster, RELEASE)
    assert pod["spec"]["nodeName"] == installed.rc.real_node
    assert pod["spec"]["hostNetwork"] is True
    # the kubelet judged it Ready through the chart's own probes (on loopback)
    probe = pod["spec"]["containers"][0]["readinessProbe"]["httpGet"]
    assert probe["host"] == LOOPBACK and probe["path"] == "/readyz"
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "True"
    # it runs as the chart says: non-root, read-only root, the projected token
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"] and status["restartCount"] == 0, status
    # the single replica leads (leader election is on)
    wait_for(lambda: _is_leader(installed.rc, installed.port), timeout=60, interval=1, what="leader")
    assert lease_holder(cluster, NS, LEASE)

    # a pod naming the scheduler is bound by it, from inside its pod
    for i in range(2):
        cluster.create_pod(WORK, _work_pod(f"low-{i}", "1500m", pc="e2e-low"))
    nodes = [
        wait_for(
            lambda i=i: _bound_by(cluster, WORK, f"low-{i}", SCHED),
            timeout=120,
            what=f"low-{i} bound",
        )
        for i in range(2)
    ]
    assert sorted(nodes) == ["kwok-0", "kwok-1"], nodes  # 1.5 of 2 CPUs: one per node
    # both nodes are full: a higher-priority pod preempts one of them
    cluster.create_pod(WORK, _work_pod("high", "1500m", pc="e2e-high"))
    node = wait_for(
        lambda: _bound_by(cluster, WORK, "high", SCHED),
        timeout=180,
        interval=0.5,
        what="high bound",
    )
    victims = [f"low-{i}" for i in range(2) if nodes[i] == node]
    assert len(victims) == 1
    victim = cluster.get_pod(WORK, victims[0])
    assert victim is None or victim["metadata"].get("deletionTimestamp"), victim
    survivor = next(f"low-{i}" for i in range(2) if nodes[i] != node)
    assert cluster.get_pod(WORK, survivor) is not None


def test_a_preemption_policy_is_enforced_from_the_pod(installed: Installed) -> None:
    """The policy watcher runs in the pod on the scheduler's own connection (the chart's
    API server address and projected token): an embedded kopf once dialled
    kubernetes.default.svc there, unreachable without a pod network, while the pod was
    Ready and bound pods, and no policy was enforced."""
    cluster = installed.cluster
    policies = "/apis/scheduling.kas.io/v1alpha1/preemptionpolicies"
    cluster.api("POST", policies, {
        "apiVersion": "scheduling.kas.io/v1alpha1", "kind": "PreemptionPolicy",
        "metadata": {"name": "e2e-guard"},
        "spec": {"preemptors": {"priorityClassNames": ["e2e-high"]},
                 "protectedNamespaces": [WORK]},
    })  # fmt: skip

    def in_force() -> bool:
        status = cluster.api("GET", f"{policies}/e2e-guard").get("status") or {}
        return status.get("observedGeneration") == 1 and status.get("inForceGeneration") == 1

    wait_for(in_force, timeout=60, interval=0.5, what="the policy's status from the pod")
    assert "scheduler_preemption_policies_synced 1.0" in _metrics(installed.rc, installed.port)
    # both nodes are full (the previous test): without the policy this pod would preempt
    # the low-priority survivor; with it, it stays pending and the message says why
    cluster.create_pod(WORK, _work_pod("guarded-high", "1500m", pc="e2e-high"))

    def refused() -> bool:
        pod = cluster.get_pod(WORK, "guarded-high") or {}
        conds = (pod.get("status") or {}).get("conditions") or []
        return any("PreemptionPolicy e2e-guard" in (c.get("message") or "") for c in conds)

    wait_for(refused, timeout=120, interval=0.5, what="the preemptor refused by the policy")
    for pod in cluster.list_pods(WORK):
        assert not pod["metadata"].get("deletionTimestamp"), pod["metadata"]["name"]
    cluster.api("DELETE", f"/api/v1/namespaces/{WORK}/pods/guarded-high?gracePeriodSeconds=0")
    wait_for(lambda: cluster.get_pod(WORK, "guarded-high") is None, timeout=60)
    cluster.api("DELETE", f"{policies}/e2e-guard")


def test_prometheus_scrapes_it_and_every_dashboard_panel_answers(installed: Installed) -> None:
    url = installed.prom_url
    job = f"{RELEASE}-metrics"
    (target,) = wait_for(
        lambda: [t for t in prometheus.targets(url) if t["health"] == "up"],
        timeout=120,
        interval=1,
        what="target up",
    )
    # loopback only, over TLS (with Prometheus' token: an unauthorized scrape is down),
    # the ServiceMonitor's path and job
    assert target["scrapeUrl"] == f"https://{LOOPBACK}:{installed.port}/metrics"
    assert target["labels"]["job"] == job
    # a scrape may time out on a loaded machine (the series then go stale for a moment):
    # wait for the series rather than asserting one instant
    for promql in (
        f'scheduler_schedule_attempts_total{{job="{job}",result="scheduled"}}',
        f'scheduler_leader_election_is_leader{{job="{job}"}} == 1',
    ):
        wait_for(lambda q=promql: prometheus.query(url, q), timeout=60, interval=1, what=promql)
    dashboard = json.loads(DASHBOARD.read_text())
    queries = prometheus.dashboard_queries(dashboard, job)
    assert len(queries) >= 10
    # rate() needs two samples in its window: poll until every panel has a series
    last: dict[str, str] = {}

    def all_answer() -> bool:
        last.clear()
        last.update(prometheus.panels_without_data(url, dashboard, job))
        return not last

    try:
        wait_for(all_answer, timeout=120, interval=2, what="every dashboard panel")
    except AssertionError:
        raise AssertionError(f"panels without data: {json.dumps(last, indent=1)}") from None


def test_upgrade_rolls_the_pod_and_the_new_configuration_takes_effect(installed: Installed) -> None:
    cluster = installed.cluster
    wait_for(lambda: _available(cluster, RELEASE), timeout=300, interval=1, what="Available")
    (old,) = _scheduler_pods(cluster, RELEASE)
    values = yaml.safe_load(installed.values.read_text())
    values["config"] = {
        "profiles": [
            {"schedulerName": SCHED, "plugins": {}, "pluginConfig": []},
            {"schedulerName": "kas-second", "plugins": {}, "pluginConfig": []},
        ]
    }
    upgraded = _write(installed.values.with_name("values-2.yaml"), values)
    helm(cluster, "upgrade", RELEASE, str(CHART), "-n", NS, "-f", str(upgraded))

    def rolled() -> bool:
        pods = _scheduler_pods(cluster, RELEASE)
        return (
            _available(cluster, RELEASE)
            and bool(pods)
            and pods[0]["metadata"]["uid"] != old["metadata"]["uid"]
        )

    wait_for(rolled, timeout=300, interval=1, what="the upgraded pod Ready")
    (new,) = _scheduler_pods(cluster, RELEASE)
    key = "checksum/config"
    assert new["metadata"]["annotations"][key] != old["metadata"]["annotations"][key]
    # the profile that only the new configuration has binds a pod
    cluster.create_pod(WORK, _work_pod("second", "100m", scheduler="kas-second"))
    wait_for(lambda: _bound_by(cluster, WORK, "second", scheduler="kas-second"), timeout=180,
             what="kas-second binds, its Scheduled event reported by kas-second")  # fmt: skip


def test_two_pods_share_a_lease_and_hand_over_when_the_leader_pod_goes(
    installed: Installed, tmp_path: Path
) -> None:
    cluster = installed.cluster
    port_b = free_port()
    # the CRD is cluster-scoped and owned by the first release: a second release of the
    # chart in the same cluster must not install it again (helm refuses to adopt it)
    values_b = _write(
        tmp_path / "values-b.yaml",
        _values(installed.rc, port_b, {"preemptionPolicies": {"installCRD": False}}),
    )
    helm(cluster, "install", SECOND, str(CHART), "-n", NS, "-f", str(values_b))
    wait_for(
        lambda: _available(cluster, SECOND), timeout=300, interval=1, what="second release Ready"
    )
    ports = {RELEASE: installed.port, SECOND: port_b}
    leaders = wait_for(
        lambda: [r for r, p in ports.items() if _is_leader(installed.rc, p)] if lease_holder(cluster, NS, LEASE) else [],
        timeout=60, interval=1, what="one leader",
    )  # fmt: skip
    assert len(leaders) == 1, leaders  # one Lease, one leader
    leader, follower = leaders[0], next(r for r in ports if r != leaders[0])
    assert not _is_leader(installed.rc, ports[follower])
    holder = lease_holder(cluster, NS, LEASE)
    (pod,) = _scheduler_pods(cluster, leader)
    t0 = time.monotonic()
    cluster.api("DELETE", f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}")
    wait_for(
        lambda: _is_leader(installed.rc, ports[follower]), timeout=60, interval=0.2, what="the follower leads"
    )
    handover = time.monotonic() - t0
    new_holder = lease_holder(cluster, NS, LEASE)
    assert new_holder and new_holder != holder
    print(f"handover after deleting the leader's pod: {handover:.1f}s (lease {LEASE_SECONDS}s)")
    # the leader released its Lease on SIGTERM: no waiting for it to expire
    assert handover < LEASE_SECONDS + 4, handover


def test_uninstall_stops_gracefully_and_releases_the_lease(installed: Installed) -> None:
    cluster = installed.cluster
    for release in (RELEASE, SECOND):
        wait_for(
            lambda r=release: _available(cluster, r),
            timeout=300,
            interval=1,
            what=f"{release} Ready",
        )
    assert lease_holder(cluster, NS, LEASE)
    for release in (RELEASE, SECOND):
        helm(cluster, "uninstall", release, "-n", NS, "--wait", "--timeout", "120s")
    wait_for(lambda: not cluster.list_pods(NS), timeout=120, interval=1, what="pods gone")
    lease = cluster.api("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE}")
    # a graceful stop writes holderIdentity "" (an expired Lease would still name the pod)
    assert not lease["spec"].get("holderIdentity"), lease["spec"]
    # and the pods exited on their own within the grace period (no SIGKILL: exit code 0)
    events = cluster.events(NS)
    killed = [e for e in events if e.get("reason") in ("FailedKillPod", "ExceededGracePeriod")]
    assert not killed, killed


def test_the_kubelet_serves_on_loopback_only(installed: Installed) -> None:
    # the kubelet serves on loopback and the API server reaches it by its node name
    rc = installed.rc
    node = rc.handle.api("GET", f"/api/v1/nodes/{rc.real_node}")
    kinds = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert kinds["Hostname"] == rc.real_node
    port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    assert out and all(f"{LOOPBACK}:{port}" in line for line in out.splitlines()), out
