"""scheduler.client.connection against the real local control plane: kubeconfig and
TokenRequest bearer tokens, TLS verified against the cluster CA, errors by status."""

from __future__ import annotations

import uuid

import pytest

from kas_dev.cluster.ports import free_port
from scheduler.client.connection import STRATEGIC_MERGE_PATCH, Connection
from scheduler.client.errors import ConnectionFailed, Forbidden, NotFound, Unauthorized
from tests.kube import ClusterHandle, pod_manifest

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


async def test_a_rotated_token_file_is_used_from_the_next_request(
    cluster: ClusterHandle, tmp_path: object
) -> None:
    """The token file is re-read before a request once it changed (projected tokens
    rotate under a running scheduler): a refused token, then a good one, on one pool."""
    import os
    import pathlib

    ns = f"sa-{uuid.uuid4().hex[:6]}"
    good = service_account_token(cluster, ns, "scheduler")
    token_file = pathlib.Path(str(tmp_path)) / "token"
    token_file.write_text("not-a-token\n")
    async with Connection.from_token(
        cluster.api_url, token_file=str(token_file), ca_file=cluster.ca_file
    ) as conn:
        with pytest.raises(Unauthorized):
            await conn.request("GET", "/api/v1/nodes", query={"limit": 1})
        token_file.write_text(good + "\n")
        stat = token_file.stat()  # a distinct mtime even on a coarse-grained filesystem
        os.utime(token_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        assert (await conn.request("GET", "/api/v1/nodes", query={"limit": 1}))["items"]


async def test_the_user_agent_names_the_field_manager_of_our_writes(
    cluster: ClusterHandle,
) -> None:
    """The API server records a write's field manager from its User-Agent (up to the
    first "/"): the header goes out on every request, status patches included."""
    ns = cluster.create_namespace(f"ua-{uuid.uuid4().hex[:6]}")
    cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody"))
    conn = await Connection.from_kubeconfig(cluster.kubeconfig, user_agent="kas-ua-test/v9")
    async with conn:
        patch = {"status": {"nominatedNodeName": "kwok-node-1"}}
        await conn.request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/p/status",
            body=patch,
            content_type=STRATEGIC_MERGE_PATCH,
        )
    pod = cluster.get_pod(ns, "p")
    assert pod is not None
    managers = {entry["manager"] for entry in pod["metadata"]["managedFields"]}
    assert "kas-ua-test" in managers


async def test_the_proxy_of_the_environment_is_read_when_the_connection_is_built(
    cluster: ClusterHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTPS_PROXY / NO_PROXY are honoured, read once when the connection is built (as
    client-go reads them once): requests through a proxy that refuses fail, an
    exempted apiserver is reached directly, and a later change of the variables does
    not change a built connection."""
    closed = f"http://127.0.0.1:{free_port()}"
    with monkeypatch.context() as env:
        env.setenv("HTTPS_PROXY", closed)
        env.delenv("NO_PROXY", raising=False)
        env.delenv("no_proxy", raising=False)
        proxied = await Connection.from_kubeconfig(cluster.kubeconfig)
        env.setenv("NO_PROXY", "127.0.0.1")
        direct = await Connection.from_kubeconfig(cluster.kubeconfig)
    async with proxied, direct:
        with pytest.raises(ConnectionFailed):
            await proxied.request("GET", "/api/v1/nodes", query={"limit": 1})
        assert (await direct.request("GET", "/api/v1/nodes", query={"limit": 1}))["items"]


async def test_writes_over_tls_reuse_one_connection_and_carry_a_server_timeout(
    cluster: ClusterHandle,
) -> None:
    """Against the real API server over TLS with the kubeconfig's client certificate: the
    TLS context built from the configuration is accepted, an idle connection passes the
    liveness check (a server's TLS session tickets are not taken for unread data), and
    the `timeout` parameter each write carries is accepted on every kind of write."""
    ns = cluster.create_namespace(f"reuse-{uuid.uuid4().hex[:6]}")
    cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody"))
    async with await Connection.from_kubeconfig(cluster.kubeconfig) as conn:
        pool = conn.write_pool
        assert pool is not None and conn.ssl_context is not None
        for i in range(5):
            await conn.request(
                "PATCH",
                f"/api/v1/namespaces/{ns}/pods/p/status",
                body={"status": {"nominatedNodeName": f"kwok-node-{i}"}},
                content_type=STRATEGIC_MERGE_PATCH,
            )
        await conn.request(
            "POST",
            f"/api/v1/namespaces/{ns}/pods/p/binding",
            body={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                  "target": {"apiVersion": "v1", "kind": "Node", "name": "kwok-node-1"}},
        )  # fmt: skip
        await conn.request("DELETE", f"/api/v1/namespaces/{ns}/pods/p")
        assert pool.opened == 1
        assert pool.idle_connections == 1
