"""The scheduler's one HTTPS port, served as kube-scheduler serves its 10259:
/metrics, /healthz, /livez, /readyz, the explain API (direct, and as an aggregated API),
behind delegated authentication and authorization (scheduler.serving).

Health (k8s.io/apiserver@v0.37.2 pkg/server/healthz/healthz.go): each endpoint runs its
named checks; 200 "ok" when all pass, else 500 with one line per check ("[+]name ok" /
"[-]name failed: reason withheld") and "<endpoint> check failed". The reason is withheld
from the body because the endpoints are open to anyone; it goes to the log instead.
`?verbose` lists every check even on success.

- /healthz and /livez: the health checks (e.g. "leaderElection": a stuck elector loop).
- /readyz: the health checks, the readiness checks (e.g. "sched-handler-sync") and
  "shutdown", which fails once `begin_shutdown()` was called.
- /metrics: prometheus_client exposition of the given CollectorRegistry; needs `get` on
  the non-resource URL /metrics.

Every request is authenticated (a client certificate, the front proxy's headers, a bearer
token) then authorized (system:masters, the always-allowed paths, else a
SubjectAccessReview); a caller without credentials is allowed only on the always-allowed
paths (401 elsewhere). A check is a callable returning None when healthy, or the reason
text when not; it must be quick and must not do I/O.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography import x509
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from scheduler.serving import status
from scheduler.serving.aggregated import EXPLAIN_API_PATH, discovery_routes, explain_attributes
from scheduler.serving.authn import AuthenticationFailed, Authenticator
from scheduler.serving.authn_config import AuthenticationConfig, ClientCA
from scheduler.serving.authn_source import keep_authentication_config
from scheduler.serving.authz import DEFAULT_ALWAYS_ALLOW_PATHS, Attributes, Authorizer
from scheduler.serving.certs import ServingCert, serving_cert
from scheduler.serving.identity import ANONYMOUS, UserInfo
from scheduler.serving.reviews import Post, ReviewBusy, Reviewer, ReviewError

__all__ = ["Check", "DelegationOptions", "Handler", "HealthServer", "ServingOptions"]

log = logging.getLogger(__name__)

Check = Callable[[], str | None]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER = web.RequestKey("kas_user", UserInfo)
DEFAULT_SECURE_PORT = 10259


@dataclass(frozen=True, slots=True)
class DelegationOptions:
    """Upstream's --authentication-token-webhook-cache-ttl and
    --authorization-webhook-cache-{authorized,unauthorized}-ttl (10 s each), and
    --client-ca-file: client certificates are checked against that bundle instead of the
    ConfigMap's client-ca-file (upstream: a given file wins over the lookup)."""

    token_cache_ttl: float = 10.0
    authorized_ttl: float = 10.0
    unauthorized_ttl: float = 10.0
    client_ca: ClientCA | None = None


@dataclass(frozen=True, slots=True)
class ServingOptions:
    bind_address: str = "0.0.0.0"
    secure_port: int = DEFAULT_SECURE_PORT
    always_allow_paths: tuple[str, ...] = field(default=DEFAULT_ALWAYS_ALLOW_PATHS)


class HealthServer:
    def __init__(
        self,
        registry: CollectorRegistry | None,
        *,
        cert: ServingCert | None = None,
        authenticator: Authenticator,
        authorizer: Authorizer,
        options: ServingOptions = ServingOptions(),
    ) -> None:
        self.registry = registry if registry is not None else REGISTRY
        self.options = options
        self.host = options.bind_address
        self.authenticator = authenticator
        self.authorizer = authorizer
        self._cert = cert
        self._ssl: ssl.SSLContext | None = None
        self._pending_cas: list[bytes] = []
        self._health: dict[str, Check] = {"ping": lambda: None}
        self._ready: dict[str, Check] = {}
        self._shutting_down = False
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._routes: list[tuple[str, Handler]] = []
        self._authenticated_only: set[str] = set()
        self._static_ca: ClientCA | None = None

    @classmethod
    def delegating(
        cls,
        registry: CollectorRegistry | None,
        post: Post,
        *,
        options: ServingOptions,
        delegation: DelegationOptions,
        cert: ServingCert | None = None,
    ) -> HealthServer:
        """The server as the scheduler runs it: reviews posted to the API server with
        `post(path, body)`, cached and bounded as `delegation` says."""
        reviewer = Reviewer(post)
        server = cls(
            registry,
            cert=cert,
            authenticator=Authenticator(reviewer, cache_ttl=delegation.token_cache_ttl),
            authorizer=Authorizer(
                reviewer,
                always_allow_paths=options.always_allow_paths,
                allow_ttl=delegation.authorized_ttl,
                deny_ttl=delegation.unauthorized_ttl,
            ),
            options=options,
        )
        server._static_ca = delegation.client_ca
        if delegation.client_ca is not None:
            server.set_authentication_config(AuthenticationConfig())
        return server

    def keep_authentication_config(
        self, get: Callable[[str], Awaitable[dict[str, Any]]]
    ) -> Coroutine[Any, Any, None]:
        """The task that keeps the API server's authentication ConfigMap applied
        (serving.authn_source); runs until cancelled."""
        return keep_authentication_config(get, self.set_authentication_config)

    # ---- TLS and the delegated-authentication configuration ------------------------
    def _ssl_context(self) -> ssl.SSLContext:
        if self._cert is None:  # no pair given: a self-signed one, in memory
            self._cert = serving_cert(
                cert_file="", key_file="", cert_dir="", bind_address=self.host
            )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self._cert.load_into(ctx)
        # ask for a client certificate, do not require one (Go: RequestClientCert): the
        # TLS layer accepts those that chain to a CA loaded below, authn.py tells which
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    def set_authentication_config(self, config: AuthenticationConfig) -> None:
        """The API server's CAs and header names (kube-system/extension-apiserver-
        authentication), when first read and whenever they change. A CA once trusted by
        the TLS layer stays loaded until restart (ssl cannot unload one); authn.py trusts
        only the current ones."""
        if self._static_ca is not None:
            config = self._static_ca.over(config)
        pems = [config.client_ca_pem]
        if config.request_header is not None:
            pems.append(config.request_header.ca_pem)
        for pem in pems:
            if pem:
                if self._ssl is None:
                    self._pending_cas.append(pem)
                else:
                    self._ssl.load_verify_locations(cadata=pem.decode())
        self.authenticator.config = config

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

    def add_get(self, path: str, handler: Handler, *, authorizes_itself: bool = False) -> None:
        """An extra read-only endpoint; before start(). `authorizes_itself`: the handler
        asks its own questions (explain: may the caller read pods in the namespace), so
        the caller must only be authenticated here."""
        if self._runner is not None:
            raise RuntimeError("routes must be added before start()")
        self._routes.append((path, handler))
        if authorizes_itself:
            self._authenticated_only.add(path)

    def add_explain(self, handler: Handler) -> None:
        """The explain API as an aggregated API (scheduler.serving.aggregated): its
        discovery documents, and the handler at the API's path (authorized as `get` on
        pods.explain.kas.io, then by the handler itself)."""
        for path, discovery in discovery_routes():
            self.add_get(path, discovery)
        self.add_get(EXPLAIN_API_PATH, handler)

    async def can_read_pods(self, request: web.Request, namespace: str) -> bool:
        """May this request's caller `get pods` in `namespace` (a SubjectAccessReview,
        cached as the others). Raises reviews.ReviewError when the API server does not
        answer: the request then fails (500), it is never allowed."""
        user = request.get(USER)
        if user is None or user is ANONYMOUS:
            return False
        return await self.authorizer.can_read_pods(user, namespace)

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
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"https://{host}:{self.port}"

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("server already started")
        self._ssl = self._ssl_context()
        for pem in self._pending_cas:
            self._ssl.load_verify_locations(cadata=pem.decode())
        self._pending_cas.clear()
        app = web.Application(middlewares=[self._guard], client_max_size=64 * 1024)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._endpoint("healthz", self._health_checks))
        app.router.add_get("/livez", self._endpoint("livez", self._health_checks))
        app.router.add_get("/readyz", self._endpoint("readyz", self._ready_checks))
        for path, handler in self._routes:
            app.router.add_get(path, handler)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.options.secure_port, ssl_context=self._ssl)
        await site.start()
        self._runner = runner
        addresses = runner.addresses
        self._port = int(addresses[0][1]) if addresses else self.options.secure_port
        # upstream: "Serving securely on [::]:10259"; the test harness reads the port here
        log.info("Serving securely on %s:%d", self.host, self._port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._port = None

    # ---- authentication and authorization ------------------------------------------
    def _attributes(self, request: web.Request) -> Attributes | None:
        """What the authorizer is asked; None for a route that authorizes itself."""
        info = request.match_info
        resource = info.route.resource
        template = resource.canonical if resource is not None else ""
        if template in self._authenticated_only:
            return None
        if template == EXPLAIN_API_PATH:
            return explain_attributes(info["namespace"], info["name"])
        # a non-resource request (RequestInfoFactory: the verb is the lowercased method)
        return Attributes(verb=request.method.lower(), path=request.path)

    @staticmethod
    def _peer_certificate(request: web.Request) -> x509.Certificate | None:
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return None
        try:
            return x509.load_der_x509_certificate(der)
        except ValueError:
            return None

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        attrs = self._attributes(request)
        try:
            user = await self.authenticator.authenticate(
                request.headers, self._peer_certificate(request)
            )
        except AuthenticationFailed as exc:
            log.debug("authentication failed path=%s: %s", request.path, exc)
            return status.unauthorized()
        except ReviewBusy:
            return status.too_many_requests()
        except ReviewError:
            return status.unauthorized()  # upstream: an unanswered TokenReview is a 401
        if user is None:
            if attrs is None or not self.authorizer.always_allowed(attrs):
                return status.unauthorized()
            user = ANONYMOUS
        request[USER] = user
        try:
            if attrs is not None:
                decision = await self.authorizer.authorize(user, attrs)
                if not decision.allowed:
                    return status.forbidden(user, attrs, decision.reason)
            return await handler(request)
        except ReviewBusy:
            return status.too_many_requests()
        except ReviewError as exc:
            log.warning("authorization review failed path=%s: %s", request.path, exc)
            return status.internal_error("the authorization review failed")

    # ---- handlers ------------------------------------------------------------------
    def _health_checks(self) -> list[tuple[str, Check]]:
        return list(self._health.items())

    def _ready_checks(self) -> list[tuple[str, Check]]:
        return [*self._health.items(), *self._ready.items(), ("shutdown", self._shutdown_check)]

    def _endpoint(
        self, endpoint: str, checks: Callable[[], list[tuple[str, Check]]]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            lines, failures = run_checks(checks())
            if failures:
                # upstream logs the reasons at V(2), naming the failed checks
                names = ",".join(name for name, _ in failures)
                detail = "\n".join(f"[-]{name} failed: {why}" for name, why in failures)
                log.info("%s check failed: %s\n%s", names, endpoint, detail)
                body = "\n".join([*lines, f"{endpoint} check failed"]) + "\n"
                return web.Response(status=500, text=body)
            if "verbose" in request.query:
                return web.Response(text="\n".join([*lines, f"{endpoint} check passed"]) + "\n")
            return web.Response(text="ok")

        return handle

    async def _metrics(self, request: web.Request) -> web.Response:
        payload = generate_latest(self.registry)
        return web.Response(body=payload, headers={"Content-Type": CONTENT_TYPE_LATEST})


def run_checks(checks: Iterable[tuple[str, Check]]) -> tuple[list[str], list[tuple[str, str]]]:
    """The body's lines ("reason withheld" for a failing check) and the failures with
    their reasons (for the log)."""
    lines: list[str] = []
    failures: list[tuple[str, str]] = []
    for name, check in checks:
        try:
            problem = check()
        except Exception as exc:  # a broken check is a failing check
            problem = f"check raised {exc!r}"
        if problem is None:
            lines.append(f"[+]{name} ok")
        else:
            failures.append((name, problem))
            lines.append(f"[-]{name} failed: reason withheld")
    return lines, failures
