"""The health and metrics HTTP server: /metrics, /healthz, /livez, /readyz.

As kube-scheduler's (k8s.io/apiserver healthz): each endpoint runs its named checks;
200 "ok" when all pass, else 500 with one line per check ("[+]name ok" /
"[-]name failed: reason") and "<endpoint> check failed". `?verbose` lists every check
even on success.

- /healthz and /livez: the health checks (e.g. "leaderElection": a stuck elector loop).
- /readyz: the health checks, the readiness checks (e.g. "sched-handler-sync": "waiting
  for handlers to sync" until the informers have synced) and "shutdown", which fails
  once `begin_shutdown()` was called, so load balancers stop sending traffic first.
- /metrics: prometheus_client exposition of the given CollectorRegistry.

A check is a callable returning None when healthy, or the reason text when not. It must
be quick and must not do I/O: it reads state kept by its owner.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

__all__ = ["Check", "Handler", "HealthServer"]

log = logging.getLogger(__name__)

Check = Callable[[], str | None]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HealthServer:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        host: str = "0.0.0.0",
        port: int = 10251,
    ) -> None:
        self.registry = registry if registry is not None else REGISTRY
        self.host = host
        self._requested_port = port
        self._health: dict[str, Check] = {"ping": lambda: None}
        self._ready: dict[str, Check] = {}
        self._shutting_down = False
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._routes: list[tuple[str, Handler]] = []

    # ---- checks --------------------------------------------------------------------
    def add_health_check(self, name: str, check: Check) -> None:
        """Counted by /healthz, /livez and /readyz."""
        self._add(self._health, name, check)

    def add_readiness_check(self, name: str, check: Check) -> None:
        """Counted by /readyz only."""
        self._add(self._ready, name, check)

    def _add(self, table: dict[str, Check], name: str, check: Check) -> None:
        if name in self._health or name in self._ready or name == "shutdown":
            raise ValueError(f"a check named {name!r} is already registered")
        table[name] = check

    def add_get(self, path: str, handler: Handler) -> None:
        """An extra read-only endpoint (explain); before start()."""
        if self._runner is not None:
            raise RuntimeError("routes must be added before start()")
        self._routes.append((path, handler))

    def begin_shutdown(self) -> None:
        """From now on /readyz fails with "shutdown"."""
        self._shutting_down = True

    def _shutdown_check(self) -> str | None:
        return "process is shutting down" if self._shutting_down else None

    # ---- lifecycle -----------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (useful with port 0). Only valid after start()."""
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("server already started")
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._endpoint("healthz", self._health_checks))
        app.router.add_get("/livez", self._endpoint("livez", self._health_checks))
        app.router.add_get("/readyz", self._endpoint("readyz", self._ready_checks))
        for path, handler in self._routes:
            app.router.add_get(path, handler)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._requested_port)
        await site.start()
        self._runner = runner
        addresses = runner.addresses
        self._port = int(addresses[0][1]) if addresses else self._requested_port
        log.info("health server listening address=%s:%d", self.host, self._port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._port = None

    # ---- handlers ------------------------------------------------------------------
    def _health_checks(self) -> list[tuple[str, Check]]:
        return list(self._health.items())

    def _ready_checks(self) -> list[tuple[str, Check]]:
        return [*self._health.items(), *self._ready.items(), ("shutdown", self._shutdown_check)]

    def _endpoint(
        self, endpoint: str, checks: Callable[[], list[tuple[str, Check]]]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            lines: list[str] = []
            failed = False
            for name, check in checks():
                try:
                    problem = check()
                except Exception as exc:  # a broken check is a failing check
                    problem = f"check raised {exc!r}"
                if problem is None:
                    lines.append(f"[+]{name} ok")
                else:
                    failed = True
                    lines.append(f"[-]{name} failed: {problem}")
            if failed:
                body = "\n".join([*lines, f"{endpoint} check failed"]) + "\n"
                return web.Response(status=500, text=body)
            if "verbose" in request.query:
                return web.Response(text="\n".join([*lines, f"{endpoint} check passed"]) + "\n")
            return web.Response(text="ok")

        return handle

    async def _metrics(self, request: web.Request) -> web.Response:
        payload = generate_latest(self.registry)
        return web.Response(body=payload, headers={"Content-Type": CONTENT_TYPE_LATEST})
