"""One authenticated session to the kube-apiserver, and raw JSON over it.

kubernetes_asyncio is used for what it is good at: kubeconfig / in-cluster loading
(the CA, client certificate, server name and token it finds) and bearer tokens (read and
refreshed by its hooks). The TLS context is built here from that configuration
(`tls_context`) and given to both clients: aiohttp's connector (reads, watches, writes
behind a proxy) and the HTTP/1.1 pool of http1.py (writes). Requests do not go through its
`ApiClient.call_api`: that generic machinery (header and parameter sanitizing, model
serialization, a dozen keyword hops per call) cost more than the request itself on the
bind path (docs/performance.md). `_send` puts the request on the library's session
directly, with the headers built once per content type, the library's own
Authorization lookup (so its token refresh hooks still run before every request), its
proxy and TLS server name, and the body encoded by `json_codec`.

- `request()` returns the parsed JSON body of a 2xx answer and raises the error tree of
  `scheduler.client.errors` for everything else.
- `watch()` yields the raw watch event dicts (`{"type": ..., "object": {...}}`), one per
  line of the chunked body. It splits lines itself, so one huge object never trips a
  line-length limit, and it raises `ConnectionFailed` / `Timeout` when the stream is cut.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from yarl import URL

from scheduler.client import json_codec
from scheduler.client.error_translation import api_errors
from scheduler.client.errors import ApiError, Timeout, error_from_response
from scheduler.client.http1 import Http1Pool, Http1Response

__all__ = [
    "JSON",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "Connection",
    "ConnectionSettings",
    "Query",
    "Response",
]

log = logging.getLogger(__name__)

JSON = "application/json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"

Query = Mapping[str, str | int | bool] | Sequence[tuple[str, str | int | bool]]

_BODYLESS = frozenset({"GET", "HEAD"})
# what goes on the small HTTP/1.1 client (http1.py): the writes, whose answers are one
# object; LISTs, WATCHes and other reads stay on aiohttp
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# a path that could break the request line is left to aiohttp (which quotes it); the
# paths built here carry API object names, which never contain these
_UNSAFE_IN_PATH = frozenset(" \r\n\t?#%")

DEFAULT_REQUEST_TIMEOUT = 30.0
"""Seconds for one whole non-watch request."""
WATCH_READ_SLACK = 30.0
"""Seconds a watch read may wait past the server-side timeoutSeconds before the stream
is considered dead (an apiserver gone without a FIN)."""


# A check the request of this task must pass once it holds its connection, right before
# its bytes are written (the dispatcher sets it for writes only the leader may make). A
# task suspended between the dispatcher's own check and the write (a TLS handshake for a
# new pooled connection, a full pool) - or a process frozen there (SIGSTOP, a VM pause)
# and thawed after its lease ran out - is stopped here instead of sending. It raises to
# refuse (scheduler.client.errors.LeaseNotHeld), and returns how many seconds the
# request may still take (the lease's sure validity; None: no bound): the HTTP/1.1 path
# ends the request there and tells the server so (the `timeout` query parameter).
LAST_CHECK: ContextVar[Callable[[], float | None] | None] = ContextVar(
    "kas_last_check", default=None
)


async def _run_last_check(*_: object) -> None:
    check = LAST_CHECK.get()
    if check is not None:
        check()


def _last_check_trace() -> aiohttp.TraceConfig:
    """aiohttp hands a connection to a request with one of these two signals; nothing
    awaits between them and the write of the request."""
    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(_run_last_check)
    trace.on_connection_create_end.append(_run_last_check)
    trace.freeze()
    return trace


WRITES_IN_FLIGHT = 256
"""Requests one connection's writes may have on the wire at once, and so the HTTP/1.1
connections it may open. kube-scheduler bounds none of this: it binds each pod in a
goroutine of its own (pkg/scheduler/schedule_one.go:141, `go
sched.runBindingCycle(...)`), and client-go multiplexes the requests as HTTP/2 streams, 100 a
connection (the API server's default, k8s.io/apiserver pkg/server/secure_serving.go),
opening another connection when they are used up. Here every request in flight holds a
connection of its own, so this bound is the scheduler's concurrency against a slow API
server: at 64, 150,000 pods' worth of API-server load held ours to 0.88x upstream's
bind rate while its own core was three-quarters idle (docs/performance.md)."""


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How to reach the apiserver. Precedence: `server` (+ token or token_file, CA file),
    then `kubeconfig`, then in-cluster config when `in_cluster` is true."""

    kubeconfig: str | None = None
    context: str | None = None
    server: str | None = None
    token: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    in_cluster: bool = False
    max_connections: int = WRITES_IN_FLIGHT
    user_agent: str = "kube-async-scheduler"


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: dict[str, Any]


def _query_tuples(query: Query | None) -> list[tuple[str, str]]:
    if not query:
        return []
    items = query.items() if isinstance(query, Mapping) else query
    out: list[tuple[str, str]] = []
    for key, value in items:
        if isinstance(value, bool):
            out.append((key, "true" if value else "false"))
        else:
            out.append((key, str(value)))
    return out


def _decode(data: bytes) -> dict[str, Any]:
    if not data:
        return {}
    parsed = json_codec.loads(data)
    return parsed if isinstance(parsed, dict) else {"items": parsed}


class Connection:
    """An ApiClient plus raw JSON helpers. Build it with one of the classmethods and
    `await close()` it at shutdown (or use `async with`)."""

    def __init__(
        self, api_client: k8s_client.ApiClient, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.api_client = api_client
        configuration = api_client.configuration
        rest = api_client.rest_client
        # what the library's RESTClientObject would pass per request, read once
        self._session: aiohttp.ClientSession = rest.pool_manager
        self._base_url = str(configuration.host)
        self._options: dict[str, Any] = {}
        if rest.proxy:
            self._options["proxy"] = rest.proxy
        else:
            self._options.update(_env_proxy(self._base_url))
        if rest.proxy_headers:
            self._options["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            self._options["server_hostname"] = rest.server_hostname
        self._header_sets: dict[tuple[str, str], dict[str, str]] = {}
        self._timeouts: dict[float | None, aiohttp.ClientTimeout] = {}
        # writes: the small HTTP/1.1 client, unless a proxy is in the way
        self._writes: Http1Pool | None = None
        self._write_heads: dict[tuple[str, str], bytes] = {}
        self._host_header = ""
        https = urlsplit(self._base_url).scheme == "https"
        if ssl_context is None and https:
            ssl_context = tls_context(configuration)
        self._ssl_context = ssl_context if https else None
        if "proxy" not in self._options:
            self._writes = _write_pool(
                self._base_url,
                self._ssl_context,
                rest.server_hostname,
                configuration.connection_pool_maxsize,
            )
            self._host_header = urlsplit(self._base_url).netloc

    # ---- construction -------------------------------------------------------------
    @classmethod
    async def connect(cls, settings: ConnectionSettings) -> Connection:
        if settings.server:
            return cls.from_token(
                settings.server,
                token=settings.token,
                token_file=settings.token_file,
                ca_file=settings.ca_file,
                max_connections=settings.max_connections,
                user_agent=settings.user_agent,
            )
        if settings.kubeconfig or not settings.in_cluster:
            return await cls.from_kubeconfig(
                settings.kubeconfig,
                context=settings.context,
                max_connections=settings.max_connections,
                user_agent=settings.user_agent,
            )
        return cls.from_in_cluster(
            max_connections=settings.max_connections, user_agent=settings.user_agent
        )

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | None = None,
        *,
        context: str | None = None,
        max_connections: int = WRITES_IN_FLIGHT,
        user_agent: str = "kube-async-scheduler",
    ) -> Connection:
        """The kubeconfig's current (or given) context; TLS verified against its CA.
        `path` None means $KUBECONFIG or ~/.kube/config, as kubectl."""
        configuration = k8s_client.Configuration()
        await k8s_config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
        return cls._build(configuration, max_connections, user_agent)

    @classmethod
    def from_in_cluster(
        cls, *, max_connections: int = WRITES_IN_FLIGHT, user_agent: str = "kube-async-scheduler"
    ) -> Connection:
        """The pod's ServiceAccount token (re-read when it rotates) and CA."""
        configuration = k8s_client.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return cls._build(configuration, max_connections, user_agent)

    @classmethod
    def from_token(
        cls,
        server: str,
        *,
        token: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        max_connections: int = WRITES_IN_FLIGHT,
        user_agent: str = "kube-async-scheduler",
    ) -> Connection:
        """An explicit server URL and bearer token. `token_file` is re-read before each
        request when it changed, so projected / TokenRequest tokens can rotate."""
        if bool(token) == bool(token_file):
            raise ValueError("give exactly one of token and token_file")
        configuration = k8s_client.Configuration(host=server.rstrip("/"))
        configuration.ssl_ca_cert = ca_file
        configuration.verify_ssl = True
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        if token:
            configuration.api_key = {"BearerToken": token}
        else:
            assert token_file is not None
            reader = _TokenFile(token_file)
            configuration.api_key = {"BearerToken": reader.read()}
            configuration.refresh_api_key_hook = reader.refresh
        return cls._build(configuration, max_connections, user_agent)

    @classmethod
    def _build(
        cls, configuration: k8s_client.Configuration, max_connections: int, user_agent: str
    ) -> Connection:
        configuration.connection_pool_maxsize = max_connections
        api_client = k8s_client.ApiClient(configuration)
        api_client.user_agent = user_agent
        # the library's session, again, with a connector of ours: the TLS context built
        # here (the same one the HTTP/1.1 writes use), the same pool size and read
        # buffer, plus the last-moment check (LAST_CHECK). The library's own connector
        # never opened a connection: dropped with its session.
        context = tls_context(configuration)
        rest = api_client.rest_client
        rest.pool_manager.detach()
        connector = aiohttp.TCPConnector(limit=max_connections, ssl=context)
        rest.pool_manager = aiohttp.ClientSession(
            connector=connector,
            # not trust_env: with it aiohttp looks up ~/.netrc and the proxy variables
            # in a worker thread for every request, two thread hops that cost more CPU
            # than the rest of a bind. The proxy variables are read once instead
            # (Connection._options), as client-go's ProxyFromEnvironment does.
            trust_env=False,
            # the apiserver sets no cookies (client-go keeps no jar): skip the jar's
            # per-request filtering
            cookie_jar=aiohttp.DummyCookieJar(),
            read_bufsize=2**21,
            trace_configs=[_last_check_trace()],
        )
        return cls(api_client, context)

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context both clients use (None for a plain-HTTP server)."""
        return self._ssl_context

    @property
    def write_pool(self) -> Http1Pool | None:
        """The HTTP/1.1 client of the writes (None behind a proxy)."""
        return self._writes

    async def close(self) -> None:
        if self._writes is not None:
            self._writes.close()
        await self.api_client.close()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- raw requests -------------------------------------------------------------
    def _headers(self, content_type: str, accept: str) -> dict[str, str]:
        """The fixed headers of a request with this content type, built once: Accept,
        Content-Type, then the client's defaults (User-Agent), as ApiClient orders them."""
        key = (content_type, accept)
        headers = self._header_sets.get(key)
        if headers is None:
            headers = {"Accept": accept, "Content-Type": content_type}
            headers.update(self.api_client.default_headers)
            if self.api_client.cookie:
                headers["Cookie"] = self.api_client.cookie
            self._header_sets[key] = headers
        return headers

    async def _authorization(self) -> str | None:
        """The bearer token header value, or None (client certificates are in the TLS
        context). The library's own lookup runs its refresh hook first, so a rotated
        token file (`_TokenFile`, the in-cluster ServiceAccount token) is re-read."""
        configuration = self.api_client.configuration
        if "BearerToken" not in configuration.api_key:
            return None
        token: str | None = await configuration.get_api_key_with_prefix("BearerToken")
        return token

    def _timeout(
        self, request_timeout: float | aiohttp.ClientTimeout | None
    ) -> aiohttp.ClientTimeout:
        """A number is the whole request's limit, None none at all (as the library)."""
        if isinstance(request_timeout, aiohttp.ClientTimeout):
            return request_timeout
        timeout = self._timeouts.get(request_timeout)
        if timeout is None:
            timeout = aiohttp.ClientTimeout(total=request_timeout or None)
            self._timeouts[request_timeout] = timeout
        return timeout

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None,
        body: Any,
        content_type: str,
        request_timeout: float | aiohttp.ClientTimeout | None,
        accept: str = JSON,
    ) -> aiohttp.ClientResponse:
        """One request on the pooled session. `body` is JSON-encoded unless it is bytes
        already; GET and HEAD carry none."""
        url = self._base_url + path
        if query:
            url += "?" + urlencode(_query_tuples(query))
        data: bytes | None = None
        if body is not None and method not in _BODYLESS:
            data = body if isinstance(body, bytes) else json_codec.dumps(body)
        headers = self._headers(content_type, accept)
        with api_errors():
            authorization = await self._authorization()
            if authorization:
                headers = {**headers, "Authorization": authorization}
            response: aiohttp.ClientResponse = await self._session.request(
                method,
                url,
                headers=headers,
                data=data,
                timeout=self._timeout(request_timeout),
                **self._options,
            )
        return response

    def _write_head(self, content_type: str, accept: str) -> bytes:
        """The fixed header lines of a write on the HTTP/1.1 client, built once: Host,
        then what `_headers` gives aiohttp."""
        key = (content_type, accept)
        head = self._write_heads.get(key)
        if head is None:
            lines = [f"Host: {self._host_header}"]
            lines += [f"{k}: {v}" for k, v in self._headers(content_type, accept).items()]
            head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
            self._write_heads[key] = head
        return head

    async def _write(
        self,
        pool: Http1Pool,
        method: str,
        path: str,
        query: Query | None,
        body: Any,
        content_type: str,
        request_timeout: float | None,
    ) -> Response:
        """A write on the HTTP/1.1 client (http1.py); the same answers and errors as
        the aiohttp path. The request line is written last, once the request holds its
        connection and LAST_CHECK has passed: its `timeout` is what is left of the
        request's own limit and of the lease's validity at that moment."""
        data = b"" if body is None else body if isinstance(body, bytes) else json_codec.dumps(body)
        with api_errors():
            authorization = await self._authorization()
        parts = [b"", self._write_head(content_type, JSON)]
        if authorization:
            parts.append(f"Authorization: {authorization}\r\n".encode("latin-1"))
        parts.append(b"Content-Length: %d\r\n\r\n" % len(data))
        parts.append(data)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request_timeout if request_timeout else None
        conn = await pool.acquire(deadline)
        check = LAST_CHECK.get()
        try:
            bound = check() if check is not None else None
            now = loop.time()
            if bound is not None:
                deadline = now + bound if deadline is None else min(deadline, now + bound)
            parts[0] = _request_line(method, path, query, deadline, now)
        except BaseException:
            pool.release(conn)  # nothing was written on it
            raise
        response: Http1Response = await pool.exchange(conn, b"".join(parts), deadline)
        if not 200 <= response.status <= 299:
            raise error_from_response(
                response.status, response.body, response.headers, http_reason=response.reason
            )
        try:
            parsed = _decode(response.body)
        except ValueError as exc:
            raise ApiError(response.status, "BadResponse", f"not JSON: {exc}") from exc
        return Response(response.status, parsed)

    async def request_raw(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
        request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
        decode: Callable[[bytes], dict[str, Any]] | None = None,
    ) -> Response:
        """One request; returns status and parsed body for 2xx, raises otherwise.
        `decode` reads a 2xx body of a read (not a write) instead of the JSON decode, for
        a caller that knows the body's shape (lean_json); a ValueError is a bad answer."""
        pool = self._writes
        if pool is not None and method in _WRITES and _UNSAFE_IN_PATH.isdisjoint(path):
            return await self._write(pool, method, path, query, body, content_type, request_timeout)
        if method in _WRITES and request_timeout:
            # the server ends the write when we stop waiting (see _request_line)
            query = [*_query_tuples(query), ("timeout", f"{max(1, int(request_timeout * 1000))}ms")]
        response = await self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            request_timeout=request_timeout,
        )
        try:
            with api_errors():
                data = await response.read()
        finally:
            response.release()
        if not 200 <= response.status <= 299:
            raise error_from_response(
                response.status, data, dict(response.headers), http_reason=response.reason or ""
            )
        try:
            parsed = _decode(data) if decode is None else decode(data)
        except ValueError as exc:
            raise ApiError(response.status, "BadResponse", f"not JSON: {exc}") from exc
        return Response(response.status, parsed)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
        request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
        decode: Callable[[bytes], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The parsed JSON body of a 2xx answer (GET/POST/PUT/PATCH/DELETE)."""
        response = await self.request_raw(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            request_timeout=request_timeout,
            decode=decode,
        )
        return response.body

    async def watch(
        self,
        path: str,
        *,
        query: Query | None = None,
        timeout_seconds: int = 300,
        decode: Callable[[bytes], Any] | None = None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Yield raw watch events from `path?watch=true&timeoutSeconds=...&<query>`.

        Ends normally when the server closes the stream at timeoutSeconds. A non-2xx
        answer raises its ApiError (410 -> Gone); ERROR events are yielded as they are,
        the caller decides (an informer re-lists on code 410). `decode` reads each line
        instead of the JSON decode (lean_json.watch_event); a ValueError is a bad event.
        """
        loads = json_codec.loads if decode is None else decode
        params = _query_tuples(query)
        params += [("watch", "true"), ("timeoutSeconds", str(timeout_seconds))]
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=DEFAULT_REQUEST_TIMEOUT,
            sock_read=timeout_seconds + WATCH_READ_SLACK,
        )
        response = await self._send(
            "GET", path, query=params, body=None, content_type=JSON, request_timeout=timeout
        )
        try:
            if not 200 <= response.status <= 299:
                with api_errors():
                    data = await response.read()
                raise error_from_response(
                    response.status,
                    data,
                    dict(response.headers),
                    http_reason=response.reason or "",
                )
            buffer = b""
            with api_errors():
                async for chunk in response.content.iter_any():
                    buffer = buffer + chunk if buffer else chunk
                    # the lines of the chunk by index: a burst brings hundreds of events
                    # in one chunk, and cutting the rest off after each line copied it
                    # once per line
                    start = 0
                    while (end := buffer.find(b"\n", start)) >= 0:
                        event = _parse_event(buffer[start:end], loads)
                        start = end + 1
                        if event is not None:
                            yield event
                    buffer = buffer[start:] if start else buffer
            event = _parse_event(buffer, loads)
            if event is not None:
                yield event
        finally:
            response.close()


def _request_line(
    method: str, path: str, query: Query | None, deadline: float | None, now: float
) -> bytes:
    """`METHOD path?query HTTP/1.1`, with the time left before `deadline` as the
    server-side `timeout` (client-go sets it from its request timeout: rest/request.go
    URL; the API server ends the request there, apiserver endpoints/filters/
    request_deadline.go), so a write we gave up on is not applied after we stopped
    waiting for it."""
    target = f"{path}?{urlencode(_query_tuples(query))}" if query else path
    if deadline is not None:
        millis = int((deadline - now) * 1000)
        if millis < 1:  # "0" would mean no timeout at all to the server
            raise Timeout("no time left to send the request", sent=False)
        target += f"&timeout={millis}ms" if query else f"?timeout={millis}ms"
    return f"{method} {target} HTTP/1.1\r\n".encode("latin-1")


def _parse_event(line: bytes, loads: Callable[[bytes], Any]) -> dict[str, Any] | None:
    line = line.strip()
    if not line:
        return None
    try:
        event = loads(line)
    except ValueError as exc:
        raise ApiError(200, "BadWatchEvent", f"undecodable watch line: {exc}") from exc
    if not isinstance(event, dict):
        raise ApiError(200, "BadWatchEvent", "watch line is not an object")
    return event


def tls_context(configuration: k8s_client.Configuration) -> ssl.SSLContext:
    """The TLS context of the loaded configuration, by the rules kubernetes_asyncio's
    own connector follows (client/rest.py RESTClientObject): the cluster CA (the system's
    when none is given), the client certificate and key (a kubeconfig's data fields and
    an exec plugin's answer are files by now), no verification only when the
    configuration says so (insecure-skip-tls-verify)."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _write_pool(
    base_url: str,
    context: ssl.SSLContext | None,
    server_hostname: str | None,
    max_connections: int | None,
) -> Http1Pool | None:
    """The HTTP/1.1 client for writes: the connection's TLS context, and as many
    connections as aiohttp's connector may open (max_connections); None for a URL it
    cannot serve (then writes stay on aiohttp)."""
    parts = urlsplit(base_url)
    if parts.hostname is None or parts.scheme not in ("http", "https"):
        return None
    if parts.scheme == "https" and context is None:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Http1Pool(
        parts.hostname,
        port,
        ssl_context=context if parts.scheme == "https" else None,
        server_hostname=server_hostname or None,
        max_connections=max_connections or WRITES_IN_FLIGHT,
    )


def _env_proxy(base_url: str) -> dict[str, Any]:
    """HTTPS_PROXY / HTTP_PROXY for the apiserver unless NO_PROXY exempts it, read once
    (client-go reads them once per process too): the request options to use it."""
    try:
        proxy, proxy_auth = get_env_proxy_for_url(URL(base_url))
    except LookupError:
        return {}
    options: dict[str, Any] = {"proxy": proxy}
    if proxy_auth is not None:
        options["proxy_auth"] = proxy_auth
    return options


class _TokenFile:
    """Re-reads a token file when its mtime changes (rotated projected tokens)."""

    def __init__(self, path: str) -> None:
        self._path = Path(path)
        self._mtime = -1.0

    def read(self) -> str:
        self._mtime = self._path.stat().st_mtime
        return self._path.read_text().strip()

    def refresh(self, configuration: k8s_client.Configuration) -> None:
        try:
            mtime = self._path.stat().st_mtime
            if mtime != self._mtime:
                configuration.api_key["BearerToken"] = self.read()
        except OSError as exc:  # keep the old token; the request will say 401 if stale
            log.warning("token file unreadable path=%s error=%s", self._path, exc)
