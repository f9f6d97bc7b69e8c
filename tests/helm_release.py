"""The Helm chart installed into a real local cluster, and the scheduler run as a local
process under the chart's ServiceAccount: a TokenRequest token and the cluster CA in a
kubeconfig, and the KubeSchedulerConfiguration read back from the installed ConfigMap.

kwok nodes run no containers, so the Deployment's own pods never start; what runs is
the same identity (RBAC) with the same configuration (leader election, lease name)."""

from __future__ import annotations

import base64
import json
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests import tools
from tests.kube import ClusterHandle

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "kube-async-scheduler"
# short leases so that failovers take seconds (the chart's defaults are 15s/10s/2s)
FAST_LEASE = (
    "leaderElection.leaseDuration=6s",
    "leaderElection.renewDeadline=4s",
    "leaderElection.retryPeriod=1s",
)


def find_helm() -> str:
    found = tools.find_helm()
    if found is None:
        raise AssertionError("helm not found (run hack/install-binaries.sh)")
    return found


def helm(
    cluster: ClusterHandle, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [find_helm(), "--kubeconfig", cluster.kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc


@dataclass
class Release:
    cluster: ClusterHandle
    name: str
    namespace: str

    @property
    def fullname(self) -> str:
        # the chart's kas.fullname for a release name that contains the chart name
        assert "kube-async-scheduler" in self.name
        return self.name

    @property
    def service_account(self) -> str:
        return self.fullname

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def manifest(self) -> list[dict[str, Any]]:
        out = helm(self.cluster, "get", "manifest", self.name, "-n", self.namespace).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    def scheduler_config(self) -> str:
        """config.yaml of the installed ConfigMap, as the API server holds it."""
        cm = self.cluster.api(
            "GET", f"/api/v1/namespaces/{self.namespace}/configmaps/{self.fullname}-config"
        )
        return str(cm["data"]["config.yaml"])

    def write_config(self, path: Path) -> Path:
        path.write_text(self.scheduler_config())
        return path

    def token(self, seconds: int = 3600) -> str:
        """A TokenRequest token for the chart's ServiceAccount."""
        return service_account_token(self.cluster, self.namespace, self.service_account, seconds)

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig with the ServiceAccount's bearer token and the cluster CA only
        (no client certificate: the API server sees the ServiceAccount, nothing else)."""
        ca = base64.b64encode(Path(self.cluster.ca_file).read_bytes()).decode()
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.cluster.api_url, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": "sa", "user": {"token": self.token()}}],
            "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
            "current-context": "sa",
        }
        path.write_text(yaml.safe_dump(cfg))
        path.chmod(0o600)
        return path


def service_account_token(
    cluster: ClusterHandle, namespace: str, name: str, seconds: int = 3600
) -> str:
    """A TokenRequest token for ServiceAccount namespace/name."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
    return str(cluster.api("POST", path, body)["status"]["token"])


def install(cluster: ClusterHandle, name: str, namespace: str, *sets: str) -> Release:
    """`helm install` with these --set values. The aggregated explain API is off unless a
    value names it: its APIService points at the chart's ClusterIP Service, which nothing
    routes here (no kube-proxy), and an unavailable aggregated API stalls namespace
    deletion (the namespace controller waits for every group's discovery)."""
    args = ["install", name, str(CHART), "-n", namespace, "--create-namespace"]
    if not any(s.startswith("explainAPI.") for s in sets):
        sets = ("explainAPI.enabled=false", *sets)
    for s in sets:
        args += ["--set", s]
    helm(cluster, *args)
    return Release(cluster, name, namespace)


def request_as(
    cluster: ClusterHandle, token: str, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    """One raw HTTPS request with a bearer token (verified against the cluster CA)."""
    ctx = ssl.create_default_context(cafile=cluster.ca_file)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        cluster.api_url + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


_IDENTITY = re.compile(r"attempting to acquire leader lease lease=\S+ identity=(\S+)")


def identity_of(log_path: Path) -> str:
    """The leader-election identity a scheduler process logged ("" before it did)."""
    try:
        found = _IDENTITY.findall(log_path.read_text(errors="replace"))
    except OSError:
        return ""
    return found[-1] if found else ""


def lease_holder(cluster: ClusterHandle, namespace: str, name: str) -> str:
    status, out = cluster.admin.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
    )
    if status == 404:
        return ""
    assert status == 200, out
    return str((out.get("spec") or {}).get("holderIdentity") or "")
