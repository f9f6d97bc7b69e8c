"""A local HTTP/1.1 peer for the write client's tests: an asyncio server on 127.0.0.1 that
reads each request (head and Content-Length body) and plays the next scripted answer as
raw bytes, whatever they are: the framing corpus, stalls, early closes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

Step = bytes | float | str
"""bytes: written as they are; float: a pause of that many seconds; "close": close the
connection now; "hang": never answer (keep the connection open)."""


@dataclass
class ScriptedServer:
    answers: list[list[Step]] = field(default_factory=list)
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    peak_open: int = 0
    closed_by_peer: int = 0
    port: int = 0
    on_request: Callable[[bytes], Awaitable[None]] | None = None
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)
    handler_done: asyncio.Event = field(default_factory=asyncio.Event)
    got_request: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self, port: int = 0) -> ScriptedServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        self.open_now += 1
        self.peak_open = max(self.peak_open, self.open_now)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.closed_by_peer += 1
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                self.got_request.set()
                if self.on_request is not None:
                    await self.on_request(request)
                steps = self.answers.pop(0) if self.answers else ["hang"]
                for step in steps:
                    if step == "close":
                        return
                    if step == "hang":
                        await asyncio.sleep(3600)
                    elif isinstance(step, float):
                        await asyncio.sleep(step)
                    else:
                        assert isinstance(step, bytes)
                        writer.write(step)
                        await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.open_now -= 1
            writer.close()
            self._handlers.discard(task)
            self.handler_done.set()


def ok(body: bytes = b"{}", status: str = "201 Created", *extra: bytes) -> bytes:
    head = b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: application/json\r\n"
    head += b"".join(h + b"\r\n" for h in extra)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body
