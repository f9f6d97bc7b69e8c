"""Test helpers around a real local cluster: a handle with the admin client, kubectl and
object builders for pods. Used by the fixtures in conftest.py; no mocks here."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kas_dev.cluster.api import AdminClient
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup, node_manifests


@dataclass
class ClusterHandle:
    local: LocalCluster

    @property
    def kubeconfig(self) -> str:
        return str(self.local.kubeconfig)

    @property
    def api_url(self) -> str:
        return self.local.api_url

    @property
    def ca_file(self) -> str:
        return str(self.local.ca_file)

    @property
    def bin_dir(self) -> Path:
        assert self.local.state is not None
        return Path(self.local.state.bin_dir)

    @property
    def admin(self) -> AdminClient:
        return self.local.admin(timeout=30)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        res = subprocess.run(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", self.kubeconfig, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {res.stderr.strip()}")
        return res.stdout

    def api(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        status, out = self.admin.request(method, path, body, content_type)
        if status >= 300:
            raise AssertionError(f"{method} {path}: HTTP {status}: {out}")
        return out

    def create_nodes(self, *groups: NodeGroup) -> list[str]:
        manifests = node_manifests(list(groups))
        self.local.create_nodes(manifests)
        names = {m["metadata"]["name"] for m in manifests}
        self.local.wait_nodes_ready(names)
        return sorted(names)

    def delete_nodes(self, names: list[str]) -> None:
        for n in names:
            self.admin.request("DELETE", f"/api/v1/nodes/{n}")

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        self.api("POST", "/api/v1/namespaces", {"metadata": {"name": name, "labels": labels or {}}})
        return name

    def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self.api("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
        return out

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        status, out = self.admin.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        if status == 404:
            return None
        assert status == 200, out
        return dict(out)

    def list_pods(self, namespace: str | None = None, selector: str = "") -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        if selector:
            path += f"?labelSelector={selector}"
        return list(self.api("GET", path)["items"])

    def events(self, namespace: str) -> list[dict[str, Any]]:
        return list(
            self.api("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        )


def pod_manifest(
    name: str,
    *,
    scheduler_name: str = "kube-async-scheduler",
    cpu: str = "100m",
    memory: str = "64Mi",
    priority_class: str | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "c",
        "image": "registry.local/pause:3.10",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"schedulerName": scheduler_name, "containers": [container], **spec},
    }
    if priority_class:
        body["spec"]["priorityClassName"] = priority_class
    return body


def wait_for(
    predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or predicate}")
        time.sleep(interval)


async def until(predicate: Callable[[], Any], seconds: float = 30.0) -> None:
    """Wait, without blocking the event loop, until `predicate()` is true (what informers
    or handlers running on the same loop record); asyncio.TimeoutError after `seconds`."""
    async with asyncio.timeout(seconds):
        while not predicate():  # noqa: ASYNC110 - polling state other tasks write
            await asyncio.sleep(0.05)
