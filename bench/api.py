"""A small raw-JSON asyncio client for the benchmark harness and the ceiling binder.

It reads a kubeconfig (client certificate data or a bearer token, CA data), verifies TLS
against the cluster CA, and offers `request`, `watch` (raw event dicts) and an optional
client-side token bucket (qps/burst, as client-go's). It is deliberately separate from
`scheduler.client`, so the harness measures the scheduler and not itself."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        msg = body.get("message", body) if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {str(msg)[:300]}")
        self.status = status


class TokenBucket:
    """client-go's flowcontrol.NewTokenBucketRateLimiter: `burst` tokens, refilled at
    `qps` per second; qps <= 0 means no limit."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens < 1:
                wait = (1 - self._tokens) / self.qps
                await asyncio.sleep(wait)
                self._last = time.monotonic()
                self._tokens = 0.0
            else:
                self._tokens -= 1


def _kubeconfig(path: Path) -> tuple[str, bytes, dict[str, Any]]:
    cfg = yaml.safe_load(path.read_text())
    ctx_name = cfg.get("current-context")
    ctx = next(
        (c["context"] for c in cfg.get("contexts", []) if c["name"] == ctx_name),
        cfg["contexts"][0]["context"],
    )
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
    return cluster["server"], base64.b64decode(cluster["certificate-authority-data"]), user


class Api:
    def __init__(
        self,
        kubeconfig: Path | str,
        *,
        qps: float = 0.0,
        burst: int = 1,
        connections: int = 64,
        user_agent: str = "kas-bench",
        timeout: float = 30.0,
    ) -> None:
        self.server, ca, user = _kubeconfig(Path(kubeconfig))
        self._ctx = ssl.create_default_context(cadata=ca.decode())
        self._headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if "token" in user:
            self._headers["Authorization"] = f"Bearer {user['token']}"
        else:
            with tempfile.TemporaryDirectory() as d:
                cert, key = Path(d) / "c.crt", Path(d) / "c.key"
                cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
                key.write_bytes(base64.b64decode(user["client-key-data"]))
                self._ctx.load_cert_chain(str(cert), str(key))
        self._bucket = TokenBucket(qps, burst)
        self._connections = connections
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self.calls = 0

    async def __aenter__(self) -> Api:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ctx, limit=self._connections),
            headers=self._headers,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use Api as an async context manager"
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        ok: tuple[int, ...] = (),
    ) -> Any:
        await self._bucket.take()
        self.calls += 1
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else None
        async with self.session.request(
            method,
            self.server + path,
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=self._timeout),
        ) as resp:
            raw = await resp.read()
            try:
                out = json.loads(raw) if raw else None
            except ValueError:
                out = raw.decode(errors="replace")
            if resp.status >= 300 and resp.status not in ok:
                raise ApiError(method, path, resp.status, out)
            return out

    async def text(self, path: str) -> str:
        async with self.session.get(
            self.server + path, timeout=aiohttp.ClientTimeout(total=self._timeout)
        ) as resp:
            return (await resp.read()).decode(errors="replace")

    async def watch(
        self, path: str, resource_version: str, timeout_s: int = 600
    ) -> AsyncIterator[dict[str, Any]]:
        """Raw watch events, one dict per line; ends when the server closes the stream."""
        sep = "&" if "?" in path else "?"
        url = (
            f"{self.server}{path}{sep}watch=1&resourceVersion={resource_version}"
            f"&allowWatchBookmarks=true&timeoutSeconds={timeout_s}"
        )
        async with self.session.get(
            url, timeout=aiohttp.ClientTimeout(total=None, sock_read=timeout_s + 30)
        ) as resp:
            if resp.status != 200:
                raise ApiError("WATCH", path, resp.status, (await resp.read()).decode()[:300])
            buf = b""
            async for chunk in resp.content.iter_any():
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)


def binding(namespace: str, name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


RETRIED_STATUSES = (429, 500, 503, 504)
"""What an overloaded API server answers (shed load, a timeout behind it): worth a retry."""


async def retrying(call: Callable[[], Awaitable[Any]], attempts: int = 5) -> Any:
    """`call()` again, after a short growing pause, while it fails with what an overloaded
    API server answers or the connection fails, up to `attempts` tries; the harness's
    setup writes (nodes, init pods, PodGroups) must not end a run on a moment's load."""
    for attempt in range(attempts):
        try:
            return await call()
        except ApiError as exc:
            if exc.status not in RETRIED_STATUSES or attempt == attempts - 1:
                raise
        except (TimeoutError, OSError):
            if attempt == attempts - 1:
                raise
        await asyncio.sleep(0.2 * (attempt + 1))
    return None
