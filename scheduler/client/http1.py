"""A small HTTP/1.1 client for the scheduler's writes: keep-alive connections, one
request at a time on each, the answer read by an asyncio Protocol.

Why not aiohttp for these: in the arrival benchmark (one pod at a time, so a bind and a
Scheduled event per pod, nothing to amortise) aiohttp's request machinery (URL objects,
multidicts, the request/response classes, trace signals, its timer context, the stream
reader) was the largest single cost per pod after the scheduling cycle itself. A write
here is one prebuilt header block, one `transport.write`, and one future that the
Protocol resolves when the whole answer is in: about a third of the CPU (docs/
performance.md). Reads that stream or can be large (LIST, WATCH) stay on aiohttp.

Framing follows RFC 9112: a Content-Length body, a chunked body (Go's net/http chunks
any answer larger than its 2 KiB buffer), or, for neither, a body that ends with the
connection; 1xx answers are skipped, 204/304 have no body. A connection goes back to
the pool only after a complete answer that does not ask to close. A request that times
out or is cancelled closes its connection (its answer may still arrive).

Failures are the client error tree's: `ConnectionFailed` (refused, reset, closed before
the whole answer, an answer that is not HTTP/1.x) and `Timeout`. As with aiohttp, a
write on a pooled connection the server closed in the meantime fails with
ConnectionFailed, which the dispatcher retries.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from scheduler.client.errors import ConnectionFailed, Timeout

__all__ = ["Http1Pool", "Http1Response"]

_MAX_HEAD = 1 << 16  # bytes of status line + headers we accept
_UNTIL_CLOSE = -1
_CHUNKED = -2


@dataclass(frozen=True, slots=True)
class Http1Response:
    status: int
    reason: str
    headers: dict[str, str]  # names as the server sent them (Go canonicalises them)
    body: bytes


class _Http1Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buf = bytearray()
        self._waiter: asyncio.Future[Http1Response] | None = None
        self._reset()

    def _reset(self) -> None:
        self._status = 0  # 0: the head of the answer is not in yet
        self._reason = ""
        self._headers: dict[str, str] = {}
        self._length = 0  # bytes of body, or _CHUNKED / _UNTIL_CLOSE
        self._chunks: list[bytes] = []
        self._keep_alive = True

    # ---- asyncio.Protocol ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a socket transport (uvloop's do not subclass asyncio.Transport)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # nothing asked for it: the connection is out of step
            return
        self._buf += data
        try:
            self._advance()
        except ValueError as exc:
            self._fail(ConnectionFailed(f"unreadable HTTP answer: {exc}"))

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost settles the request

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._status and self._length == _UNTIL_CLOSE:
            body = bytes(self._buf)
            self._buf.clear()
            self._complete(body)
            return
        why = f": {exc}" if exc else ""
        waiter.set_exception(ConnectionFailed(f"connection closed before the whole answer{why}"))

    # ---- the request side -----------------------------------------------------------
    def send(self, data: bytes) -> asyncio.Future[Http1Response]:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        self._buf.clear()
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

    # ---- parsing ------------------------------------------------------------------
    def _advance(self) -> None:
        buf = self._buf
        while not self._status:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    raise ValueError("header block too large")
                return
            self._read_head(bytes(buf[:end]).decode("latin-1"))
            del buf[: end + 4]
        if self._length >= 0:
            if len(buf) >= self._length:
                body = bytes(buf[: self._length])
                del buf[: self._length]
                self._complete(body)
        elif self._length == _CHUNKED:
            self._read_chunks()

    def _read_head(self, head: str) -> None:
        lines = head.split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError(f"status line {lines[0][:80]!r}")
        code, _, reason = rest.partition(" ")
        status = int(code)
        if 100 <= status < 200:
            return  # informational: the real answer follows
        headers: dict[str, str] = {}
        lowered: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"header line {line[:80]!r}")
            name, value = name.strip(), value.strip()
            if name in headers:  # a repeated header is one comma-joined value
                value = f"{headers[name]}, {value}"
            headers[name] = value
            lowered[name.lower()] = value
        self._status, self._reason, self._headers = status, reason, headers
        connection = lowered.get("connection", "").lower()
        self._keep_alive = version == "HTTP/1.1" and "close" not in connection
        if status in (204, 304):
            self._length = 0
        elif "chunked" in lowered.get("transfer-encoding", "").lower():
            self._length = _CHUNKED
        elif "content-length" in lowered:
            self._length = int(lowered["content-length"])
            if self._length < 0:
                raise ValueError("negative Content-Length")
        else:
            self._length = _UNTIL_CLOSE
            self._keep_alive = False

    def _read_chunks(self) -> None:
        buf = self._buf
        while True:
            eol = buf.find(b"\r\n")
            if eol < 0:
                return
            size = int(bytes(buf[:eol]).split(b";", 1)[0].strip(), 16)
            if size == 0:
                # the last chunk, then trailer lines up to an empty line
                end = buf.find(b"\r\n\r\n", eol) if buf[eol + 2 : eol + 4] != b"\r\n" else eol
                if end < 0:
                    return
                del buf[: end + 4]
                self._complete(b"".join(self._chunks))
                return
            if len(buf) < eol + 2 + size + 2:
                return
            self._chunks.append(bytes(buf[eol + 2 : eol + 2 + size]))
            del buf[: eol + 2 + size + 2]

    def _complete(self, body: bytes) -> None:
        if self._buf:
            self._keep_alive = False  # bytes past the answer: out of step, never reuse
        waiter = self._waiter
        self._waiter = None
        if not self._keep_alive:
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result(Http1Response(self._status, self._reason, self._headers, body))


class Http1Pool:
    """Keep-alive connections to one server. `ssl_context` None means plain TCP."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        max_idle: int = 100,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self._max_idle = max_idle
        self._idle: list[_Http1Connection] = []
        self._closed = False

    async def _open(self, limit: float | None) -> _Http1Connection:
        loop = asyncio.get_running_loop()
        hostname = self._server_hostname if self._ssl is not None else None
        try:
            async with asyncio.timeout(limit):
                _, protocol = await loop.create_connection(
                    _Http1Connection,
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=hostname,
                )
        except TimeoutError as exc:
            raise Timeout(f"no connection to {self._host}:{self._port} in time") from exc
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionFailed(str(exc) or type(exc).__name__) from exc
        return protocol

    async def request(
        self,
        head: bytes,
        body: bytes | None,
        *,
        limit: float | None,
        last_check: Callable[[], None] | None = None,
    ) -> Http1Response:
        """Send `head` (request line and headers, ending in the blank line) and `body`;
        the whole answer, or ConnectionFailed / Timeout when it takes more than `limit`
        seconds (None: no limit). `last_check` runs once the
        request holds its connection, right before its bytes are written; if it raises,
        nothing is sent."""
        if self._closed:
            raise ConnectionFailed("the connection pool is closed")
        conn: _Http1Connection | None = None
        while self._idle:
            candidate = self._idle.pop()
            if not candidate.closed:
                conn = candidate
                break
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit if limit else None  # the limit covers the connect too
        if conn is None:
            conn = await self._open(limit)
        if last_check is not None:
            try:
                last_check()
            except BaseException:
                self._release(conn)
                raise
        waiter = conn.send(head + body if body else head)
        timer = loop.call_at(deadline, conn.timed_out) if deadline is not None else None
        try:
            response = await waiter
        except BaseException:
            conn.close()  # cancelled, timed out or failed: its answer may still come
            raise
        finally:
            if timer is not None:
                timer.cancel()
        self._release(conn)
        return response

    def _release(self, conn: _Http1Connection) -> None:
        if conn.closed or self._closed or len(self._idle) >= self._max_idle:
            conn.close()
        else:
            self._idle.append(conn)

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()
