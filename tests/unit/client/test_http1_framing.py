"""The write client against hostile or broken peers: every answer of the corpus ends in a
clear error within the request's limit, never a hang or a loop, and the pool stays
usable after it. The peer is a local server playing raw bytes (tests/unit/helpers/scripted_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from scheduler.client.errors import ConnectionFailed, Timeout, TransportError
from scheduler.client.http1 import MAX_BODY, MAX_HEAD, Http1Pool
from tests.unit.helpers.scripted_server import ScriptedServer, Step, ok

HEAD = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n"
LIMIT = 3.0
SLACK = 2.0  # a loaded machine's scheduling delay; the limit itself is the bound

CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(size: bytes, data: bytes = b"") -> bytes:
    return CHUNKED + size + b"\r\n" + data + b"\r\n0\r\n\r\n"


# (answer steps, the error class, a word its message must hold)
CORPUS: dict[str, tuple[list[Step], type[TransportError], str]] = {
    # chunk sizes: hex digits only, no sign, no prefix, no separator, no overflow
    "chunk size -6": ([chunk(b"-6", b"abcdef")], ConnectionFailed, "chunk size"),
    "chunk size +2": ([chunk(b"+2", b"ab")], ConnectionFailed, "chunk size"),
    "chunk size 0x10": ([chunk(b"0x10", b"0123456789abcdef")], ConnectionFailed, "chunk size"),
    "chunk size 1_0": ([chunk(b"1_0", b"0123456789abcdef")], ConnectionFailed, "chunk size"),
    "chunk size with a space": ([chunk(b"2 ", b"ab")], ConnectionFailed, "chunk size"),
    "chunk size not hex": ([chunk(b"zz", b"ab")], ConnectionFailed, "chunk size"),
    "chunk size overflowing": (
        [CHUNKED + b"ffffffffffffffffffffffff\r\nab", "hang"], ConnectionFailed, "overflow"
    ),
    # (llhttp does not tell a chunk's size: the cap counts the data as it comes)
    "chunk size larger than the body cap": (
        [CHUNKED + b"%x\r\n" % (MAX_BODY + 1)] + [b"x" * (1 << 20)] * 9 + ["hang"],
        ConnectionFailed, "larger than",
    ),
    "chunk data not followed by CRLF": (
        [CHUNKED + b"2\r\nabXX0\r\n\r\n"], ConnectionFailed, "after chunk data"
    ),
    # Content-Length: digits only, once
    "duplicate equal Content-Length": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"], ConnectionFailed, "Duplicate"
    ),
    "conflicting Content-Length": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"], ConnectionFailed, "Duplicate"
    ),
    "Content-Length list": ([b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"], ConnectionFailed, "Content-Length"),
    "Content-Length +2": ([b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"], ConnectionFailed, "Content-Length"),
    "Content-Length -1": ([b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok"], ConnectionFailed, "Content-Length"),
    "Content-Length 1_0": ([b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\nok"], ConnectionFailed, "Content-Length"),
    "Content-Length overflowing": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nok"], ConnectionFailed, "overflow"
    ),
    "Content-Length beyond the body cap": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nok" % (MAX_BODY + 1), "hang"], ConnectionFailed, "larger than"
    ),
    # Transfer-Encoding: exactly chunked, never beside Content-Length
    "Content-Length with Transfer-Encoding": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
        ConnectionFailed, "Transfer-Encoding",
    ),
    "Transfer-Encoding xchunked": (
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "hang"],
        ConnectionFailed, "Transfer-Encoding",
    ),
    "Transfer-Encoding chunked, gzip": (
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n2\r\nok\r\n0\r\n\r\n", "hang"],
        ConnectionFailed, "Transfer-Encoding",
    ),
    "Transfer-Encoding gzip, chunked": (
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
        ConnectionFailed, "Transfer-Encoding",
    ),
    # the head
    "folded header (space)": (
        [b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok"], ConnectionFailed, "whitespace"
    ),
    "folded header (tab)": (
        [b"HTTP/1.1 200 OK\r\nX-A: a\r\n\tb\r\nContent-Length: 2\r\n\r\nok"], ConnectionFailed, "whitespace"
    ),
    "space before the colon": (
        [b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok"], ConnectionFailed, "header"
    ),
    "bare LF line ends": ([b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"], ConnectionFailed, "CR"),
    "NUL in a header value": (
        [b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok"], ConnectionFailed, "header"
    ),
    "oversized head in one write": (
        [b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (MAX_HEAD + 10) + b"\r\nContent-Length: 2\r\n\r\nok"],
        ConnectionFailed, "head larger",
    ),
    "endless head, dribbled": (
        [b"HTTP/1.1 200 OK\r\n"] + [b"X-Filler: " + b"a" * 1000 + b"\r\n"] * (MAX_HEAD // 1000 + 5) + ["hang"],
        ConnectionFailed, "head larger",
    ),
    "status line of HTTP/2.0": ([b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok"], ConnectionFailed, "HTTP/2.0"),
    "not HTTP at all": ([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"], ConnectionFailed, "HTTP/"),
    "two-digit status": ([b"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\nok"], ConnectionFailed, "status"),
    "protocol upgrade": (
        [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n", "hang"],
        ConnectionFailed, "upgrade",
    ),
    # bodies
    "body beyond the cap, until close": (
        [b"HTTP/1.1 200 OK\r\n\r\n"] + [b"x" * (1 << 20)] * 9 + ["hang"], ConnectionFailed, "larger than"
    ),
    "chunked body beyond the cap": (
        [CHUNKED] + [b"100000\r\n" + b"x" * 0x100000 + b"\r\n"] * 9 + ["hang"], ConnectionFailed, "larger than"
    ),
    "early close mid-body": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "close"], ConnectionFailed, "before the whole answer"
    ),
    "early close mid-chunk": (
        [CHUNKED + b"a\r\nabc", "close"], ConnectionFailed, "before the whole answer"
    ),
    "early close mid-head": ([b"HTTP/1.1 200 OK\r\nContent-Le", "close"], ConnectionFailed, "before the whole answer"),
    "close without an answer": (["close"], ConnectionFailed, "before the whole answer"),
    # stalls: the request's limit ends them
    "no answer at all": (["hang"], Timeout, "in time"),
    "stalled mid-body": ([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "hang"], Timeout, "in time"),
    "stalled mid-head": ([b"HTTP/1.1 200 OK\r\nContent-", "hang"], Timeout, "in time"),
    "endless 1xx answers": (
        [b"HTTP/1.1 102 Processing\r\n\r\n", 0.05] * 200 + ["hang"], Timeout, "in time"
    ),
}


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    s = await ScriptedServer().start()
    yield s
    await s.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(CORPUS))
async def test_a_broken_answer_is_a_clear_error_within_the_limit(
    server: ScriptedServer, case: str
) -> None:
    steps, error, words = CORPUS[case]
    server.answers = [steps, [ok(b'{"fine":1}')]]
    pool = Http1Pool("127.0.0.1", server.port, ssl_context=None, max_connections=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(error) as info:
        await pool.request(HEAD, b"{}", limit=LIMIT)
    elapsed = loop.time() - started
    assert elapsed < LIMIT + SLACK
    assert words.lower() in str(info.value).lower()
    assert info.value.sent  # the request went out: its outcome is unknown
    # the broken connection is gone and its slot free: the next request gets a new one
    assert pool.busy_connections == 0 and pool.idle_connections == 0
    answer = await pool.request(HEAD, b"{}", limit=LIMIT)
    assert answer.body == b'{"fine":1}'
    assert server.connections == 2
    pool.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        CHUNKED + b"1\r\no\r\n1;ext=1\r\nk\r\n0\r\nX-Trailer: 1\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    ],
    ids=["content-length", "chunks, extension, trailer", "1xx first", "chunked in capitals"],
)
async def test_well_formed_answers_are_read_and_the_connection_kept(
    server: ScriptedServer, answer: bytes
) -> None:
    server.answers = [[answer], [ok(b"again")]]
    pool = Http1Pool("127.0.0.1", server.port, ssl_context=None)
    first = await pool.request(HEAD, b"{}", limit=LIMIT)
    assert (first.status, first.body) == (200, b"ok")
    assert (await pool.request(HEAD, b"{}", limit=LIMIT)).body == b"again"
    assert server.connections == 1
    pool.close()


async def test_bytes_after_a_whole_answer_drop_the_connection(server: ScriptedServer) -> None:
    server.answers = [[ok(b"one") + b"HTTP/1.1 200 OK\r\n"], [ok(b"two")]]
    pool = Http1Pool("127.0.0.1", server.port, ssl_context=None)
    assert (await pool.request(HEAD, b"{}", limit=LIMIT)).body == b"one"
    assert (await pool.request(HEAD, b"{}", limit=LIMIT)).body == b"two"
    assert server.connections == 2  # the out-of-step connection was not reused
    pool.close()


async def test_an_answer_of_exactly_the_body_cap_is_read(server: ScriptedServer) -> None:
    body = b"x" * MAX_BODY
    server.answers = [[ok(body, "200 OK")]]
    pool = Http1Pool("127.0.0.1", server.port, ssl_context=None)
    assert len((await pool.request(HEAD, b"{}", limit=30)).body) == MAX_BODY
    pool.close()
