"""The write client's pool: at most max_connections, idle connections expire, and a
connection the peer closed (or wrote to) while idle is not reused."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest

from scheduler.client.errors import ConnectionFailed, Timeout
from scheduler.client.http1 import Http1Pool
from tests.unit.helpers.scripted_server import ScriptedServer, ok

HEAD = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n"


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    s = await ScriptedServer().start()
    yield s
    await s.stop()


async def test_max_connections_is_honoured_under_concurrency(server: ScriptedServer) -> None:
    server.answers = [[0.05, ok(b"%d" % i)] for i in range(30)]
    pool = Http1Pool("127.0.0.1", server.port, ssl_context=None, max_connections=3)
    busy_seen: list[int] = []

    async def one() -> bytes:
        answer = await pool.request(HEAD, b"{}", limit=30)
        busy_seen.append(pool.busy_connections)
        return answer.body

    bodies = await asyncio.gather(*(one() for _ in range(30)))
    assert sorted(bodies) == sorted(b"%d" % i for i in range(30))
    assert server.peak_open == 3  # 30 requests at once, never more than 3 connections
    assert server.connections == 3
    assert max(busy_seen) <= 3
    assert pool.busy_connections == 0 and pool.idle_connections == 3
    pool.close()


async def test_a_request_that_gets_no_free_connection_in_time_was_not_sent(
    server: ScriptedServer,
) -> None:
    server.answers = [["hang"]]
    pool = Http1Pool("127.0.0.1", server.port, ssl_context=None, max_connections=1)
    holder = asyncio.create_task(pool.request(HEAD, b"{}", limit=None))
    await server.got_request.wait()
    with pytest.raises(Timeout, match="no free connection") as info:
        await pool.request(HEAD, b"{}", limit=0.3)
    assert info.value.sent is False
    assert len(server.requests) == 1
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    assert pool.busy_connections == 0  # the cancelled request gave its slot back
    pool.close()


async def test_an_idle_connection_past_its_expiry_is_closed_not_reused(
    server: ScriptedServer,
) -> None:
    server.answers = [[ok(b"1")], [ok(b"2")]]
    pool = Http1Pool("127.0.0.1", server.port, ssl_context=None, idle_timeout=0.2)
    await pool.request(HEAD, b"{}", limit=5)
    assert pool.idle_connections == 1
    deadline = asyncio.get_running_loop().time() + 10
    while server.closed_by_peer == 0:  # we close it at expiry; the server sees the EOF
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    assert pool.idle_connections == 0
    assert (await pool.request(HEAD, b"{}", limit=5)).body == b"2"
    assert server.connections == 2
    pool.close()


async def test_a_connection_the_server_closed_while_idle_is_not_reused(
    server: ScriptedServer,
) -> None:
    # an answer that keeps the connection alive, then the server hangs up anyway (its
    # own idle timeout): the next request must go on a new connection, with no error
    server.answers = [[ok(b"1"), "close"], [ok(b"2")]]
    pool = Http1Pool("127.0.0.1", server.port, ssl_context=None)
    await pool.request(HEAD, b"{}", limit=5)
    await server.handler_done.wait()
    assert (await pool.request(HEAD, b"{}", limit=5)).body == b"2"
    assert server.connections == 2
    assert len(server.requests) == 2
    pool.close()


@pytest.mark.parametrize("peer_does", ["close", "write"])
async def test_the_liveness_check_sees_what_the_loop_has_not_delivered_yet(
    peer_does: str,
) -> None:
    """The peer closes (or writes stray bytes) while the connection is idle, and the
    check runs before the event loop has had a turn to deliver it: the socket itself is
    asked."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    pool = Http1Pool("127.0.0.1", port, ssl_context=None)
    try:
        conn = await pool.acquire(None)
        peer, _ = listener.accept()
        pool.release(conn)
        assert conn.alive()
        if peer_does == "close":
            peer.close()
        else:
            peer.sendall(b"HTTP/1.1 200 OK\r\n")
        time.sleep(0.1)  # noqa: ASYNC251 - blocking on purpose: the loop must not run now
        assert not conn.alive()
        assert not conn.closed  # the loop has not seen it: only the socket says so
        reused = await pool.acquire(None)  # the dead one is dropped, a new one made
        assert reused is not conn
        assert conn.closed
        pool.release(reused)
        if peer_does == "write":
            peer.close()
    finally:
        pool.close()
        listener.close()


def test_on_uvloop_too() -> None:
    """The scheduler runs on uvloop (scheduler/process.py), whose transports are its
    own: reuse, the socket check and a refused framing hold there as well."""
    uvloop = pytest.importorskip("uvloop")

    async def main() -> None:
        server = await ScriptedServer().start()
        server.answers = [[ok(b"1")], [ok(b"2")], [b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"]]
        pool = Http1Pool("127.0.0.1", server.port, ssl_context=None)
        try:
            assert (await pool.request(HEAD, b"{}", limit=5)).body == b"1"
            conn = pool._idle[-1]
            assert conn.alive()
            assert (await pool.request(HEAD, b"{}", limit=5)).body == b"2"
            assert server.connections == 1
            with pytest.raises(ConnectionFailed, match="Content-Length"):
                await pool.request(HEAD, b"{}", limit=5)
        finally:
            pool.close()
            await server.stop()

        listener = socket.create_server(("127.0.0.1", 0))
        pool = Http1Pool("127.0.0.1", listener.getsockname()[1], ssl_context=None)
        try:
            conn = await pool.acquire(None)
            peer, _ = listener.accept()
            pool.release(conn)
            assert conn.alive()
            peer.close()
            time.sleep(0.1)  # noqa: ASYNC251 - as above
            assert not conn.alive()
        finally:
            pool.close()
            listener.close()

    uvloop.run(main())
