"""The Helm chart against a real API server (RBAC on): `helm install` is accepted object
by object; the scheduler, run as a local process under the chart's ServiceAccount token
with the configuration read back from the installed ConfigMap, syncs, takes the chart's
Lease, schedules and preempts (so the ClusterRole and Role are sufficient) while the same
identity is refused Secrets and other writes (so they are not excessive); bad values are
refused by `helm install` / `helm upgrade` before anything is created or changed; the
plain manifests in deploy/ are accepted too."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.checker import check
from tests.helm_release import (
    FAST_LEASE,
    ROOT,
    Release,
    helm,
    identity_of,
    install,
    lease_holder,
    request_as,
)
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess
from tests.scheduler_process import write_config as write_scheduler_config

pytestmark = pytest.mark.cluster

NS = "kube-async-scheduler"
RELEASE = "kube-async-scheduler"
SCHED = "kube-async-scheduler"
WORK = "workload"
NODES = [NodeGroup(count=2, name_prefix="small", cpu="2", memory="8Gi")]

# every URL path of the objects `helm install` creates, by kind
_PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts/{name}",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps/{name}",
    "Service": "/api/v1/namespaces/{ns}/services/{name}",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{name}",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{name}",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{name}",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterHandle, Release]]:
    d = tmp_path_factory.mktemp("deploy")
    local = LocalCluster(d / "cluster")
    local.up(NODES)
    cluster = ClusterHandle(local)
    try:
        # two replicas: leader election on, so the Lease Role is rendered and used, and
        # the PodDisruptionBudget too (podDisruptionBudget.enabled "auto")
        release = install(
            cluster, RELEASE, NS,
            "replicas=2", "dashboard.enabled=true", "networkPolicy.enabled=true",
            *FAST_LEASE,
        )  # fmt: skip
        yield cluster, release
    finally:
        local.down()


@pytest.fixture(scope="module")
def sa_scheduler(
    deployed: tuple[ClusterHandle, Release], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SchedulerProcess]:
    """The scheduler as the chart's ServiceAccount, with the installed configuration."""
    _, release = deployed
    d = tmp_path_factory.mktemp("sa-scheduler")
    sched = SchedulerProcess(
        str(release.write_kubeconfig(d / "kubeconfig")),
        release.write_config(d / "config.yaml"),
        d / "scheduler.log",
    )
    sched.start()
    yield sched
    sched.stop()


def _get(cluster: ClusterHandle, kind: str, ns: str, name: str) -> tuple[int, Any]:
    return cluster.admin.request("GET", _PATHS[kind].format(ns=ns, name=name))


def test_helm_install_is_accepted_object_by_object(
    deployed: tuple[ClusterHandle, Release],
) -> None:
    cluster, release = deployed
    status = helm(cluster, "status", RELEASE, "-n", NS, "-o", "json").stdout
    assert '"status":"deployed"' in status.replace(" ", "")
    objects = release.manifest()
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(
        ["ServiceAccount", "ConfigMap", "ConfigMap", "Service", "Deployment",
         "PodDisruptionBudget", "NetworkPolicy", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
         "CustomResourceDefinition",
         # serving: metrics-reader, auth-delegator, the kube-system authentication reader
         "ClusterRole", "ClusterRoleBinding", "RoleBinding"]
    )  # fmt: skip
    for obj in objects:
        ns = obj["metadata"].get("namespace", NS)
        code, stored = _get(cluster, obj["kind"], ns, obj["metadata"]["name"])
        assert code == 200, f"{obj['kind']}/{obj['metadata']['name']}: {stored}"
        labels = stored["metadata"].get("labels") or {}
        assert labels.get("app.kubernetes.io/instance") == RELEASE
        assert stored["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    # the stored RBAC is what was rendered (nothing dropped or defaulted away)
    for kind in ("ClusterRole", "Role"):
        rendered = next(o for o in objects if o["kind"] == kind)
        _, stored = _get(cluster, kind, NS, rendered["metadata"]["name"])
        assert stored["rules"] == rendered["rules"]

    # the controller manager accepted the Deployment and made its pods (kwok nodes run no
    # containers and no default scheduler runs here, so they stay Pending)
    def pods() -> list[dict[str, Any]]:
        found = cluster.list_pods(NS, selector=f"app.kubernetes.io/instance={RELEASE}")
        return found if len(found) == 2 else []

    for pod in wait_for(pods, timeout=30, what="the Deployment's two pods"):
        assert pod["spec"]["serviceAccountName"] == release.service_account
        # the chart's default class, resolved by the API server's Priority admission
        assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
        assert pod["spec"]["priority"] == 2000000000
        assert pod["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["config"]["configMap"]["name"] == f"{release.fullname}-config"


def test_the_installed_config_elects_on_the_charts_lease(
    deployed: tuple[ClusterHandle, Release],
) -> None:
    _, release = deployed
    cfg = yaml.safe_load(release.scheduler_config())
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    assert cfg["leaderElection"] == {
        "leaderElect": True,
        "leaseDuration": "6s",
        "renewDeadline": "4s",
        "retryPeriod": "1s",
        "resourceLock": "leases",
        "resourceName": release.fullname,
        "resourceNamespace": NS,
    }
    role = next(o for o in release.manifest() if o["kind"] == "Role")
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [cfg["leaderElection"]["resourceName"]],
            "verbs": ["get", "update"],
        }
    ]


ALLOWED = [
    "get pods", "list pods", "watch pods", "delete pods",
    "create pods --subresource=binding", "create bindings",
    "patch pods --subresource=status", "update pods --subresource=status",
    "get nodes", "list nodes", "watch nodes",
    "create events", "patch events", "create events.events.k8s.io",
    "list poddisruptionbudgets.policy",
    "list namespaces", "list persistentvolumeclaims", "list persistentvolumes",
    "list storageclasses.storage.k8s.io", "watch storageclasses.storage.k8s.io",
    "update persistentvolumeclaims", "update persistentvolumes",
    "list csinodes.storage.k8s.io", "watch csidrivers.storage.k8s.io",
    "list csistoragecapacities.storage.k8s.io", "watch volumeattachments.storage.k8s.io",
    "list services", "watch replicationcontrollers", "list replicasets.apps", "watch statefulsets.apps",
    f"-n {NS} create leases.coordination.k8s.io",
    f"-n {NS} get leases.coordination.k8s.io/{RELEASE}",
    f"-n {NS} update leases.coordination.k8s.io/{RELEASE}",
    "list preemptionpolicies.scheduling.kas.io", "watch preemptionpolicies.scheduling.kas.io",
    "patch preemptionpolicies.scheduling.kas.io --subresource=status",
]  # fmt: skip
REFUSED = [
    "get secrets", "list secrets", "watch secrets", f"-n {NS} get secrets",
    "list configmaps", f"-n {NS} get configmaps", "create pods", "update pods", "patch pods",
    "update nodes", "patch nodes --subresource=status", "delete nodes",
    "create persistentvolumes", "delete persistentvolumeclaims", "patch persistentvolumes",
    "update csinodes.storage.k8s.io", "create volumeattachments.storage.k8s.io",
    "delete poddisruptionbudgets.policy", "create namespaces", "update services",
    "create replicasets.apps", "delete statefulsets.apps",
    "list priorityclasses.scheduling.k8s.io", "get priorityclasses.scheduling.k8s.io",
    f"-n {NS} update leases.coordination.k8s.io/another-lease",
    f"-n {NS} delete leases.coordination.k8s.io/{RELEASE}",
    "-n kube-system update leases.coordination.k8s.io/kube-scheduler",
    "create serviceaccounts --subresource=token", "create clusterrolebindings.rbac.authorization.k8s.io",
    "impersonate users",
    "create preemptionpolicies.scheduling.kas.io", "patch preemptionpolicies.scheduling.kas.io",
    "delete preemptionpolicies.scheduling.kas.io", "update customresourcedefinitions.apiextensions.k8s.io",
]  # fmt: skip


def test_the_service_account_may_do_exactly_what_a_scheduler_needs(
    deployed: tuple[ClusterHandle, Release],
) -> None:
    cluster, release = deployed

    def can_i(spec: str) -> str:
        args = spec.split()
        out = cluster.kubectl("auth", "can-i", *args, f"--as={release.user}", check=False)
        return out.strip()

    wrong = {s: can_i(s) for s in ALLOWED if can_i(s) != "yes"}
    wrong |= {s: can_i(s) for s in REFUSED if can_i(s) != "no"}
    assert wrong == {}


def test_the_service_account_token_is_refused_secrets(
    deployed: tuple[ClusterHandle, Release], tmp_path: Path
) -> None:
    cluster, release = deployed
    token = release.token()
    # the token works (so the 403s below are authorization, not authentication)
    code, body = request_as(cluster, token, "GET", "/api/v1/nodes")
    assert code == 200 and len(body["items"]) == 2
    code, who = request_as(
        cluster, token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )  # fmt: skip
    assert code == 201 and who["status"]["userInfo"]["username"] == release.user
    for path in (
        "/api/v1/secrets",
        f"/api/v1/namespaces/{NS}/secrets",
        f"/api/v1/namespaces/{NS}/secrets/sh.helm.release.v1.{RELEASE}.v1",
        f"/api/v1/namespaces/{NS}/configmaps",
    ):
        code, status = request_as(cluster, token, "GET", path)
        assert code == 403, (path, code, status)
        assert status["reason"] == "Forbidden" and release.user in status["message"]
    code, status = request_as(
        cluster, token, "POST", "/api/v1/namespaces/default/pods", pod_manifest("sneaky")
    )
    assert code == 403, status
    # through kubectl too, as an operator would check it
    sa_kubeconfig = release.write_kubeconfig(tmp_path / "sa-kubeconfig")
    res = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "--kubeconfig", str(sa_kubeconfig),
         "-n", NS, "get", "secrets"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode != 0 and res.stdout == ""
    assert "Error from server (Forbidden)" in res.stderr


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _bound(cluster: ClusterHandle, ns: str, name: str) -> str:
    return str(((cluster.get_pod(ns, name) or {}).get("spec") or {}).get("nodeName") or "")


def test_the_scheduler_as_the_service_account_leads_schedules_and_preempts(
    deployed: tuple[ClusterHandle, Release], sa_scheduler: SchedulerProcess
) -> None:
    cluster, release = deployed
    sched = sa_scheduler
    status, body = sched.get("/readyz?verbose")
    assert status == 200 and "[+]sched-handler-sync ok" in body  # every informer listed
    identity = wait_for(lambda: identity_of(sched.log_path), timeout=10, what="identity")
    wait_for(lambda: lease_holder(cluster, NS, release.fullname) == identity,
             timeout=15, what=f"the chart's Lease taken by {identity}\n{sched.tail()}")  # fmt: skip
    assert sched.metric("scheduler_leader_election_is_leader") == 1

    for pc, value in (("kas-low", 100), ("kas-high", 1000)):
        cluster.api(
            "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", _priority_class(pc, value)
        )
    cluster.create_namespace(WORK)
    # four 900m pods fill both 2-cpu nodes (1800m each)
    low = [f"low-{i}" for i in range(4)]
    for name in low:
        cluster.create_pod(WORK, pod_manifest(name, cpu="900m", priority_class="kas-low"))
    wait_for(lambda: all(_bound(cluster, WORK, n) for n in low), timeout=30,
             what=f"low pods bound\n{sched.tail()}")  # fmt: skip
    placed = {n: _bound(cluster, WORK, n) for n in low}
    assert sorted(placed.values()) == ["small-0", "small-0", "small-1", "small-1"]

    # 1500m fits nowhere; preempting both low pods of one node makes room
    cluster.create_pod(WORK, pod_manifest("high", cpu="1500m", priority_class="kas-high"))
    node = wait_for(lambda: _bound(cluster, WORK, "high"), timeout=60,
                    what=f"high bound after preemption\n{sched.tail()}")  # fmt: skip
    victims = sorted(n for n, at in placed.items() if at == node)
    survivors = sorted(n for n, at in placed.items() if at != node)
    assert len(victims) == 2
    wait_for(lambda: all(cluster.get_pod(WORK, v) is None for v in victims), timeout=30,
             what="victims deleted")  # fmt: skip
    assert all(_bound(cluster, WORK, s) for s in survivors)

    def events(reason: str) -> dict[str, dict[str, Any]]:
        return {
            e["regarding"]["name"]: e
            for e in cluster.events(WORK)
            if e["reason"] == reason and e.get("reportingController") == SCHED
        }

    def events_for(reason: str, names: list[str]) -> dict[str, dict[str, Any]] | None:
        found = events(reason)
        return found if sorted(found) == sorted(names) else None

    preempted = wait_for(lambda: events_for("Preempted", victims), timeout=15,
                         what="Preempted events for both victims")  # fmt: skip
    for ev in preempted.values():
        high_uid = (cluster.get_pod(WORK, "high") or {})["metadata"]["uid"]
        assert ev["note"].startswith(f"Preempted by pod {high_uid} ")
        assert ev["note"].endswith(f"on node {node}")
        assert ev["reportingInstance"] == identity
    scheduled = wait_for(lambda: events_for("Scheduled", [*low, "high"]), timeout=15,
                         what="Scheduled events")  # fmt: skip
    assert scheduled["high"]["note"] == f"Successfully assigned {WORK}/high to {node}"
    assert all(ev["reportingInstance"] == identity for ev in scheduled.values())

    report = check(cluster.list_pods(), cluster.api("GET", "/api/v1/nodes")["items"], {}, SCHED)
    assert report.violations == [] and report.pending == 0 and report.bound == 3

    # upstream metric names, with the labels dashboards and alerts select on
    assert sched.metric("scheduler_schedule_attempts_total", result="scheduled", profile=SCHED) >= 5
    assert (
        sched.metric("scheduler_schedule_attempts_total", result="unschedulable", profile=SCHED)
        >= 1
    )
    assert sched.metric("scheduler_scheduling_attempt_duration_seconds_count", result="scheduled",
                        profile=SCHED) >= 5  # fmt: skip
    assert sched.metric("scheduler_pod_scheduling_sli_duration_seconds_count") >= 5
    assert sched.metric("scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") >= 4
    assert sched.metric("scheduler_preemption_attempts_total") >= 1
    assert sched.metric("scheduler_preemption_victims_count") >= 1
    assert sched.metric("scheduler_preemption_victims_sum") >= 2
    assert sched.metric("scheduler_preemption_goroutines_execution_total", result="success") >= 1
    text = sched.metrics()
    queues = set(re.findall(r'^scheduler_pending_pods\{queue="([a-z]+)"\} ', text, re.M))
    assert queues == {"active", "backoff", "unschedulable", "gated"}
    for name in (
        "scheduler_scheduling_attempt_duration_seconds_bucket",
        "scheduler_pod_scheduling_sli_duration_seconds_bucket",
        "scheduler_preemption_goroutines_duration_seconds_bucket",
        "scheduler_unschedulable_pods",
    ):
        assert re.search(rf"^# TYPE {name.removesuffix('_bucket')} ", text, re.M), name

    # RBAC sufficiency: not one request of the scheduler was refused
    assert sched.metric("scheduler_api_requests_total", code="403") == 0
    log = sched.log_path.read_text()
    assert "forbidden" not in log.lower() and " 403" not in log, sched.tail()


SCHEMA = "values don't meet the specifications of the schema"
BAD_VALUES = [
    ("wrong-type", ("replicas=two",), SCHEMA, "at '/replicas': got string, want integer"),
    ("unknown-preemption-mode", ("config.preemption.mode=Lazy",), SCHEMA,
     "at '/config/preemption/mode': value must be one of 'Async', 'Sync'"),
    ("unknown-key", ("config.preemption.victimscope=All",), SCHEMA,
     "additional properties 'victimscope' not allowed"),
    # beyond what a JSON schema can say: refused by the chart's templates
    ("lease-timings", ("replicas=2", "leaderElection.leaseDuration=4s"), "execution error",
     "leaderElection.renewDeadline (10s) must be less than leaseDuration (4s)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "sets", "kind", "message"), BAD_VALUES, ids=[c[0] for c in BAD_VALUES]
)
def test_bad_values_are_refused_by_helm_install_before_anything_is_created(
    deployed: tuple[ClusterHandle, Release],
    case: str,
    sets: tuple[str, ...],
    kind: str,
    message: str,
) -> None:
    cluster, _ = deployed
    name, fresh_ns = f"kas-bad-{case}", f"bad-{case}"
    set_args = [a for s in sets for a in ("--set", s)]
    ns_before = {n["metadata"]["name"] for n in cluster.api("GET", "/api/v1/namespaces")["items"]}
    # a new namespace: not even the namespace is created
    proc = helm(cluster, "install", name, str(ROOT / "charts" / "kube-async-scheduler"),
                "-n", fresh_ns, "--create-namespace", *set_args, check=False)  # fmt: skip
    assert proc.returncode != 0
    assert kind in proc.stderr and message in proc.stderr, proc.stderr
    # the release namespace (exists): no release record (helm v4 lists every status), no object of the would-be release
    proc = helm(cluster, "install", name, str(ROOT / "charts" / "kube-async-scheduler"),
                "-n", NS, *set_args, check=False)  # fmt: skip
    assert proc.returncode != 0 and message in proc.stderr
    ns_after = {n["metadata"]["name"] for n in cluster.api("GET", "/api/v1/namespaces")["items"]}
    assert ns_after == ns_before
    assert helm(cluster, "list", "-A", "-q").stdout.split() == [RELEASE]
    full = f"{name}-kube-async-scheduler"
    for kind, obj_name in (("ClusterRole", full), ("ClusterRoleBinding", full),
                           ("ConfigMap", f"{full}-config"), ("ServiceAccount", full)):  # fmt: skip
        code, _ = _get(cluster, kind, NS, obj_name)
        assert code == 404, f"{kind}/{obj_name} exists"
    secrets = cluster.api("GET", f"/api/v1/namespaces/{NS}/secrets")["items"]
    assert [s["metadata"]["name"] for s in secrets] == [f"sh.helm.release.v1.{RELEASE}.v1"]


def test_bad_values_stop_an_upgrade_before_anything_changes(
    deployed: tuple[ClusterHandle, Release],
) -> None:
    cluster, release = deployed
    before = release.scheduler_config()
    proc = helm(cluster, "upgrade", RELEASE, str(ROOT / "charts" / "kube-async-scheduler"),
                "-n", NS, "--reuse-values", "--set", "config.preemption.mode=Lazy",
                check=False)  # fmt: skip
    assert proc.returncode != 0
    assert "at '/config/preemption/mode': value must be one of 'Async', 'Sync'" in proc.stderr
    history = helm(cluster, "history", RELEASE, "-n", NS, "-o", "yaml").stdout
    assert [h["revision"] for h in yaml.safe_load(history)] == [1]
    assert release.scheduler_config() == before


def test_the_plain_manifests_are_accepted_by_the_api_server(
    make_cluster: Any,
) -> None:
    cluster: ClusterHandle = make_cluster(0)
    manifests = (ROOT / "deploy" / "kube-async-scheduler.yaml").read_text()
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    out = cluster.kubectl("apply", "-f", "-", input=manifests)
    assert out.count(" created") == len(docs), out
    for doc in docs:
        if doc["kind"] == "Namespace":
            continue
        ns = doc["metadata"].get("namespace", NS)
        code, _ = _get(cluster, doc["kind"], ns, doc["metadata"]["name"])
        assert code == 200, f"{doc['kind']}/{doc['metadata']['name']}"
    # one replica, no leader election: no Lease Role
    assert "Role" not in {d["kind"] for d in docs}


def test_the_service_account_may_run_the_preemption_policy_controller(
    deployed: tuple[ClusterHandle, Release], tmp_path: Path
) -> None:
    """The policy watcher as the chart's ServiceAccount (bearer token, no admin): the
    list, the watch, the CRD check and the status patch are all the chart's RBAC
    allows, and enough. Its own profile
    and no Lease, so it neither competes with the chart's scheduler nor waits for it."""
    cluster, release = deployed
    sched = SchedulerProcess(
        str(release.write_kubeconfig(tmp_path / "kubeconfig")),
        write_scheduler_config(tmp_path / "config.yaml", profiles=[{"schedulerName": "sa-pp"}]),
        tmp_path / "scheduler.log",
        extra_args=["--preemption-policies"],
    )
    sched.start()
    try:
        policies = "/apis/scheduling.kas.io/v1alpha1/preemptionpolicies"
        cluster.api("POST", policies, {
            "apiVersion": "scheduling.kas.io/v1alpha1", "kind": "PreemptionPolicy",
            "metadata": {"name": "sa-check"}, "spec": {"maxVictimsPerPreemption": 2},
        })  # fmt: skip

        def written() -> bool:
            status = cluster.api("GET", f"{policies}/sa-check").get("status") or {}
            return status.get("observedGeneration") == 1

        wait_for(written, timeout=30, what=f"status written\n{sched.tail()}")
        assert "Forbidden" not in sched.log_path.read_text()
    finally:
        sched.stop()


def test_the_explain_apis_certificate_is_kept_across_upgrades(make_cluster: Any) -> None:
    """The chart generates the serving certificate and the APIService's caBundle once
    (genCA) and reads them back with `lookup` on upgrade: an upgrade must not rotate them
    (the running pods would serve a certificate the new caBundle does not vouch for)."""
    cluster: ClusterHandle = make_cluster(0)
    chart = str(ROOT / "charts" / "kube-async-scheduler")
    name = "kas-api"
    helm(cluster, "install", name, chart, "-n", NS, "--create-namespace",
         "--set", "explainAPI.enabled=true")  # fmt: skip
    secret_path = f"/api/v1/namespaces/{NS}/secrets/{name}-kube-async-scheduler-serving-cert"
    api_path = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.explain.kas.io"
    first = cluster.api("GET", secret_path)["data"]
    assert cluster.api("GET", api_path)["spec"]["caBundle"] == first["ca.crt"]
    helm(cluster, "upgrade", name, chart, "-n", NS, "--set", "explainAPI.enabled=true",
         "--set", "logLevel=3")  # fmt: skip
    assert cluster.api("GET", secret_path)["data"] == first
    assert cluster.api("GET", api_path)["spec"]["caBundle"] == first["ca.crt"]
    helm(cluster, "uninstall", name, "-n", NS)
