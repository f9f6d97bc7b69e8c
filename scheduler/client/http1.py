"""A small HTTP/1.1 client for the scheduler's writes: keep-alive connections, one
request at a time on each, the answer framed by llhttp (httptools).

Why not aiohttp for these: in the arrival benchmark (one pod at a time, so a bind and a
Scheduled event per pod, nothing to amortise) aiohttp's request machinery (URL objects,
multidicts, the request/response classes, trace signals, its timer context, the stream
reader) was the largest single cost per pod after the scheduling cycle itself. A write
here is one prebuilt header block, one `transport.write`, and one future that the
Protocol resolves when the whole answer is in: about a third of the CPU (docs/
performance.md). Reads that stream or can be large (LIST, WATCH) stay on aiohttp.

Framing is llhttp's (the parser of Node.js, through httptools), strict as it is by
default and as RFC 9112 asks: a Content-Length of digits only, given once; no
Content-Length beside Transfer-Encoding; chunk sizes of hex digits only, with overflow
refused; no obsolete line folding; CRLF line ends. On top of it: only HTTP/1.0 and 1.1
answers, a Transfer-Encoding of exactly "chunked" (we ask for no other coding: "xchunked"
or "chunked, gzip" would otherwise be read until the close as an opaque body), a head
of at most MAX_HEAD bytes and a body of at most MAX_BODY. 1xx answers are skipped; an
answer with neither length nor chunking ends with the connection. Every failure is a
clear `ConnectionFailed` at once, and the request's own limit (one deadline for the
free connection, the connect and the whole answer) ends any wait with `Timeout`: a
peer can neither loop nor stall the client.

The pool (`Http1Pool`) holds at most `max_connections` connections (busy and idle),
closes a connection idle for `idle_timeout` seconds, and checks an idle connection before
it reuses it: closed, closing, half-closed or with unread bytes (an answer nobody asked
for, the peer's FIN or TLS close_notify not yet seen by the event loop) means it is
discarded, not written to.

Failures are the client error tree's: `ConnectionFailed` and `Timeout`, each with
`sent` saying whether any byte of the request may have reached the server (False only
when the failure came before the write: no free connection, connect refused or timed
out). The dispatcher retries a write only when nothing was sent (dispatcher.py).
"""

from __future__ import annotations

import asyncio
import collections
import select
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import httptools

from scheduler.client.errors import ConnectionFailed, Timeout

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "MAX_BODY",
    "MAX_HEAD",
    "Http1Pool",
    "Http1Response",
]

MAX_HEAD = 64 * 1024
"""Bytes of status line and headers. An API server's answer head is well under 2 KiB
(Audit-Id, Cache-Control, Content-Type, the two X-Kubernetes-Pf-* ids, Date, length, and
Warning headers the server itself caps at 4 KiB: apiserver pkg/warning); 64 KiB leaves
room and is h11's and aiohttp's order of magnitude (16 KiB, 8 KiB per line)."""

MAX_BODY = 8 * 1024 * 1024
"""Bytes of body. A write's answer is at most the object written, echoed: the API server
takes request bodies up to 3 MiB (apiserver pkg/server/config.go MaxRequestBodyBytes) and
etcd stores objects up to 1.5 MiB; JSON of such an object (base64 data, field names)
stays within 8 MiB."""

DEFAULT_IDLE_TIMEOUT = 90.0
"""Seconds an idle keep-alive connection is kept: Go's http.DefaultTransport
IdleConnTimeout (net/http/transport.go), which client-go keeps (apimachinery
pkg/util/net/http.go SetOldTransportDefaults)."""

_NO_LENGTH = (204, 304)  # answers that never have a body (RFC 9112 6.3)


@dataclass(frozen=True, slots=True)
class Http1Response:
    status: int
    reason: str
    headers: dict[str, str]  # names as the server sent them (Go canonicalises them)
    body: bytes


class _Http1Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request in flight. It is also the
    parser's callback object (httptools calls the on_* methods)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._poll: select.poll | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Http1Response] | None = None
        self._reset()

    def _reset(self) -> None:
        self._status = 0  # 0: the head of the answer is not complete yet
        self._reason = ""
        self._headers: dict[str, str] = {}
        self._length: str | None = None  # Content-Length as sent (llhttp checks it)
        self._coding: str | None = None  # Transfer-Encoding as sent
        self._unframed = 0  # bytes received while the head was incomplete
        self._field_bytes = 0
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._until_close = False
        self._keep_alive = True
        self._complete = False
        self._extra = False  # bytes past the answer: the connection is out of step

    # ---- asyncio.Protocol ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a socket transport (uvloop's do not subclass asyncio.Transport)
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and hasattr(select, "poll"):  # for alive(): asked before reuse
            self._poll = select.poll()
            self._poll.register(sock.fileno(), select.POLLIN | select.POLLPRI)

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.close()  # nothing asked for it: the connection is out of step
            return
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            if self._complete:
                self._extra = True  # the answer is whole; what follows it is not ours
            else:
                self._fail(ConnectionFailed(f"unreadable HTTP answer: {_why(exc)}"))
                return
        if self._complete:
            self._finish()
        elif not self._status:
            self._unframed += len(data)  # the head is not complete: all of it is head
            if self._unframed > MAX_HEAD:
                self._fail(ConnectionFailed(f"answer head larger than {MAX_HEAD} bytes"))

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost settles the request

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._status and self._until_close:
            self._keep_alive = False
            self._finish()
            return
        why = f": {exc}" if exc else ""
        waiter.set_exception(ConnectionFailed(f"connection closed before the whole answer{why}"))

    # ---- parser callbacks (httptools) -----------------------------------------------
    def on_message_begin(self) -> None:
        if self._complete:
            self._extra = True

    def on_status(self, reason: bytes) -> None:
        if not self._complete:
            self._reason = reason.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._status or self._complete:
            return  # trailer fields of a chunked body: nothing here reads them
        self._field_bytes += len(name) + len(value) + 4
        if self._field_bytes > MAX_HEAD:
            raise ValueError(f"answer head larger than {MAX_HEAD} bytes")
        key = name.decode("latin-1")
        text = value.decode("latin-1")
        previous = self._headers.get(key)
        # a repeated field is one comma-joined value (RFC 9110 5.3)
        joined = self._headers[key] = text if previous is None else f"{previous}, {text}"
        if len(name) in (14, 17):  # the two framing fields, by length first: cheap
            lowered = name.lower()
            if lowered == b"content-length":
                self._length = joined
            elif lowered == b"transfer-encoding":
                self._coding = joined

    def on_headers_complete(self) -> None:
        if self._complete:
            return
        parser = self._parser
        status = parser.get_status_code()
        if 100 <= status < 200:
            # informational: the real answer follows (llhttp ends this one as a message)
            self._headers = {}
            self._length = self._coding = None
            self._reason = ""
            return
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise ValueError(f"HTTP/{version} answer to an HTTP/1.1 request")
        coding = self._coding
        if coding is not None and coding.strip().lower() != "chunked":
            # we ask for no transfer coding but chunked (RFC 9112 7: only chunked is
            # understood here); llhttp would read another as an opaque body until close
            raise ValueError(f"Transfer-Encoding {coding[:80]!r} (only chunked)")
        length = self._length
        if length is not None and int(length) > MAX_BODY:  # llhttp checked its digits
            raise ValueError(f"Content-Length {length} larger than {MAX_BODY} bytes")
        self._status = status
        self._keep_alive = parser.should_keep_alive()
        self._until_close = coding is None and length is None and status not in _NO_LENGTH

    def on_body(self, data: bytes) -> None:
        self._body_bytes += len(data)
        if self._body_bytes > MAX_BODY:
            raise ValueError(f"answer body larger than {MAX_BODY} bytes")
        self._body.append(data)

    def on_message_complete(self) -> None:
        if self._status and not self._complete:
            self._complete = True

    # ---- the request side -----------------------------------------------------------
    def open(self) -> bool:
        transport = self.transport
        return not self.closed and transport is not None and not transport.is_closing()

    def alive(self) -> bool:
        """Safe to reuse after sitting idle? Open, and nothing readable on the socket:
        unread bytes or an end of stream the event loop has not delivered yet (a peer
        that closed the connection while it sat in the pool). Only for idle
        connections: right after a TLS handshake the server's session tickets may
        still be in the socket."""
        if not self.open():
            return False
        if self._poll is None:
            return True
        try:
            return not self._poll.poll(0)  # any event: readable, hung up or in error
        except OSError:
            return False

    def send(self, data: bytes) -> asyncio.Future[Http1Response]:
        assert self.transport is not None
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        self._reset()
        self.transport.write(data)
        return waiter

    def timed_out(self) -> None:
        self._fail(Timeout("no complete HTTP answer in time"))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        self.close()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def _finish(self) -> None:
        waiter = self._waiter
        self._waiter = None
        if self._extra or not self._keep_alive:
            self.close()
        if waiter is not None and not waiter.done():
            body = b"".join(self._body) if len(self._body) != 1 else self._body[0]
            waiter.set_result(Http1Response(self._status, self._reason, self._headers, body))


def _why(exc: Exception) -> str:
    """llhttp's reason, or the one a callback raised (httptools chains it)."""
    if isinstance(exc, httptools.HttpParserUpgrade):
        return "a protocol upgrade"
    cause = exc.__context__ if isinstance(exc, httptools.HttpParserCallbackError) else None
    return str(cause or exc)


class Http1Pool:
    """Keep-alive connections to one server. `ssl_context` None means plain TCP.

    At most `max_connections` connections at once, busy or idle (aiohttp's connector
    limit, which the Connection sets from its max_connections); a request waits for a
    free one within its own limit. An idle connection is closed after `idle_timeout`
    seconds, and checked before reuse (`_Http1Connection.alive`)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        max_connections: int = 100,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if idle_timeout <= 0:
            raise ValueError("idle_timeout must be positive")
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: collections.deque[_Http1Connection] = collections.deque()
        self._sweeper: asyncio.TimerHandle | None = None
        self._busy = 0
        self.opened = 0  # connections made so far (reuse keeps this low)
        self._closed = False

    @property
    def busy_connections(self) -> int:
        """Connections a request holds (at most max_connections; the idle ones are
        only ever taken by a request that holds a slot, so busy + idle never exceeds
        it either)."""
        return self._busy

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    async def _connect(self) -> _Http1Connection:
        loop = asyncio.get_running_loop()
        hostname = self._server_hostname if self._ssl is not None else None
        try:
            _, protocol = await loop.create_connection(
                _Http1Connection, self._host, self._port, ssl=self._ssl, server_hostname=hostname
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionFailed(str(exc) or type(exc).__name__, sent=False) from exc
        return protocol

    async def acquire(self, deadline: float | None) -> _Http1Connection:
        """A live idle connection or a new one, by `deadline` (loop time; None: no
        limit). Raises ConnectionFailed / Timeout with sent=False. Hand it back with
        `release` (or `discard`)."""
        if self._closed:
            raise ConnectionFailed("the connection pool is closed", sent=False)
        loop = asyncio.get_running_loop()
        try:
            if self._slots.locked():  # all busy: wait, within the request's limit
                async with asyncio.timeout_at(deadline):
                    await self._slots.acquire()
            else:
                await self._slots.acquire()  # returns at once
        except TimeoutError as exc:
            raise Timeout(
                f"no free connection to {self._host}:{self._port} in time"
                f" ({self.max_connections} busy)",
                sent=False,
            ) from exc
        try:
            while self._idle:
                conn = self._idle.pop()  # the most recently used: the likeliest alive
                if conn.alive() and loop.time() - conn.idle_since < self.idle_timeout:
                    self._busy += 1
                    return conn
                conn.close()
            try:
                async with asyncio.timeout_at(deadline):
                    conn = await self._connect()
            except TimeoutError as exc:
                raise Timeout(
                    f"no connection to {self._host}:{self._port} in time", sent=False
                ) from exc
            self._busy += 1
            self.opened += 1
            return conn
        except BaseException:
            self._slots.release()
            raise

    def release(self, conn: _Http1Connection) -> None:
        """Back to the idle list, or closed when it cannot be reused."""
        self._busy -= 1
        if conn.closed or self._closed:
            conn.close()
        else:
            loop = asyncio.get_running_loop()
            conn.idle_since = loop.time()
            self._idle.append(conn)
            if self._sweeper is None:
                self._sweeper = loop.call_later(self.idle_timeout, self._sweep)
        self._slots.release()

    def discard(self, conn: _Http1Connection) -> None:
        self._busy -= 1
        conn.close()
        self._slots.release()

    def _sweep(self) -> None:
        """Close the idle connections past idle_timeout (the oldest are on the left),
        and come back when the next one expires: one timer per pool, not one per
        request."""
        self._sweeper = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        idle = self._idle
        while idle and (idle[0].closed or now - idle[0].idle_since >= self.idle_timeout):
            idle.popleft().close()
        if idle and not self._closed:
            wait = idle[0].idle_since + self.idle_timeout - now
            self._sweeper = loop.call_later(wait, self._sweep)

    async def exchange(
        self, conn: _Http1Connection, data: bytes, deadline: float | None
    ) -> Http1Response:
        """Write `data` (a whole request) on a connection from `acquire` and wait for
        the whole answer until `deadline`; the connection goes back to the pool (or is
        closed) either way."""
        if not conn.open():
            # closed between acquire and now (the loop delivered the peer's close
            # meanwhile): nothing is written
            self.discard(conn)
            raise ConnectionFailed("connection closed before the request was sent", sent=False)
        loop = asyncio.get_running_loop()
        waiter = conn.send(data)
        timer = loop.call_at(deadline, conn.timed_out) if deadline is not None else None
        try:
            response = await waiter
        except BaseException:
            self.discard(conn)  # cancelled, timed out or failed: its answer may still come
            raise
        finally:
            if timer is not None:
                timer.cancel()
        self.release(conn)
        return response

    async def request(
        self,
        head: bytes,
        body: bytes | None,
        *,
        limit: float | None,
        last_check: Callable[[], object] | None = None,
    ) -> Http1Response:
        """Send `head` (request line and headers, ending in the blank line) and `body`;
        the whole answer, or ConnectionFailed / Timeout when it takes more than `limit`
        seconds (None: no limit) for a free connection, the connect and the answer
        together. `last_check` runs once the request holds its connection, right
        before its bytes are written; if it raises, nothing is sent."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit if limit else None
        conn = await self.acquire(deadline)
        if last_check is not None:
            try:
                last_check()
            except BaseException:
                self.release(conn)
                raise
        return await self.exchange(conn, head + body if body else head, deadline)

    def close(self) -> None:
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        while self._idle:
            self._idle.pop().close()
