"""Which client a Connection's writes take: the HTTP/1.1 client (client/http1.py) with
the TLS context aiohttp's connector holds, unless a proxy is in the way."""

from __future__ import annotations

import pytest

from scheduler.client.connection import Connection


async def test_writes_take_the_http1_client_with_the_connectors_tls_context() -> None:
    conn = Connection.from_token("https://127.0.0.1:6443", token="t")
    try:
        pool = conn._writes
        assert pool is not None
        assert pool._ssl is conn._session.connector._ssl  # type: ignore[union-attr]
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
