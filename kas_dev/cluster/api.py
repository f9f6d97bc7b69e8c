"""A tiny synchronous HTTPS client for the cluster manager's own few calls.

The manager runs before any event loop exists (and from the CLI), and makes a handful of
calls: readiness probes, creating nodes, listing them. It authenticates as the admin
client certificate and verifies the server against the cluster CA."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class AdminClient:
    def __init__(self, server: str, ca: Path, cert: Path, key: Path, timeout: float = 10.0) -> None:
        self.server = server.rstrip("/")
        self.timeout = timeout
        self._ctx = ssl.create_default_context(cafile=str(ca))
        self._ctx.load_cert_chain(str(cert), str(key))

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=self.timeout) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            status = exc.code
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def get_text(self, path: str) -> tuple[int, str]:
        req = urllib.request.Request(self.server + path)
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=self.timeout) as resp:
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")
