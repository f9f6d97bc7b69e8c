"""The local control plane is real: readiness, kwok nodes, binding, graceful delete,
PodDisruptionBudget status, RBAC, and a clean `cluster down`."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kas_dev.cluster import process
from kas_dev.cluster.ports import port_in_use
from tests.kube import ClusterHandle, pod_manifest, wait_for

pytestmark = pytest.mark.cluster


def test_apiserver_readyz_is_ok_and_every_kwok_node_is_ready(cluster: ClusterHandle) -> None:
    status, body = cluster.admin.get_text("/readyz")
    assert (status, body.strip()) == (200, "ok")
    nodes = cluster.api("GET", "/api/v1/nodes")["items"]
    assert len(nodes) >= 4
    for n in nodes:
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", n["metadata"]["name"]
        assert n["status"]["allocatable"]["cpu"] == "4"
        assert not n["spec"].get("taints"), "a fresh kwok node must carry no taint"
        assert n["metadata"]["labels"]["topology.kubernetes.io/zone"].startswith("zone-")


def test_tls_is_verified_against_the_cluster_ca(cluster: ClusterHandle) -> None:
    # a client that trusts only the system roots must refuse the server's certificate
    ctx = ssl.create_default_context()
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(cluster.api_url + "/readyz", context=ctx, timeout=5)
    assert isinstance(err.value.reason, ssl.SSLCertVerificationError)


def test_a_pod_bound_through_the_binding_subresource_becomes_running(
    cluster: ClusterHandle,
) -> None:
    ns = cluster.create_namespace("bind-test")
    cluster.create_pod(ns, pod_manifest("p1", scheduler_name="nobody"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "kwok-node-1"},
    }
    cluster.api("POST", f"/api/v1/namespaces/{ns}/pods/p1/binding", binding)

    def running() -> bool:
        pod = cluster.get_pod(ns, "p1")
        return bool(pod and pod["status"].get("phase") == "Running")

    wait_for(running, timeout=20, what="pod p1 Running")
    pod = cluster.get_pod(ns, "p1")
    assert pod is not None and pod["spec"]["nodeName"] == "kwok-node-1"


def test_a_graceful_delete_of_a_bound_pod_completes_within_seconds(cluster: ClusterHandle) -> None:
    ns = cluster.create_namespace("delete-test")
    cluster.create_pod(ns, pod_manifest("victim", scheduler_name="nobody", nodeName="kwok-node-2"))
    wait_for(
        lambda: (cluster.get_pod(ns, "victim") or {}).get("status", {}).get("phase") == "Running",
        timeout=20,
        what="victim Running",
    )
    # default grace period (30 s): kwok, acting as the kubelet, completes it at once
    cluster.api("DELETE", f"/api/v1/namespaces/{ns}/pods/victim")
    wait_for(lambda: cluster.get_pod(ns, "victim") is None, timeout=10, what="victim gone")


def test_a_pod_disruption_budget_gets_disruptions_allowed_computed(cluster: ClusterHandle) -> None:
    ns = cluster.create_namespace("pdb-test")
    for i in range(3):
        cluster.create_pod(
            ns,
            pod_manifest(
                f"web-{i}", scheduler_name="nobody", nodeName="kwok-node-0", labels={"app": "web"}
            ),
        )
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    cluster.api("POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", pdb)

    def allowed() -> int | None:
        st = cluster.api("GET", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web").get(
            "status", {}
        )
        return st.get("disruptionsAllowed") if st.get("currentHealthy") == 3 else None

    assert wait_for(allowed, timeout=30, what="disruptionsAllowed") == 2


def test_rbac_is_enforced_for_a_service_account_without_roles(cluster: ClusterHandle) -> None:
    ns = cluster.create_namespace("rbac-test")
    cluster.api(
        "POST", f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "nobody"}}
    )
    token = cluster.api(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/nobody/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )["status"]["token"]
    req = urllib.request.Request(
        cluster.api_url + "/api/v1/pods", headers={"Authorization": f"Bearer {token}"}
    )
    ctx = ssl.create_default_context(cafile=cluster.ca_file)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, context=ctx, timeout=10)
    assert err.value.code == 403
    # the same token is authenticated (not 401): RBAC, not authentication, refused it
    assert json.loads(err.value.read())["reason"] == "Forbidden"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduler", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )


def test_cluster_up_and_down_through_the_cli_leaves_nothing_running(
    cluster: ClusterHandle, tmp_path: Path
) -> None:
    # a second cluster next to the session's one: two clusters run at once
    d = tmp_path / "c"
    up = _cli("cluster", "up", "--nodes", "2", "--dir", str(d))
    assert up.returncode == 0, up.stderr
    assert f"kubeconfig: {d / 'kubeconfig'}" in up.stdout
    state = json.loads((d / "cluster.json").read_text())
    assert state["ports"]["kube-apiserver"] != cluster.local.state.ports["kube-apiserver"]  # type: ignore[union-attr]

    status = _cli("cluster", "status", "--dir", str(d), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["nodes_ready"] == 2

    busy = _cli("cluster", "up", "--dir", str(d))
    assert busy.returncode != 0 and "already running" in busy.stderr

    down = _cli("cluster", "down", "--dir", str(d))
    assert down.returncode == 0, down.stderr
    for name, pid in state["pids"].items():
        assert not process.is_running(pid, state["binaries"][name]), name
    for name, port in state["ports"].items():
        if name != "etcd-peer":
            assert not port_in_use(port), f"{name} port {port} still open"
    # the session cluster is untouched
    assert cluster.admin.get_text("/readyz")[0] == 200


@pytest.mark.parametrize(
    ("case", "expect"),
    [
        ("unknown-node-mix-field", "nodes[0].cpus: unknown field"),
        ("missing-binary", "binary 'etcd' not found"),
        ("occupied-directory", "is not empty and holds no cluster"),
        ("node-mix-bad-effect", "effect: must be one of"),
        ("port-in-use", "is already in use"),
    ],
)
def test_bad_input_gives_a_one_line_error_and_a_non_zero_exit(
    tmp_path: Path, case: str, expect: str
) -> None:
    env: dict[str, str] = {}
    args = ["cluster", "up", "--dir", str(tmp_path / "c")]
    if case == "unknown-node-mix-field":
        mix = tmp_path / "mix.yaml"
        mix.write_text("nodes:\n  - count: 2\n    cpus: 4\n")
        args += ["--node-mix", str(mix)]
    elif case == "node-mix-bad-effect":
        mix = tmp_path / "mix.yaml"
        mix.write_text("nodes:\n  - count: 1\n    taints: [{key: a, effect: Sometimes}]\n")
        args += ["--node-mix", str(mix)]
    elif case == "missing-binary":
        empty = tmp_path / "nobin"
        empty.mkdir()
        env["KAS_BIN_DIR"] = str(empty)
    elif case == "occupied-directory":
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / "something.txt").write_text("mine")
    with socket.socket() as listener:
        if case == "port-in-use":
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            args += ["--apiserver-port", str(listener.getsockname()[1])]
        res = _cli(*args, env=env)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert expect in lines[0]
