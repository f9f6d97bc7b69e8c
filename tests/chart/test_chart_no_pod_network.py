"""The chart's values for clusters without a pod network, and its PrometheusRule checked
by a real promtool (built by `hack/install-binaries.sh realnode`)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tools import find_helm, find_tool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kube-async-scheduler"
HELM = find_helm()
PROMTOOL = find_tool("promtool")
pytestmark = pytest.mark.skipif(HELM is None, reason="helm not found (hack/install-binaries.sh)")


def render(*sets: str, show: str) -> list[dict[str, Any]]:
    assert HELM is not None
    argv = [HELM, "template", "kas", str(CHART), "--namespace", "sched", "--show-only", show]
    for s in sets:
        argv += ["--set", s]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0 and "could not find template" in proc.stderr:
        return []  # the template rendered nothing
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def container(*sets: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (dep,) = render(*sets, show="templates/deployment.yaml")
    spec = dep["spec"]["template"]["spec"]
    return spec, spec["containers"][0]


def test_defaults_keep_the_pod_network() -> None:
    spec, c = container()
    assert "hostNetwork" not in spec and "dnsPolicy" not in spec
    assert "host" not in c["livenessProbe"]["httpGet"]
    assert "host" not in c["readinessProbe"]["httpGet"]
    assert not {e["name"] for e in c["env"]} & {
        "KUBERNETES_SERVICE_HOST",
        "KUBERNETES_SERVICE_PORT",
    }


def test_no_pod_network_values() -> None:
    spec, c = container(
        "hostNetwork=true", "probeHost=127.0.0.1", "apiServer.host=127.0.0.1", "apiServer.port=6443"
    )
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"]["host"] == "127.0.0.1"
        assert c[probe]["httpGet"]["port"] == "https"
        assert c[probe]["httpGet"]["scheme"] == "HTTPS"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == "6443"


def test_api_server_host_without_port_is_refused() -> None:
    assert HELM is not None
    proc = subprocess.run(
        [HELM, "template", "kas", str(CHART), "--set", "apiServer.host=127.0.0.1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "apiServer.port is required" in proc.stderr


def _rules_file(tmp_path: Path, *sets: str) -> Path:
    (rule,) = render("prometheusRule.enabled=true", *sets, show="templates/prometheusrule.yaml")
    assert rule["kind"] == "PrometheusRule"
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not built (install-binaries.sh realnode)")
@pytest.mark.parametrize("replicas", ["1", "2"])
def test_prometheus_rule_passes_promtool(tmp_path: Path, replicas: str) -> None:
    assert PROMTOOL is not None
    path = _rules_file(tmp_path, f"replicas={replicas}")
    proc = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = {r["alert"] for r in yaml.safe_load(path.read_text())["groups"][0]["rules"]}
    # the leader alert only makes sense with leader election
    assert ("KubeAsyncSchedulerNoLeader" in names) == (replicas == "2")
    for r in yaml.safe_load(path.read_text())["groups"][0]["rules"]:
        assert 'job="kas-kube-async-scheduler-metrics"' in r["expr"]


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not built (install-binaries.sh realnode)")
def test_promtool_catches_a_broken_rule(tmp_path: Path) -> None:
    # the check above means something only if promtool refuses bad PromQL
    assert PROMTOOL is not None
    path = _rules_file(
        tmp_path,
        "prometheusRule.additionalRules[0].alert=Broken",
        "prometheusRule.additionalRules[0].expr=sum(rate(x[5m])",
    )
    proc = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True)
    assert proc.returncode != 0


def test_graceful_uninstall_hook_only_with_leader_election_and_narrow() -> None:
    assert render("gracefulUninstall.enabled=true", show="templates/graceful-uninstall.yaml") == []
    docs = render(
        "gracefulUninstall.enabled=true", "replicas=2", "hostNetwork=true",
        "apiServer.host=127.0.0.1", "apiServer.port=6443",
        show="templates/graceful-uninstall.yaml",
    )  # fmt: skip
    by_kind = {d["kind"]: d for d in docs}
    # the hook's own ServiceAccount, Role and binding (test_chart_render checks their rules)
    assert set(by_kind) == {"ServiceAccount", "Role", "RoleBinding", "Job"}
    assert by_kind["Role"]["rules"][0] == {
        "apiGroups": ["apps"],
        "resources": ["deployments/scale"],
        "resourceNames": ["kas-kube-async-scheduler"],
        "verbs": ["patch"],
    }
    job = by_kind["Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    pod = job["spec"]["template"]
    # the hook's own pod must not be one of those it waits for
    assert "app.kubernetes.io/instance" not in pod["metadata"]["labels"]
    assert pod["spec"]["hostNetwork"] is True
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["SELECTOR"].endswith("app.kubernetes.io/component=scheduler")
    # the script is valid Python (it runs in the scheduler image's interpreter)
    compile(pod["spec"]["containers"][0]["args"][0], "hook", "exec")
