"""scheduler.client.http1: HTTP/1.1 framing, keep-alive reuse and failures, against a
local TCP server that answers with scripted bytes (the real API server is exercised by
tests/integration/test_client_connection.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from scheduler.client.errors import ConnectionFailed, Timeout
from scheduler.client.http1 import Http1Pool

HEAD = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n"

Answer = list[bytes] | None  # pieces written with a pause between; None: never answer


@dataclass
class Server:
    """Reads one request head + body per answer, writes the next scripted answer."""

    answers: list[tuple[Answer, bool]] = field(default_factory=list)  # (pieces, close after)
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0
    received: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                self.received.set()
                pieces, close = self.answers.pop(0)
                if pieces is None:
                    await asyncio.sleep(3600)
                    return
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    srv = await asyncio.start_server(s.handle, "127.0.0.1", 0)
    s.port = srv.sockets[0].getsockname()[1]
    yield s
    srv.close()


def pool_for(s: Server) -> Http1Pool:
    return Http1Pool("127.0.0.1", s.port, ssl_context=None)


async def test_content_length_answers_reuse_one_connection(server: Server) -> None:
    ok = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n"
    server.answers = [([ok + b'{"a":1}'], False), ([ok, b'{"b"', b":2}"], False)]
    pool = pool_for(server)
    first = await pool.request(HEAD, b"{}", limit=5)
    second = await pool.request(HEAD, b"{}", limit=5)
    assert (first.status, first.reason, first.body) == (201, "Created", b'{"a":1}')
    assert second.body == b'{"b":2}'
    assert first.headers["Content-Type"] == "application/json"
    assert server.connections == 1
    assert server.requests == [HEAD + b"{}", HEAD + b"{}"]
    pool.close()


async def test_a_chunked_answer_split_anywhere_is_joined(server: Server) -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n"
        b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
    )
    pieces = [raw[i : i + 7] for i in range(0, len(raw), 7)]
    server.answers = [(pieces, False), ([raw], False)]
    pool = pool_for(server)
    first = await pool.request(HEAD, b"{}", limit=5)
    second = await pool.request(HEAD, b"{}", limit=5)
    assert first.body == second.body == b"hello world"
    assert first.headers["Retry-After"] == "3"
    assert server.connections == 1
    pool.close()


async def test_informational_answers_are_skipped(server: Server) -> None:
    server.answers = [
        (
            [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno"],
            False,
        )
    ]
    pool = pool_for(server)
    answer = await pool.request(HEAD, b"{}", limit=5)
    assert (answer.status, answer.body) == (404, b"no")
    pool.close()


async def test_an_answer_without_length_ends_with_its_connection(server: Server) -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    server.answers = [([b"HTTP/1.1 200 OK\r\n\r\nuntil ", b"close"], True), ([ok], False)]
    pool = pool_for(server)
    first = await pool.request(HEAD, b"{}", limit=5)
    second = await pool.request(HEAD, b"{}", limit=5)
    assert first.body == b"until close"
    assert second.body == b"ok"
    assert server.connections == 2  # the first connection was not reused
    pool.close()


async def test_connection_close_is_honoured(server: Server) -> None:
    answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    server.answers = [([answer], True), ([answer], True)]
    pool = pool_for(server)
    await pool.request(HEAD, b"{}", limit=5)
    await pool.request(HEAD, b"{}", limit=5)
    assert server.connections == 2
    pool.close()


async def test_a_body_cut_short_is_a_connection_failure(server: Server) -> None:
    server.answers = [([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], True)]
    pool = pool_for(server)
    with pytest.raises(ConnectionFailed, match="before the whole answer"):
        await pool.request(HEAD, b"{}", limit=5)
    pool.close()


async def test_garbage_is_a_connection_failure(server: Server) -> None:
    server.answers = [([b"SSH-2.0-OpenSSH\r\n\r\n"], False)]
    pool = pool_for(server)
    with pytest.raises(ConnectionFailed, match="unreadable HTTP answer"):
        await pool.request(HEAD, b"{}", limit=5)
    pool.close()


async def test_no_answer_in_time_is_a_timeout_and_the_connection_is_dropped(
    server: Server,
) -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    server.answers = [(None, False), ([ok], False)]
    pool = pool_for(server)
    with pytest.raises(Timeout):
        await pool.request(HEAD, b"{}", limit=0.2)
    assert (await pool.request(HEAD, b"{}", limit=5)).body == b"ok"
    assert server.connections == 2
    pool.close()


async def test_a_cancelled_request_drops_its_connection(server: Server) -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    server.answers = [(None, False), ([ok], False)]
    pool = pool_for(server)
    task = asyncio.create_task(pool.request(HEAD, b"{}", limit=None))
    await server.received.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await pool.request(HEAD, b"{}", limit=5)).body == b"ok"
    assert server.connections == 2
    pool.close()


async def test_a_refusing_last_check_sends_nothing(server: Server) -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    server.answers = [([ok], False)]
    pool = pool_for(server)

    def refuse() -> None:
        raise RuntimeError("lease lost")

    check: Callable[[], None] = refuse
    with pytest.raises(RuntimeError, match="lease lost"):
        await pool.request(HEAD, b"NO", limit=5, last_check=check)
    # the connection it held is still good for the next request, the first one it sends
    assert (await pool.request(HEAD, b"{}", limit=5)).body == b"ok"
    assert server.requests == [HEAD + b"{}"]
    assert server.connections == 1
    pool.close()


async def test_a_refused_connection_is_a_connection_failure(server: Server) -> None:
    pool = Http1Pool("127.0.0.1", 1, ssl_context=None)
    with pytest.raises(ConnectionFailed):
        await pool.request(HEAD, b"{}", limit=5)
