"""The write client's framing under generated answers: whatever bytes arrive, in whatever
pieces, feeding them returns (no loop), and the request ends with an answer or a
ConnectionFailed, or is still waiting for more bytes, which the request's timer then
ends. (The hand-written framing this replaced looped forever on a chunk size of "-6".)"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.client.errors import ConnectionFailed
from scheduler.client.http1 import Http1Response, _Http1Connection

VALID = [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    b"HTTP/1.1 409 Conflict\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\n{}",
]


class FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def split(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """`data` in the pieces a socket might deliver it in."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=5)))
    return [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)])]


@st.composite
def answers(draw: st.DrawFn) -> list[bytes]:
    """A valid answer with a few bytes replaced, inserted or cut, split anywhere."""
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data)))
        what = draw(st.sampled_from(["replace", "insert", "cut"]))
        piece = draw(st.binary(min_size=1, max_size=6) | st.sampled_from(
            [b"-", b"+", b"0x", b"_", b" ", b"\r\n", b"\n", b"\t", b",", b"ffffffffffffffffff"]
        ))  # fmt: skip
        if what == "replace":
            data[at : at + len(piece)] = piece
        elif what == "insert":
            data[at:at] = piece
        else:
            del data[at : at + len(piece)]
    return split(draw, bytes(data))


@st.composite
def chunk_sizes(draw: st.DrawFn) -> list[bytes]:
    """A chunked answer whose chunk-size line is drawn from the characters a lenient
    parser might accept (sign, prefix, separator, space, extension), split anywhere."""
    size = draw(
        st.from_regex(r"[-+ ]?(0x)?[0-9a-fA-F_]{1,18}[ \t]?(;[a-z]=[0-9])?", fullmatch=True)
        | st.text(alphabet="0123456789abcdefABCDEF-+x_ ;=\t", min_size=1, max_size=20)
    )
    data = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + size.encode() + b"\r\n" + b"x" * draw(st.integers(0, 40)) + b"\r\n0\r\n\r\n"
    )  # fmt: skip
    return split(draw, data)


def chunked(size: bytes) -> list[bytes]:
    return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\nabcdef\r\n0\r\n\r\n"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=answers() | chunk_sizes())
@example(pieces=chunked(b"-6"))  # issue 21: looped forever in the hand-written framing
@example(pieces=chunked(b"+6"))
@example(pieces=chunked(b"0x6"))
def test_any_answer_ends_or_waits_and_feeding_it_never_loops(pieces: list[bytes]) -> None:
    async def run() -> None:
        conn = _Http1Connection()
        conn.connection_made(FakeTransport())  # type: ignore[arg-type]
        waiter = conn.send(b"POST / HTTP/1.1\r\n\r\n")
        for piece in pieces:
            if waiter.done():
                break
            conn.data_received(piece)  # returns: llhttp never loops on its input
        if waiter.done():
            exc = waiter.exception()
            if exc is None:
                assert isinstance(waiter.result(), Http1Response)
            else:
                assert isinstance(exc, ConnectionFailed)
                assert conn.closed  # a broken connection is never reused
        else:
            # a valid prefix: the end of the stream settles it one way or the other
            conn.connection_lost(None)
            assert waiter.done()
            assert waiter.exception() is None or isinstance(waiter.exception(), ConnectionFailed)

    asyncio.run(run())
