"""scheduler.client.connection against the real local control plane: kubeconfig and
TokenRequest bearer tokens, TLS verified against the cluster CA, errors by status."""

from __future__ import annotations

import uuid

import pytest

from scheduler.client.connection import Connection
from scheduler.client.errors import ConnectionFailed, Forbidden, NotFound
from tests.kube import ClusterHandle

pytestmark = pytest.mark.cluster


def service_account_token(cluster: ClusterHandle, namespace: str, name: str) -> str:
    """A ServiceAccount bound to system:kube-scheduler, and a token from TokenRequest."""
    cluster.create_namespace(namespace)
    cluster.api(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}}
    )
    cluster.api(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": f"{namespace}-{name}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:kube-scheduler",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )
    answer = cluster.api(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(answer["status"]["token"])


async def test_a_kubeconfig_connection_lists_nodes_as_raw_dicts(cluster: ClusterHandle) -> None:
    async with await Connection.from_kubeconfig(cluster.kubeconfig) as conn:
        nodes = await conn.request("GET", "/api/v1/nodes", query={"limit": 2})
        assert isinstance(nodes, dict)
        assert len(nodes["items"]) == 2
        assert nodes["metadata"]["continue"]
        with pytest.raises(NotFound):
            await conn.request("GET", "/api/v1/namespaces/default/pods/no-such-pod")


async def test_a_service_account_token_connection_has_the_scheduler_rights(
    cluster: ClusterHandle,
) -> None:
    ns = f"sa-{uuid.uuid4().hex[:6]}"
    token = service_account_token(cluster, ns, "scheduler")
    async with Connection.from_token(cluster.api_url, token=token, ca_file=cluster.ca_file) as conn:
        pods = await conn.request("GET", "/api/v1/pods", query={"limit": 1})
        assert pods["kind"] == "PodList"
        with pytest.raises(Forbidden):  # the scheduler role cannot read secrets
            await conn.request("GET", f"/api/v1/namespaces/{ns}/secrets")


async def test_a_token_file_is_read_and_used(cluster: ClusterHandle, tmp_path: object) -> None:
    import pathlib

    ns = f"sa-{uuid.uuid4().hex[:6]}"
    token_file = pathlib.Path(str(tmp_path)) / "token"
    token_file.write_text(service_account_token(cluster, ns, "scheduler") + "\n")
    async with Connection.from_token(
        cluster.api_url, token_file=str(token_file), ca_file=cluster.ca_file
    ) as conn:
        assert (await conn.request("GET", "/api/v1/nodes", query={"limit": 1}))["items"]


async def test_tls_is_verified_against_the_given_ca(cluster: ClusterHandle) -> None:
    # without the cluster CA (system roots only) the server certificate is refused
    async with Connection.from_token(cluster.api_url, token="x", ca_file=None) as conn:
        with pytest.raises(ConnectionFailed):
            await conn.request("GET", "/api/v1/nodes")
