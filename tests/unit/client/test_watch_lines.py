"""Connection.watch splits the stream into one event per line however the bytes arrive:
several events in one read, a line cut across reads, a last line without a newline."""

from __future__ import annotations

import asyncio

from scheduler.client.connection import Connection

EVENTS = [b'{"type":"ADDED","object":{"n":%d}}' % i for i in range(5)]


async def test_events_are_split_per_line_across_any_reads() -> None:
    body = b"\n".join(EVENTS[:4]) + b"\n\n" + EVENTS[4]  # a blank line, no final newline
    pieces = [body[:3], body[3:70], body[70:71], body[71:]]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = Connection.from_token(f"http://127.0.0.1:{port}", token="t")
    try:
        seen = [event async for event in conn.watch("/api/v1/pods")]
    finally:
        await conn.close()
        server.close()
    assert seen == [{"type": "ADDED", "object": {"n": i}} for i in range(5)]
