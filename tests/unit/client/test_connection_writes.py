"""Which client a Connection's writes take: the HTTP/1.1 client (client/http1.py) with
the connection's own TLS context (the one aiohttp's connector got too), unless a proxy is
in the way."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from kubernetes_asyncio import client as k8s_client

from kas_dev.cluster.pki import make_pki
from scheduler.client.connection import WRITES_IN_FLIGHT, Connection, tls_context


async def test_writes_take_the_http1_client_with_the_connections_tls_context() -> None:
    conn = Connection.from_token("https://127.0.0.1:6443", token="t")
    try:
        pool = conn.write_pool
        assert pool is not None
        assert isinstance(conn.ssl_context, ssl.SSLContext)
        assert conn.ssl_context.verify_mode == ssl.CERT_REQUIRED
        assert conn.ssl_context.check_hostname
        assert pool._ssl is conn.ssl_context
        # aiohttp's connector got the same context (read here only to prove it)
        assert conn._session.connector._ssl is conn.ssl_context  # type: ignore[union-attr]
        assert pool.max_connections == WRITES_IN_FLIGHT  # as many as the dispatcher sends
        assert (pool._host, pool._port) == ("127.0.0.1", 6443)
        assert conn._host_header == "127.0.0.1:6443"
        head = conn._write_head("application/json", "application/json")
        assert head.startswith(b"Host: 127.0.0.1:6443\r\nAccept: application/json\r\n")
        assert b"User-Agent: kube-async-scheduler\r\n" in head
    finally:
        await conn.close()


async def test_writes_stay_on_aiohttp_behind_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    conn = Connection.from_token("https://10.0.0.1:6443", token="t")
    try:
        assert conn._writes is None
        assert conn._options["proxy"] is not None
    finally:
        await conn.close()


async def test_the_pool_gets_the_connections_max_connections() -> None:
    conn = Connection.from_token("https://127.0.0.1:6443", token="t", max_connections=7)
    try:
        assert conn.write_pool is not None and conn.write_pool.max_connections == 7
        assert conn._session.connector.limit == 7  # type: ignore[union-attr]
    finally:
        await conn.close()


def test_the_tls_context_follows_the_loaded_configuration(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    configuration = k8s_client.Configuration(host="https://127.0.0.1:6443")
    configuration.ssl_ca_cert = str(pki.ca_cert)
    configuration.cert_file = str(pki.admin_cert)
    configuration.key_file = str(pki.admin_key)
    context = tls_context(configuration)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    # the cluster CA is the one trusted (the system's are not loaded beside a CA file;
    # the client certificate is proven against the API server by the integration tests,
    # whose kubeconfig authenticates with one)
    assert len(context.get_ca_certs()) == 1
    configuration.verify_ssl = False  # insecure-skip-tls-verify
    insecure = tls_context(configuration)
    assert insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname
