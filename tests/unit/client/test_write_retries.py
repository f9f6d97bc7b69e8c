"""Which writes the dispatcher sends again, end to end through a real Connection and its
HTTP/1.1 client against a scripted local server (client-go's rule: retries.py), and the
lease's deadline on a fenced write."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from urllib.parse import parse_qs, urlsplit

import pytest

from scheduler.client.connection import Connection
from scheduler.client.dispatcher import Dispatcher, DispatcherSettings
from scheduler.client.errors import (
    ConnectionFailed,
    LeaseNotHeld,
    ServerError,
    Timeout,
    TooManyRequests,
)
from tests.unit.helpers.scripted_server import ScriptedServer, ok

STATUS_503 = (
    b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable",'
    b'"code":503}'
)


class Recorder:
    def __init__(self) -> None:
        self.delays: list[float] = []
        self.failed: list[tuple[str, str, str]] = []
        self.before_sleep: Callable[[], object] | None = None

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        if self.before_sleep is not None:
            result = self.before_sleep()
            if asyncio.iscoroutine(result):
                await result
        await asyncio.sleep(0)


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    s = await ScriptedServer().start()
    yield s
    await s.stop()


def dispatcher_for(port: int, rec: Recorder, limit: float = 5.0) -> Dispatcher:
    conn = Connection.from_token(f"http://127.0.0.1:{port}", token="t")
    assert conn.write_pool is not None  # the HTTP/1.1 path, not aiohttp
    return Dispatcher(
        conn,
        DispatcherSettings(qps=0, request_timeout=limit),
        on_failed=lambda *args: rec.failed.append(args),
        sleep=rec.sleep,
    )


def timeout_of(request: bytes) -> str:
    target = request.split(b" ", 2)[1].decode()
    return parse_qs(urlsplit(target).query)["timeout"][0]


@pytest.mark.timeout(60)
async def test_a_write_that_timed_out_after_it_was_sent_is_not_sent_again(
    server: ScriptedServer,
) -> None:
    rec = Recorder()
    d = dispatcher_for(server.port, rec, limit=0.5)
    server.answers = [["hang"], [ok()]]
    try:
        with pytest.raises(Timeout) as info:
            await d.bind("ns", "p", "u", "n1")
        assert info.value.sent
        assert len(server.requests) == 1
        assert rec.delays == []
        assert rec.failed == [("create", "pods/binding", "unknown_outcome")]
        assert timeout_of(server.requests[0]).endswith("ms")
    finally:
        await d.connection.close()


async def test_a_write_cut_off_mid_answer_is_not_sent_again(server: ScriptedServer) -> None:
    rec = Recorder()
    d = dispatcher_for(server.port, rec)
    server.answers = [[b"HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\n{", "close"], [ok()]]
    try:
        with pytest.raises(ConnectionFailed):
            await d.delete_pod("ns", "p", uid="u")
        assert len(server.requests) == 1
        assert rec.failed == [("delete", "pods", "unknown_outcome")]
    finally:
        await d.connection.close()


async def test_a_dry_run_delete_cut_off_mid_answer_is_sent_again(server: ScriptedServer) -> None:
    # it changes nothing on the server, so an unknown outcome costs nothing to repeat;
    # the request line and the body both say dryRun (the server reads the body's)
    rec = Recorder()
    d = dispatcher_for(server.port, rec)
    server.answers = [[b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{", "close"], [ok()]]
    try:
        await d.delete_pod("ns", "p", uid="u", dry_run=True)
        assert len(server.requests) == 2
        assert rec.failed == []
        for request in server.requests:
            target = request.split(b" ", 2)[1].decode()
            assert parse_qs(urlsplit(target).query)["dryRun"] == ["All"]
            assert b'"dryRun":["All"]' in request
            assert b'"preconditions":{"uid":"u"}' in request
    finally:
        await d.connection.close()


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n", "429"),
        (
            b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Type: application/json"
            b"\r\nContent-Length: %d\r\n\r\n%s" % (len(STATUS_503), STATUS_503),
            "503",
        ),
    ],
)
async def test_what_the_server_asked_to_retry_is_sent_again_after_its_retry_after(
    server: ScriptedServer, answer: bytes, code: str
) -> None:
    rec = Recorder()
    d = dispatcher_for(server.port, rec)
    server.answers = [[answer], [ok(b'{"kind":"Status","status":"Success"}')]]
    try:
        await d.bind("ns", "p", "u", "n1")
        assert len(server.requests) == 2
        assert rec.delays == [1.0 if code == "429" else 2.0]
        assert rec.failed == []
    finally:
        await d.connection.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: soon\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=["500", "503 with a Retry-After that is no number", "429 without Retry-After"],
)
async def test_a_server_error_without_retry_after_is_final(
    server: ScriptedServer, answer: bytes
) -> None:
    rec = Recorder()
    d = dispatcher_for(server.port, rec)
    server.answers = [[answer], [ok()]]
    try:
        with pytest.raises((ServerError, TooManyRequests)):
            await d.patch_pod_status("ns", "p", {"status": {}})
        assert len(server.requests) == 1
        assert rec.delays == []
    finally:
        await d.connection.close()


async def test_a_refused_connect_is_retried_it_sent_nothing() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # free, and nothing listens once closed
    rec = Recorder()
    d = dispatcher_for(port, rec)
    server = ScriptedServer(answers=[[ok()]])
    rec.before_sleep = lambda: server.start(port)  # the server comes up during the backoff
    try:
        await d.delete_pod("ns", "p")
        assert len(rec.delays) == 1
        assert len(server.requests) == 1
        assert rec.failed == []
    finally:
        await d.connection.close()
        await server.stop()


@pytest.mark.timeout(60)
async def test_a_fenced_write_ends_with_the_lease_and_tells_the_server(
    server: ScriptedServer,
) -> None:
    rec = Recorder()
    d = dispatcher_for(server.port, rec, limit=30.0)
    loop = asyncio.get_running_loop()
    held_until = d._clock.now() + 0.8
    d.lease_deadline = lambda: held_until
    server.answers = [["hang"]]
    try:
        started = loop.time()
        with pytest.raises(Timeout):
            await d.bind("ns", "p", "u", "n1")
        elapsed = loop.time() - started
        assert elapsed < 0.8 + 2.0  # the lease's end, not the 30 s request timeout
        sent_timeout = timeout_of(server.requests[0])
        assert sent_timeout.endswith("ms") and 0 < int(sent_timeout[:-2]) <= 800
        # an unfenced write keeps its own timeout
        server.answers = [[ok()]]
        await d.create_event({"metadata": {"namespace": "ns", "name": "e"}})
        assert 29000 <= int(timeout_of(server.requests[1])[:-2]) <= 30000
        # past the lease: the fenced write is not sent at all
        held_until = d._clock.now() - 0.1
        with pytest.raises(LeaseNotHeld):
            await d.bind("ns", "q", "u", "n1")
        assert len(server.requests) == 2
    finally:
        await d.connection.close()
