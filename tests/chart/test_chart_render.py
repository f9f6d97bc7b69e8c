"""The Helm chart, rendered with `helm template` (no cluster): what it produces for
representative values, what its schema refuses, and that `helm lint` is clean.

helm is found through $KAS_BIN_DIR, then ~/.cache/kube-async-scheduler/bin (where
hack/install-binaries.sh puts it), then PATH; without it these tests skip.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tools import find_helm

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kube-async-scheduler"
RELEASE = "kas"
NAMESPACE = "sched-system"
FULLNAME = f"{RELEASE}-kube-async-scheduler"

UPSTREAM_DASHBOARD_METRICS = (
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds_bucket",
    "scheduler_pending_pods",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims_bucket",
    "scheduler_preemption_goroutines_duration_seconds_bucket",
)


HELM = find_helm()
pytestmark = pytest.mark.skipif(
    HELM is None,
    reason="helm not found in $KAS_BIN_DIR, ~/.cache/kube-async-scheduler/bin or PATH "
    "(run hack/install-binaries.sh)",
)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    proc = subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120, check=False)
    if check and proc.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def _values_args(tmp_path: Path, values: dict[str, Any] | None, sets: tuple[str, ...]) -> list[str]:
    args: list[str] = []
    if values is not None:
        f = tmp_path / f"values-{len(list(tmp_path.iterdir()))}.yaml"
        f.write_text(yaml.safe_dump(values))
        args += ["-f", str(f)]
    for s in sets:
        args += ["--set", s]
    return args


def render(
    tmp_path: Path, values: dict[str, Any] | None = None, *sets: str
) -> list[dict[str, Any]]:
    out = helm(
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        *_values_args(tmp_path, values, sets),
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def render_fails(tmp_path: Path, values: dict[str, Any] | None = None, *sets: str) -> str:
    proc = helm(
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        *_values_args(tmp_path, values, sets),
        check=False,
    )
    assert proc.returncode != 0, "expected helm template to fail, it rendered"
    return proc.stderr


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)


def scheduler_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    cm = one(docs, "ConfigMap", f"{RELEASE}-kube-async-scheduler-config")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    assert isinstance(cfg, dict)
    return cfg


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    dep = one(docs, "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


def checksum(docs: list[dict[str, Any]]) -> str:
    ann = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    return str(ann["checksum/config"])


def preemption_args(profile: dict[str, Any]) -> dict[str, Any]:
    (pc,) = [p for p in profile["pluginConfig"] if p["name"] == "DefaultPreemption"]
    return dict(pc["args"])


# --- defaults ---------------------------------------------------------------------------


def test_defaults_render_the_expected_objects(tmp_path: Path) -> None:
    docs = render(tmp_path)
    assert kinds(docs) == sorted(
        [
            "ServiceAccount",
            "ConfigMap",
            "ClusterRole",
            "ClusterRoleBinding",
            "Service",
            "Deployment",
            "CustomResourceDefinition",
            # serving (templates/rbac-serving.yaml, apiservice.yaml)
            "ClusterRole",  # metrics-reader
            "ClusterRole",  # explain-reader, aggregated to view/edit/admin
            "ClusterRoleBinding",  # system:auth-delegator
            "RoleBinding",  # kube-system extension-apiserver-authentication-reader
            "Secret",  # the serving certificate the APIService's caBundle vouches for
            "APIService",
        ]
    )
    cluster_scoped = ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "APIService")
    for d in docs:
        if d["kind"] == "RoleBinding":
            assert d["metadata"]["namespace"] == "kube-system"
        elif d["kind"] not in cluster_scoped:
            assert d["metadata"]["namespace"] == NAMESPACE, d["kind"]


def test_default_config_is_a_kube_scheduler_configuration(tmp_path: Path) -> None:
    cfg = scheduler_config(render(tmp_path))
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["kube-async-scheduler"]
    assert cfg["percentageOfNodesToScore"] == 0
    assert cfg["podInitialBackoffSeconds"] == 1
    assert cfg["podMaxBackoffSeconds"] == 10
    assert cfg["clientConnection"] == {"qps": 50, "burst": 100}
    le = cfg["leaderElection"]
    assert le["leaderElect"] is False
    assert le["resourceLock"] == "leases"
    assert le["resourceNamespace"] == NAMESPACE
    assert (le["leaseDuration"], le["renewDeadline"], le["retryPeriod"]) == ("15s", "10s", "2s")
    assert preemption_args(cfg["profiles"][0]) == {
        "mode": "Async",
        "victimScope": "OwnProfiles",
        "minCandidateNodesPercentage": 10,
        "minCandidateNodesAbsolute": 100,
    }


def test_config_mount_and_args_agree(tmp_path: Path) -> None:
    docs = render(tmp_path)
    c = container(docs)
    args = c["args"]
    assert args[0] == "run"
    config_path = args[args.index("--config") + 1]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "config"]
    assert mount["readOnly"] is True
    assert config_path == f"{mount['mountPath']}/config.yaml"
    assert config_path == "/etc/kube-async-scheduler/config.yaml"
    assert "--port" not in args  # no plain-HTTP port (issue 21)
    assert args[args.index("--secure-port") + 1] == "10259"
    assert args[args.index("--bind-address") + 1] == "0.0.0.0"
    assert args[args.index("-v") + 1] == "2"
    dep = one(docs, "Deployment")
    (vol,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"]
    assert vol["configMap"]["name"] == f"{RELEASE}-kube-async-scheduler-config"


def test_security_context_is_locked_down(tmp_path: Path) -> None:
    docs = render(tmp_path)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True
    assert psc["runAsUser"] == 65532
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(docs)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    # the read-only root filesystem gets a writable /tmp
    assert any(m["mountPath"] == "/tmp" for m in container(docs)["volumeMounts"])


def test_probes_and_ports(tmp_path: Path) -> None:
    docs = render(tmp_path)
    c = container(docs)
    assert c["ports"] == [{"name": "https", "containerPort": 10259, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "https", "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {
        "path": "/readyz", "port": "https", "scheme": "HTTPS",
    }  # fmt: skip
    svc = one(docs, "Service")
    assert svc["spec"]["ports"][0]["targetPort"] == "https"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()


def test_image_tag_defaults_to_app_version(tmp_path: Path) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container(render(tmp_path))["image"] == f"kube-async-scheduler:{app_version}"
    assert (
        container(render(tmp_path, None, "image.repository=r.example/kas", "image.tag=dev"))[
            "image"
        ]
        == "r.example/kas:dev"
    )
    digest = "sha256:" + "a" * 64
    assert container(render(tmp_path, None, f"image.digest={digest}"))["image"] == (
        f"kube-async-scheduler@{digest}"
    )


def test_single_replica_without_election_uses_recreate(tmp_path: Path) -> None:
    dep = one(render(tmp_path), "Deployment")
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}


# --- profiles and preemption ------------------------------------------------------------


def test_several_profiles_and_preemption_overrides(tmp_path: Path) -> None:
    values = {
        "config": {
            "percentageOfNodesToScore": 30,
            "preemption": {"mode": "Sync"},
            "profiles": [
                {
                    "schedulerName": "batch-scheduler",
                    "plugins": {
                        "score": {
                            "disabled": [{"name": "ImageLocality"}],
                            "enabled": [{"name": "NodeResourcesFit", "weight": 5}],
                        }
                    },
                },
                {
                    "schedulerName": "latency-scheduler",
                    "percentageOfNodesToScore": 0,
                    "preemption": {"mode": "Async", "victimScope": "All"},
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {"scoringStrategy": {"type": "MostAllocated"}},
                        },
                        {"name": "DefaultPreemption", "args": {"minCandidateNodesAbsolute": 0}},
                    ],
                },
            ],
        }
    }
    cfg = scheduler_config(render(tmp_path, values))
    batch, latency = cfg["profiles"]
    assert [batch["schedulerName"], latency["schedulerName"]] == [
        "batch-scheduler",
        "latency-scheduler",
    ]
    assert cfg["percentageOfNodesToScore"] == 30
    assert "percentageOfNodesToScore" not in batch
    assert latency["percentageOfNodesToScore"] == 0
    assert batch["plugins"]["score"]["enabled"] == [{"name": "NodeResourcesFit", "weight": 5}]
    assert preemption_args(batch) == {
        "mode": "Sync",
        "victimScope": "OwnProfiles",
        "minCandidateNodesPercentage": 10,
        "minCandidateNodesAbsolute": 100,
    }
    # profile.preemption over config.preemption, a DefaultPreemption entry over both;
    # a 0 is kept (not dropped as an "empty" value)
    assert preemption_args(latency) == {
        "mode": "Async",
        "victimScope": "All",
        "minCandidateNodesPercentage": 10,
        "minCandidateNodesAbsolute": 0,
    }
    names = [p["name"] for p in latency["pluginConfig"]]
    assert names.count("DefaultPreemption") == 1
    assert "NodeResourcesFit" in names


def test_preemption_args_parse_with_the_scheduler_config_parser(tmp_path: Path) -> None:
    from scheduler.config.args import parse_plugin_args

    values = {
        "config": {
            "profiles": [
                {"schedulerName": "a"},
                {"schedulerName": "b", "preemption": {"mode": "Sync", "victimScope": "All"}},
            ]
        }
    }
    for i, profile in enumerate(scheduler_config(render(tmp_path, values))["profiles"]):
        args = parse_plugin_args(
            "DefaultPreemption", preemption_args(profile), f"profiles[{i}].pluginConfig[0].args"
        )
        assert args is not None


def test_preemption_candidates_cannot_both_be_zero(tmp_path: Path) -> None:
    err = render_fails(
        tmp_path,
        None,
        "config.preemption.minCandidateNodesPercentage=0",
        "config.preemption.minCandidateNodesAbsolute=0",
    )
    assert "cannot both be zero" in err


def test_duplicate_scheduler_names_are_refused(tmp_path: Path) -> None:
    err = render_fails(
        tmp_path,
        {"config": {"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}},
    )
    assert 'schedulerName "a" appears more than once' in err


def test_notes_tell_how_to_opt_in(tmp_path: Path) -> None:
    f = tmp_path / "v.yaml"
    f.write_text(
        yaml.safe_dump(
            {"config": {"profiles": [{"schedulerName": "one"}, {"schedulerName": "two"}]}}
        )
    )
    out = helm(
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--dry-run=client",
        "-f",
        str(f),
    ).stdout
    notes = out[out.index("NOTES:") :]
    assert "spec.schedulerName" in notes
    assert "schedulerName: one" in notes
    assert "  - two" in notes


# --- leader election and RBAC -----------------------------------------------------------


def lease_rbac(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    role = one(docs, "Role")
    binding = one(docs, "RoleBinding", f"{FULLNAME}-leader-election")
    return role, binding


def test_leader_election_on_when_replicas_above_one(tmp_path: Path) -> None:
    docs = render(tmp_path, None, "replicas=3")
    le = scheduler_config(docs)["leaderElection"]
    assert le["leaderElect"] is True
    assert le["resourceName"] == f"{RELEASE}-kube-async-scheduler"
    role, binding = lease_rbac(docs)
    assert role["metadata"]["namespace"] == NAMESPACE == le["resourceNamespace"]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [le["resourceName"]],
            "verbs": ["get", "update"],
        }
    ]
    unnamed = [r for r in role["rules"] if not r.get("resourceNames")]
    assert unnamed == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    sa = one(docs, "ServiceAccount")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    dep = one(docs, "Deployment")
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate"


@pytest.mark.parametrize("lease", ["my-lease", "team-a.scheduler"])
def test_lease_name_and_rbac_resource_names_come_from_one_value(tmp_path: Path, lease: str) -> None:
    docs = render(tmp_path, None, "replicas=2", f"leaderElection.resourceName={lease}")
    assert scheduler_config(docs)["leaderElection"]["resourceName"] == lease
    role, _ = lease_rbac(docs)
    assert [n for r in role["rules"] for n in r.get("resourceNames", [])] == [lease]


def test_leader_election_can_be_forced_on_for_one_replica(tmp_path: Path) -> None:
    docs = render(tmp_path, None, "leaderElection.enabled=true")
    assert scheduler_config(docs)["leaderElection"]["leaderElect"] is True
    lease_rbac(docs)


def test_no_lease_rbac_without_leader_election(tmp_path: Path) -> None:
    assert "Role" not in kinds(render(tmp_path))
    assert "Role" not in kinds(render(tmp_path, None, "leaderElection.enabled=false"))


def test_several_replicas_without_election_are_refused(tmp_path: Path) -> None:
    err = render_fails(tmp_path, None, "replicas=2", "leaderElection.enabled=false")
    assert "replicas=2 needs leader election" in err


def test_lease_timings_reach_the_config(tmp_path: Path) -> None:
    docs = render(
        tmp_path, None, "replicas=2", "leaderElection.leaseDuration=1m30s",
        "leaderElection.renewDeadline=1m", "leaderElection.retryPeriod=500ms",
    )  # fmt: skip
    le = scheduler_config(docs)["leaderElection"]
    assert (le["leaseDuration"], le["renewDeadline"], le["retryPeriod"]) == ("1m30s", "1m", "500ms")


LEASE_TIMINGS = [
    # (leaseDuration, renewDeadline, retryPeriod), what the chart says when it refuses
    (("15s", "10s", "2s"), None),
    (("6s", "4s", "1s"), None),
    (("1h", "59m59s", "2s"), None),
    (("3s", "2500ms", "2000ms"), None),
    (("1.5s", "1300000us", "1s"), None),
    (("4s", "6s", "1s"), "leaderElection.renewDeadline (6s) must be less than leaseDuration (4s)"),
    (("1m", "1m", "2s"), "must be less than leaseDuration (1m)"),
    (("1h", "1h0m1s", "2s"), "must be less than leaseDuration (1h)"),
    (("6s", "4s", "4s"), "leaderElection.renewDeadline (4s) must be greater than retryPeriod*1.2"),
    (("3s", "2500ms", "2100ms"), "must be greater than retryPeriod*1.2"),
    (("0s", "0s", "0s"), "must be greater than zero"),
]


@pytest.mark.parametrize(("timings", "refusal"), LEASE_TIMINGS, ids=lambda v: str(v))
def test_lease_timings_the_scheduler_refuses_are_refused_at_render_time(
    tmp_path: Path, timings: tuple[str, str, str], refusal: str | None
) -> None:
    """Inconsistent timings used to render fine and give pods that exit 2 at start, in a
    crash loop after a "successful" install. The chart and the scheduler now agree."""
    sets = [
        f"leaderElection.{k}={v}"
        for k, v in zip(("leaseDuration", "renewDeadline", "retryPeriod"), timings, strict=True)
    ]
    # what the scheduler itself says about these timings
    cfg = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": True, "resourceName": "kas", "resourceNamespace": "ns",
            "leaseDuration": timings[0], "renewDeadline": timings[1], "retryPeriod": timings[2],
        },
        "profiles": [{"schedulerName": "kube-async-scheduler"}],
    }  # fmt: skip
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", "run", "--config", str(tmp_path / "c.yaml"),
         "--kubeconfig", str(tmp_path / "none"), "--write-config-to", str(tmp_path / "e.yaml")],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == (0 if refusal is None else 2), proc.stderr
    if refusal is None:
        render(tmp_path, None, "replicas=2", *sets)
    else:
        assert refusal in render_fails(tmp_path, None, "replicas=2", *sets)
    # without leader election the timings are not used, and not checked (as the scheduler)
    render(tmp_path, None, "leaderElection.enabled=false", *sets)


EXPECTED_CLUSTER_RULES = {
    ("", "pods"): {"get", "list", "watch", "delete"},
    ("", "pods/binding"): {"create"},
    ("", "bindings"): {"create"},
    ("", "pods/status"): {"patch", "update"},
    ("", "nodes"): {"get", "list", "watch"},
    ("", "events"): {"create", "patch", "update"},
    ("events.k8s.io", "events"): {"create", "patch", "update"},
    ("policy", "poddisruptionbudgets"): {"get", "list", "watch"},
    ("", "namespaces"): {"get", "list", "watch"},
    # VolumeBinding's PreBind updates claims and volumes (upstream system:volume-scheduler)
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "update"},
    ("", "persistentvolumes"): {"get", "list", "watch", "update"},
    ("storage.k8s.io", "storageclasses"): {"get", "list", "watch"},
    ("storage.k8s.io", "csinodes"): {"get", "list", "watch"},
    ("storage.k8s.io", "csidrivers"): {"get", "list", "watch"},
    ("storage.k8s.io", "csistoragecapacities"): {"get", "list", "watch"},
    ("storage.k8s.io", "volumeattachments"): {"get", "list", "watch"},
    ("", "services"): {"get", "list", "watch"},
    ("", "replicationcontrollers"): {"get", "list", "watch"},
    ("apps", "replicasets"): {"get", "list", "watch"},
    ("apps", "statefulsets"): {"get", "list", "watch"},
    ("scheduling.kas.io", "preemptionpolicies"): {"get", "list", "watch"},
    ("scheduling.kas.io", "preemptionpolicies/status"): {"patch"},
    # its own CRD only (resourceNames): fail closed on a deletion with the CRD
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"get"},
}
NAMED_RULES = {("apiextensions.k8s.io", "customresourcedefinitions"): ["preemptionpolicies.scheduling.kas.io"]}


def test_cluster_role_is_least_privilege(tmp_path: Path) -> None:
    docs = render(tmp_path, None, "replicas=2")
    cr = one(docs, "ClusterRole", FULLNAME)
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in cr["rules"]:
        if "resourceNames" in rule:
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    assert rule["resourceNames"] == NAMED_RULES[(group, res)]
        assert "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                granted.setdefault((group, res), set()).update(rule["verbs"])
    assert granted == EXPECTED_CLUSTER_RULES
    everything = [cr, *(d for d in docs if d["kind"] == "Role")]
    for role in everything:
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"]
            assert "secrets" not in rule["resources"]
            assert "configmaps" not in rule["resources"]
    crb = one(docs, "ClusterRoleBinding", FULLNAME)
    assert crb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": cr["metadata"]["name"],
    }


def test_rbac_can_be_left_to_the_operator(tmp_path: Path) -> None:
    docs = render(tmp_path, None, "rbac.create=false", "replicas=2")
    assert not {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} & set(kinds(docs))


# --- the config checksum ----------------------------------------------------------------


def test_checksum_changes_with_the_config_only(tmp_path: Path) -> None:
    base = checksum(render(tmp_path))
    assert checksum(render(tmp_path)) == base  # deterministic
    assert checksum(render(tmp_path, None, "config.preemption.mode=Sync")) != base
    assert checksum(render(tmp_path, None, "config.podMaxBackoffSeconds=20")) != base
    assert (
        checksum(render(tmp_path, {"config": {"profiles": [{"schedulerName": "other"}]}})) != base
    )
    # not part of the config file: no roll for these
    assert checksum(render(tmp_path, None, "resources.requests.cpu=1")) == base
    assert checksum(render(tmp_path, None, "logLevel=4")) == base


# --- monitoring -------------------------------------------------------------------------


def test_service_monitor_only_when_enabled(tmp_path: Path) -> None:
    assert "ServiceMonitor" not in kinds(render(tmp_path))
    docs = render(
        tmp_path,
        None,
        "serviceMonitor.enabled=true",
        "serviceMonitor.labels.release=prom",
        "serviceMonitor.interval=15s",
    )
    sm = one(docs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prom"
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] == "https" and ep["path"] == "/metrics" and ep["interval"] == "15s"
    # over TLS with Prometheus' own token, as kube-prometheus scrapes kube-scheduler
    assert ep["scheme"] == "https"
    assert ep["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert ep["tlsConfig"] == {"insecureSkipVerify": True}
    svc = one(docs, "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert [p["name"] for p in svc["spec"]["ports"]] == ["https"]


def test_dashboard_is_real_grafana_json_on_upstream_metrics(tmp_path: Path) -> None:
    assert "ConfigMap" in kinds(render(tmp_path))
    assert len([d for d in render(tmp_path) if d["kind"] == "ConfigMap"]) == 1
    docs = render(tmp_path, None, "dashboard.enabled=true")
    cm = one(docs, "ConfigMap", f"{RELEASE}-kube-async-scheduler-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dash = json.loads(cm["data"]["kube-async-scheduler.json"])
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 30
    panels = dash["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
    for metric in UPSTREAM_DASHBOARD_METRICS:
        assert any(metric in e for e in exprs), f"no panel queries {metric}"
    assert any("sum by (result)" in e and "schedule_attempts_total" in e for e in exprs)
    assert any("histogram_quantile(0.99" in e and "scheduling_attempt_duration" in e for e in exprs)
    assert any("sum by (queue)" in e and "pending_pods" in e for e in exprs)
    for p in panels:
        if p["type"] != "row":
            assert {"h", "w", "x", "y"} <= p["gridPos"].keys()
            assert p["datasource"]["uid"] == "${datasource}"


def test_pdb_only_when_more_than_one_replica(tmp_path: Path) -> None:
    # "auto" (the default): none for one pod, one as soon as there are followers
    assert "PodDisruptionBudget" not in kinds(render(tmp_path))
    pdb = one(render(tmp_path, None, "replicas=2"), "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert (
        pdb["spec"]["selector"]["matchLabels"]
        == one(render(tmp_path, None, "replicas=2"), "Deployment")["spec"]["selector"][
            "matchLabels"
        ]
    )
    # forced either way
    assert "PodDisruptionBudget" not in kinds(
        render(tmp_path, None, "replicas=2", "podDisruptionBudget.enabled=false")
    )
    one(render(tmp_path, None, "podDisruptionBudget.enabled=true"), "PodDisruptionBudget")


# --- hardening: priority, network policy, the uninstall hook's identity ----------------


def test_pods_run_at_system_cluster_critical_by_default(tmp_path: Path) -> None:
    spec = one(render(tmp_path), "Deployment")["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "system-cluster-critical"
    spec = one(render(tmp_path, None, "priorityClassName="), "Deployment")["spec"]["template"][
        "spec"
    ]
    assert "priorityClassName" not in spec


def test_network_policy_admits_only_the_serving_port_from_the_chosen_peers(
    tmp_path: Path,
) -> None:
    assert "NetworkPolicy" not in kinds(render(tmp_path))  # off by default
    docs = render(tmp_path, None, "networkPolicy.enabled=true")
    np = one(docs, "NetworkPolicy")
    spec = np["spec"]
    assert (
        spec["podSelector"]["matchLabels"]
        == one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    )
    assert spec["policyTypes"] == ["Ingress"]  # egress (the API server) stays open
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 10259}]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    # the port follows server.securePort; the peers are the operator's
    peers = [
        {"podSelector": {"matchLabels": {"app": "prometheus"}}},
        {
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "podSelector": {"matchLabels": {"role": "explain"}},
        },
        {"ipBlock": {"cidr": "10.0.0.0/24"}},
    ]
    np = one(
        render(
            tmp_path,
            {"networkPolicy": {"enabled": True, "from": peers}, "server": {"securePort": 8443}},
        ),
        "NetworkPolicy",
    )
    (rule,) = np["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8443}]
    assert rule["from"] == peers
    # no peer: an empty ingress list, which admits nothing (not a rule without `from`,
    # which would admit everyone)
    np = one(render(tmp_path, {"networkPolicy": {"enabled": True, "from": []}}), "NetworkPolicy")
    assert np["spec"]["ingress"] == []


def test_network_policy_peers_are_validated(tmp_path: Path) -> None:
    for bad, where in (
        ([{"namespaceSelector": {"matchLabel": {"a": "b"}}}], "matchLabel"),
        ([{}], "/networkPolicy/from/0"),
        ([{"ipBlock": {"except": ["10.0.0.1/32"]}}], "cidr"),
    ):
        err = render_fails(tmp_path, {"networkPolicy": {"enabled": True, "from": bad}})
        assert "values don't meet the specifications of the schema" in err, err
        assert where in err, err


def test_cluster_role_grants_nothing_on_priority_classes(tmp_path: Path) -> None:
    # the scheduler reads a pod's spec.priority (written by the API server's Priority
    # admission), never a PriorityClass: no code of scheduler/ lists them
    cr = one(render(tmp_path), "ClusterRole", FULLNAME)
    assert all("priorityclasses" not in rule["resources"] for rule in cr["rules"])
    sources = "\n".join(p.read_text() for p in (ROOT / "scheduler").rglob("*.py"))
    assert "priorityclasses" not in sources.lower()


def test_graceful_stop_hook_runs_as_its_own_hook_service_account(tmp_path: Path) -> None:
    docs = render(tmp_path, None, "replicas=2", "gracefulUninstall.enabled=true")
    name = f"{RELEASE}-kube-async-scheduler-graceful-stop"
    job = one(docs, "Job", name)
    sa, role, binding = (one(docs, k, name) for k in ("ServiceAccount", "Role", "RoleBinding"))
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert role["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments/scale"],
            "resourceNames": [f"{RELEASE}-kube-async-scheduler"],
            "verbs": ["patch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]

    def weight(obj: dict[str, Any]) -> int:
        ann = obj["metadata"]["annotations"]
        assert ann["helm.sh/hook"] == "pre-delete"
        assert ann["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
        return int(ann.get("helm.sh/hook-weight", "0"))

    # created before the Job, the binding after what it binds; deleted after it succeeds
    assert weight(sa) < weight(binding) < weight(job) and weight(role) < weight(binding)
    # the scheduler's own ServiceAccount is given nothing for the hook
    for rb in (d for d in docs if d["kind"] == "RoleBinding" and d is not binding):
        assert "graceful" not in rb["roleRef"]["name"]
    # no shell in the image: the hook execs the image's python itself
    (c,) = pod["containers"]
    assert c["command"] == ["python", "-c"]
    # without chart RBAC the hook has no identity of its own: it uses the scheduler's
    docs = render(
        tmp_path, None, "replicas=2", "gracefulUninstall.enabled=true", "rbac.create=false"
    )
    assert "ServiceAccount" not in {d["kind"] for d in docs if d["metadata"]["name"] == name}
    pod = one(docs, "Job", name)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == f"{RELEASE}-kube-async-scheduler"


# --- the schema -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "values", "message"),
    [
        (("replicas=0",), None, "/replicas"),
        (("replicas=two",), None, "/replicas"),
        (("config.preemption.mode=Lazy",), None, "'Async', 'Sync'"),
        (("config.preemption.victimScope=Mine",), None, "/config/preemption/victimScope"),
        (("config.percentageOfNodesToScore=101",), None, "/config/percentageOfNodesToScore"),
        (("leaderElection.enabled=maybe",), None, "/leaderElection/enabled"),
        (("leaderElection.leaseDuration=15",), None, "/leaderElection/leaseDuration"),
        (("image.pullPolicy=Sometimes",), None, "/image/pullPolicy"),
        (("server.securePort=70000",), None, "/server/securePort"),
        (("server.securePort=0",), None, "/server/securePort"),
        (("podDisruptionBudget.enabled=sometimes",), None, "/podDisruptionBudget/enabled"),
        (("networkPolicy.enabled=yes",), None, "/networkPolicy/enabled"),
        (("logLevel=9",), None, "/logLevel"),
        (("serviceMonitor.enabled=yes-please",), None, "/serviceMonitor/enabled"),
        (("nosuchkey=1",), None, "nosuchkey"),
        ((), {"config": {"profiles": []}}, "/config/profiles"),
        ((), {"config": {"profiles": [{"plugins": {}}]}}, "schedulerName"),
        (
            (),
            {"config": {"profiles": [{"schedulerName": "Bad_Name"}]}},
            "/config/profiles/0/schedulerName",
        ),
        (
            (),
            {
                "config": {
                    "profiles": [
                        {"schedulerName": "a", "plugins": {"scor": {"enabled": [{"name": "X"}]}}}
                    ]
                }
            },
            "scor",
        ),
        (
            (),
            {"config": {"profiles": [{"schedulerName": "a", "preemption": {"mode": "Eager"}}]}},
            "/config/profiles/0/preemption/mode",
        ),
        (
            (),
            {
                "config": {
                    "profiles": [
                        {
                            "schedulerName": "a",
                            "pluginConfig": [
                                {"name": "DefaultPreemption", "args": {"mode": "sync"}}
                            ],
                        }
                    ]
                }
            },
            "/config/profiles/0/pluginConfig/0/args/mode",
        ),
    ],
)
def test_schema_refuses_bad_values(
    tmp_path: Path, sets: tuple[str, ...], values: dict[str, Any] | None, message: str
) -> None:
    err = render_fails(tmp_path, values, *sets)
    assert "values don't meet the specifications of the schema" in err, err
    assert message in err, err


# --- lint -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sets",
    [
        (),
        (
            "replicas=3",
            "serviceMonitor.enabled=true",
            "dashboard.enabled=true",
            "podDisruptionBudget.enabled=true",
            "networkPolicy.enabled=true",
            "gracefulUninstall.enabled=true",
        ),
    ],
    ids=["defaults", "everything-on"],
)
def test_helm_lint_strict(sets: tuple[str, ...]) -> None:
    args: list[str] = []
    for s in sets:
        args += ["--set", s]
    for strict in ([], ["--strict"]):
        proc = helm("lint", str(CHART), *strict, *args, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "[ERROR]" not in proc.stdout and "[WARNING]" not in proc.stdout, proc.stdout


# --- the scheduler accepts what the chart renders ---------------------------------------


def _scheduler_run_exists() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("scheduler.app") is not None
    except ImportError:
        return False


@pytest.mark.skipif(
    not _scheduler_run_exists(), reason="scheduler.app (the run command) is not built yet"
)
@pytest.mark.parametrize("sets", [(), ("replicas=2", "config.preemption.mode=Sync")])
def test_scheduler_loads_the_rendered_config(tmp_path: Path, sets: tuple[str, ...]) -> None:
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(yaml.safe_dump(scheduler_config(render(tmp_path, None, *sets))))
    out = tmp_path / "effective.yaml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler",
            "run",
            "--config",
            str(cfg_file),
            "--kubeconfig",
            str(tmp_path / "no-such-kubeconfig"),
            "--write-config-to",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    effective = yaml.safe_load(out.read_text())
    assert [p["schedulerName"] for p in effective["profiles"]] == ["kube-async-scheduler"]


# --- PreemptionPolicy -------------------------------------------------------------------


def test_preemption_policies_crd_rbac_and_flag_follow_one_value(tmp_path: Path) -> None:
    docs = render(tmp_path)
    crd = one(docs, "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "preemptionpolicies.scheduling.kas.io"
    assert "--preemption-policies" in container(docs)["args"]
    off = render(tmp_path, None, "preemptionPolicies.enabled=false")
    assert "CustomResourceDefinition" not in kinds(off)
    assert "--preemption-policies" not in container(off)["args"]
    groups = {g for r in one(off, "ClusterRole", FULLNAME)["rules"] for g in r["apiGroups"]}
    assert "scheduling.kas.io" not in groups
    kept = render(tmp_path, None, "preemptionPolicies.installCRD=false")
    assert "CustomResourceDefinition" not in kinds(kept)
    assert "--preemption-policies" in container(kept)["args"]


def test_dynamic_resource_allocation_gate_and_rbac_follow_one_value(tmp_path: Path) -> None:
    # off by default here: no flag, no resource.k8s.io rule
    docs = render(tmp_path)
    groups = {g for r in one(docs, "ClusterRole", FULLNAME)["rules"] for g in r["apiGroups"]}
    assert "resource.k8s.io" not in groups
    on = render(tmp_path, None, "dynamicResourceAllocation.enabled=true")
    assert "--feature-gates=DynamicResourceAllocation=true" in container(on)["args"]
    rules = one(on, "ClusterRole", FULLNAME)["rules"]
    granted = {
        res: set(r["verbs"])
        for r in rules
        if r["apiGroups"] == ["resource.k8s.io"]
        for res in r["resources"]
    }
    assert granted == {
        "resourceslices": {"get", "list", "watch"},
        "deviceclasses": {"get", "list", "watch"},
        "devicetaintrules": {"get", "list", "watch"},
        "resourceclaims": {"get", "list", "watch", "update", "create", "delete"},
        "resourceclaims/status": {"update", "patch"},
    }
    # both gates: one flag, as kube-scheduler's --feature-gates takes them
    both = render(
        tmp_path, None, "dynamicResourceAllocation.enabled=true",
        "workloadAwareScheduling.enabled=true",
    )  # fmt: skip
    gates = [a for a in container(both)["args"] if a.startswith("--feature-gates")]
    assert gates == ["--feature-gates=GenericWorkload=true,DynamicResourceAllocation=true"]


def test_workload_aware_scheduling_gate_and_rbac_follow_one_value(tmp_path: Path) -> None:
    # off by default, as upstream's GenericWorkload gate: no flag, no podgroups rule
    docs = render(tmp_path)
    assert not any(a.startswith("--feature-gates") for a in container(docs)["args"])
    rules = one(docs, "ClusterRole", FULLNAME)["rules"]
    assert not any("podgroups" in r["resources"] for r in rules)
    on = render(tmp_path, None, "workloadAwareScheduling.enabled=true")
    assert "--feature-gates=GenericWorkload=true" in container(on)["args"]
    rules = one(on, "ClusterRole", FULLNAME)["rules"]
    granted = [r for r in rules if r["apiGroups"] == ["scheduling.k8s.io"]]
    assert granted == [
        {
            "apiGroups": ["scheduling.k8s.io"],
            "resources": ["podgroups"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups/status"], "verbs": ["patch"]},
    ]


# --- serving (HTTPS, delegated auth, the explain API) -----------------------------------


def test_serving_certificate_and_apiservice_agree(tmp_path: Path) -> None:
    from cryptography import x509

    docs = render(tmp_path)
    secret = one(docs, "Secret", f"{FULLNAME}-serving-cert")
    assert secret["type"] == "kubernetes.io/tls"
    api = one(docs, "APIService", "v1alpha1.explain.kas.io")
    assert api["spec"]["caBundle"] == secret["data"]["ca.crt"]
    svc = one(docs, "Service")
    assert api["spec"]["service"] == {
        "name": svc["metadata"]["name"], "namespace": NAMESPACE, "port": 10259,
    }  # fmt: skip
    # the aggregator dials <service>.<namespace>.svc and checks the name against caBundle
    leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{svc['metadata']['name']}.{NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)
    args = container(docs)["args"]
    assert args[args.index("--tls-cert-file") + 1].endswith("/tls.crt")
    assert "--cert-dir" not in args
    vols = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "serving-cert", "secret": {"secretName": secret["metadata"]["name"]}} in vols


def test_without_the_explain_api_a_self_signed_cert_in_an_emptydir(tmp_path: Path) -> None:
    docs = render(tmp_path, None, "explainAPI.enabled=false")
    assert not {"APIService", "Secret"} & set(kinds(docs))
    c = container(docs)
    cert_dir = c["args"][c["args"].index("--cert-dir") + 1]
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == cert_dir]
    vols = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    (vol,) = [v for v in vols if v["name"] == mount["name"]]
    assert "emptyDir" in vol  # the root filesystem is read-only


def test_a_mounted_serving_secret_needs_the_ca_bundle_for_the_apiservice(tmp_path: Path) -> None:
    err = render_fails(tmp_path, None, "server.tlsSecretName=mine")
    assert "explainAPI.caBundle" in err
    docs = render(tmp_path, None, "server.tlsSecretName=mine", "explainAPI.caBundle=Q0E=")
    assert one(docs, "APIService")["spec"]["caBundle"] == "Q0E="
    assert "Secret" not in kinds(docs)
    vols = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "serving-cert", "secret": {"secretName": "mine"}} in vols


def test_serving_rbac(tmp_path: Path) -> None:
    docs = render(tmp_path)
    sa = {"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}
    delegator = one(docs, "ClusterRoleBinding", f"{FULLNAME}-auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"  # tokenreviews, SARs
    assert delegator["subjects"] == [sa]
    reader = one(docs, "RoleBinding", f"{FULLNAME}-authentication-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }  # fmt: skip
    metrics = one(docs, "ClusterRole", f"{FULLNAME}-metrics-reader")
    assert metrics["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    explain = one(docs, "ClusterRole", f"{FULLNAME}-explain-reader")
    assert explain["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert explain["rules"] == [
        {"apiGroups": ["explain.kas.io"], "resources": ["pods"], "verbs": ["get"]}
    ]


def test_always_allowed_paths_reach_the_flag(tmp_path: Path) -> None:
    args = container(render(tmp_path))["args"]
    assert args[args.index("--authorization-always-allow-paths") + 1] == "/healthz,/readyz,/livez"
    err = render_fails(tmp_path, None, "server.alwaysAllowPaths={/a*b}")
    assert "alwaysAllowPaths" in err
