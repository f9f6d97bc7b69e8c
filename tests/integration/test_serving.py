"""The scheduler's HTTPS port against the real control plane, as kube-scheduler's 10259:
who may read /metrics and explain, directly and through the API server as the
aggregated API explain.kas.io (kube-apiserver's own aggregator and front proxy), which
certificate it serves, and health bodies that withhold their reasons.

Identities: the cluster admin (client certificate, system:masters), ServiceAccount
tokens checked by TokenReview: `nobody` (no rights), `tenant` (`get pods` in team-a
only; `get pods.explain.kas.io` everywhere, as the chart's explain-reader role
aggregated to view gives it). The aggregated API's Service is an ExternalName for
localhost, which kube-apiserver resolves to https://localhost:<APIService port> (its
ResolveCluster, k8s.io/apiserver@v0.37.2 pkg/util/proxy), i.e. the scheduler process.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from scheduler.serving.certs import generate_self_signed
from tests.helm_release import request_as, service_account_token
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = pytest.mark.cluster

SCHED = "kas-serving"
SVC_NS, SVC = "kas-system", "kas-explain"
EXPLAIN_API = "/apis/explain.kas.io/v1alpha1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@dataclass
class Env:
    cluster: ClusterHandle
    sched: SchedulerProcess  # serves the mounted certificate, registered as the API
    plain: SchedulerProcess  # serves a self-signed one from --cert-dir
    mounted_cert: bytes
    tokens: dict[str, str]
    d: Path


def _pending_pod(cluster: ClusterHandle, ns: str, name: str) -> None:
    # asks for more CPU than any node has: pending, with a recorded attempt
    cluster.create_pod(ns, pod_manifest(name, cpu="64", scheduler_name=SCHED))


def _grant(cluster: ClusterHandle) -> None:
    sa = {"kind": "ServiceAccount", "name": "tenant", "namespace": "team-a"}
    cluster.api("POST", f"{RBAC}/namespaces/team-a/roles", {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    })  # fmt: skip
    cluster.api("POST", f"{RBAC}/namespaces/team-a/rolebindings", {
        "metadata": {"name": "tenant-pod-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [sa],
    })  # fmt: skip
    # what the chart's explain-reader ClusterRole (aggregated to view) grants
    cluster.api("POST", f"{RBAC}/clusterroles", {
        "metadata": {"name": "explain-reader"},
        "rules": [{"apiGroups": ["explain.kas.io"], "resources": ["pods"], "verbs": ["get"]}],
    })  # fmt: skip
    cluster.api("POST", f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": "tenant-explain"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "explain-reader"},
        "subjects": [sa],
    })  # fmt: skip


def _register_api(cluster: ClusterHandle, port: int, ca_pem: bytes) -> None:
    cluster.create_namespace(SVC_NS)
    cluster.api("POST", f"/api/v1/namespaces/{SVC_NS}/services", {
        "metadata": {"name": SVC},
        "spec": {"type": "ExternalName", "externalName": "localhost"},
    })  # fmt: skip
    cluster.api("POST", "/apis/apiregistration.k8s.io/v1/apiservices", {
        "metadata": {"name": "v1alpha1.explain.kas.io"},
        "spec": {
            "group": "explain.kas.io", "version": "v1alpha1",
            "groupPriorityMinimum": 100, "versionPriority": 100,
            "caBundle": base64.b64encode(ca_pem).decode(),
            "service": {"name": SVC, "namespace": SVC_NS, "port": port},
        },
    })  # fmt: skip


def _available(cluster: ClusterHandle) -> dict[str, Any] | None:
    api = cluster.api("GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.explain.kas.io")
    for c in (api.get("status") or {}).get("conditions") or []:
        if c["type"] == "Available":
            return c if c["status"] == "True" else None
    return None


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("serving")
    local = LocalCluster(d / "cluster")
    local.up([NodeGroup(count=1, name_prefix="s")])
    cluster = ClusterHandle(local)
    procs: list[SchedulerProcess] = []
    try:
        # a mounted certificate for the name the aggregator dials, signed by a CA of ours
        cert_pem, key_pem = generate_self_signed(
            f"{SVC}.{SVC_NS}.svc", ["127.0.0.1"], ["localhost"]
        )
        (d / "tls.crt").write_bytes(cert_pem)
        (d / "tls.key").write_bytes(key_pem)
        ca_pem = x509.load_pem_x509_certificates(cert_pem)[1].public_bytes(Encoding.PEM)
        (d / "ca.crt").write_bytes(ca_pem)
        config = write_config(d / "config.yaml", profiles=[{"schedulerName": SCHED}])
        sched = SchedulerProcess(
            cluster.kubeconfig, config, d / "sched.log", server_ca=d / "ca.crt",
            extra_args=["--tls-cert-file", str(d / "tls.crt"),
                        "--tls-private-key-file", str(d / "tls.key")],
        ).start()  # fmt: skip
        procs.append(sched)
        plain_cfg = write_config(d / "plain.yaml", profiles=[{"schedulerName": "kas-plain"}])
        plain = SchedulerProcess(cluster.kubeconfig, plain_cfg, d / "plain.log").start()
        procs.append(plain)
        for ns in ("team-a", "team-b"):
            cluster.create_namespace(ns)
            _pending_pod(cluster, ns, "p")
        for sa in ("tenant", "nobody"):
            cluster.api(
                "POST", "/api/v1/namespaces/team-a/serviceaccounts", {"metadata": {"name": sa}}
            )
        _grant(cluster)
        tokens = {sa: service_account_token(cluster, "team-a", sa) for sa in ("tenant", "nobody")}
        _register_api(cluster, sched.port, ca_pem)
        yield Env(cluster, sched, plain, cert_pem, tokens, d)
    finally:
        for p in procs:
            p.stop()
        local.down()


def _status(text: str) -> dict[str, Any]:
    return dict(json.loads(text))


def _explained(env: Env, ns: str) -> bool:
    return env.sched.get(f"/explain/{ns}/p")[0] == 200


# ------------------------------------------------------------------ direct


def test_without_credentials_metrics_and_explain_are_401(env: Env) -> None:
    for path in ("/metrics", "/explain/team-a/p", f"{EXPLAIN_API}/namespaces/team-a/pods/p"):
        status, text = env.sched.get(path, token="")
        assert status == 401, (path, text)
        assert _status(text)["reason"] == "Unauthorized"


def test_a_token_without_the_right_is_403(env: Env) -> None:
    status, text = env.sched.get("/metrics", token=env.tokens["nobody"])
    assert status == 403, text
    assert _status(text)["message"] == (
        'forbidden: User "system:serviceaccount:team-a:nobody" cannot get path "/metrics"'
    )
    assert env.sched.get("/explain/team-a/p", token=env.tokens["nobody"])[0] == 403
    assert env.sched.get("/metrics", token="not-a-token")[0] == 401


def test_the_tenant_reads_its_namespace_only_directly(env: Env) -> None:
    for ns in ("team-a", "team-b"):  # both pods are in the scheduler's cache
        wait_for(lambda ns=ns: _explained(env, ns), timeout=60, what=f"{ns}/p explained")
    status, text = env.sched.get("/explain/team-a/p", token=env.tokens["tenant"])
    assert status == 200, text
    assert json.loads(text)["pod"] == "team-a/p"
    status, text = env.sched.get("/explain/team-b/p", token=env.tokens["tenant"])
    assert status == 403 and "forbidden" in text, text


def test_health_is_open_and_the_admin_reads_metrics(env: Env) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        assert env.sched.get(path) == (200, "ok")
    status, text = env.sched.get("/metrics")  # the admin's client certificate
    assert status == 200 and "scheduler_schedule_attempts_total" in text


# ------------------------------------------------------------------ certificates


def _served_certificate(p: SchedulerProcess) -> x509.Certificate:
    pem = ssl.get_server_certificate(("127.0.0.1", p.port), timeout=10)
    return x509.load_pem_x509_certificate(pem.encode())


def test_a_self_signed_certificate_without_one_and_the_mounted_one_when_given(env: Env) -> None:
    plain = _served_certificate(env.plain)
    on_disk = x509.load_pem_x509_certificates(env.plain.server_ca.read_bytes())
    assert plain == on_disk[0]  # written to --cert-dir, as upstream's MaybeDefault...
    assert plain.issuer == on_disk[1].subject
    assert on_disk[1].subject.rfc4514_string().startswith("CN=localhost-ca@")
    mounted = _served_certificate(env.sched)
    assert mounted == x509.load_pem_x509_certificates(env.mounted_cert)[0]


# ------------------------------------------------------------------ aggregated API


def test_the_api_server_forwards_the_tenant_to_the_aggregated_api(env: Env) -> None:
    cluster = env.cluster
    wait_for(lambda: _available(cluster), timeout=90, interval=1,
             what=f"APIService available\n{env.sched.tail(20)}")  # fmt: skip
    wait_for(lambda: _explained(env, "team-a"), timeout=60, what="team-a/p explained")
    tenant = env.tokens["tenant"]
    status, body = request_as(cluster, tenant, "GET", f"{EXPLAIN_API}/namespaces/team-a/pods/p")
    assert status == 200, body
    assert body["pod"] == "team-a/p"
    # the API server lets the request through (explain-reader is cluster-wide); the
    # scheduler refuses it: the tenant may not get pods in team-b
    status, body = request_as(cluster, tenant, "GET", f"{EXPLAIN_API}/namespaces/team-b/pods/p")
    assert status == 403, body
    assert body.get("kind") != "Status", body  # the scheduler's answer, not the API server's
    # a user without the explain right is refused by the API server itself
    status, body = request_as(
        cluster, env.tokens["nobody"], "GET", f"{EXPLAIN_API}/namespaces/team-a/pods/p"
    )
    assert status == 403 and "explain.kas.io" in body.get("message", ""), body
    # discovery, as kubectl sees it
    status, body = request_as(cluster, tenant, "GET", EXPLAIN_API)
    assert status == 200 and body["resources"][0]["name"] == "pods", body


def test_the_cli_explains_with_the_users_kubeconfig_alone(env: Env) -> None:
    wait_for(lambda: _available(env.cluster), timeout=90, interval=1, what="APIService available")
    kubeconfig = env.d / "tenant-kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "c", "cluster": {
            "server": env.cluster.api_url,
            "certificate-authority-data": base64.b64encode(
                Path(env.cluster.ca_file).read_bytes()).decode()}}],
        "users": [{"name": "u", "user": {"token": env.tokens["tenant"]}}],
        "contexts": [{"name": "t", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip

    def explain(key: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "scheduler", "explain", key, "--kubeconfig", str(kubeconfig),
             "-o", "json"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    ok = explain("team-a/p")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["pod"] == "team-a/p"
    refused = explain("team-b/p")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
