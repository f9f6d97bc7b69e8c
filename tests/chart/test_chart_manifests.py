"""deploy/ holds the chart's defaults rendered by hack/render-manifests.sh: re-render and
compare, so a chart change without a re-render fails here (no drift)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.tools import find_helm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "render-manifests.sh"
MANIFESTS = ROOT / "deploy" / "kube-async-scheduler.yaml"
NAMESPACE = "kube-async-scheduler"


HELM = find_helm()
needs_helm = pytest.mark.skipif(
    HELM is None,
    reason="helm not found in $KAS_BIN_DIR, ~/.cache/kube-async-scheduler/bin or PATH "
    "(run hack/install-binaries.sh)",
)


def docs() -> list[dict]:
    return [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]


@needs_helm
def test_deploy_manifests_match_the_chart_defaults() -> None:
    env = {**os.environ, "HELM": HELM or ""}
    fresh = subprocess.run(
        ["bash", str(SCRIPT), "--stdout"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    ).stdout
    assert fresh == MANIFESTS.read_text(), (
        "deploy/kube-async-scheduler.yaml is stale: run hack/render-manifests.sh"
    )


@needs_helm
def test_check_mode_passes_on_a_clean_tree() -> None:
    env = {**os.environ, "HELM": HELM or ""}
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_manifests_are_self_contained() -> None:
    d = docs()
    assert d[0] == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": NAMESPACE,
            "labels": {"app.kubernetes.io/part-of": "kube-async-scheduler"},
        },
    }
    cluster_scoped = ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition")
    for obj in d[1:]:
        if obj["kind"] == "RoleBinding" and obj["metadata"]["name"].endswith(
            "-authentication-reader"
        ):
            # reading kube-system/extension-apiserver-authentication (delegated authn)
            assert obj["metadata"]["namespace"] == "kube-system"
        elif obj["kind"] not in cluster_scoped:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
    names = {(o["kind"], o["metadata"]["name"]) for o in d}
    assert ("Deployment", "kube-async-scheduler") in names
    assert ("ConfigMap", "kube-async-scheduler-config") in names
    cm = next(o for o in d if o["kind"] == "ConfigMap")
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    assert cfg["leaderElection"]["resourceName"] == "kube-async-scheduler"
    assert cfg["leaderElection"]["resourceNamespace"] == NAMESPACE
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["kube-async-scheduler"]
