"""Translating the transport's exceptions (aiohttp, kubernetes_asyncio, asyncio) into the
client layer's one error tree (`errors`); the only place that knows those exceptions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from scheduler.client.errors import (
    ApiError,
    ConnectionFailed,
    Timeout,
    error_from_response,
)

__all__ = ["TRANSLATED", "api_errors", "translate"]


def translate(exc: BaseException) -> ApiError:
    """Map an aiohttp / kubernetes_asyncio / asyncio exception to the tree above."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ApiException):
        headers = dict(exc.headers) if exc.headers else None
        if not exc.status:
            return ConnectionFailed(str(exc.reason or exc))
        return error_from_response(exc.status, exc.body, headers, http_reason=exc.reason or "")
    if isinstance(exc, aiohttp.ClientResponseError):
        return error_from_response(
            exc.status, None, dict(exc.headers or {}), http_reason=exc.message
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        # the connection (or the proxy's, or its TLS handshake) failed: nothing was sent
        return ConnectionFailed(str(exc) or type(exc).__name__, sent=False)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return Timeout(str(exc) or "connect timed out", sent=False)
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return Timeout(str(exc) or "timed out")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ConnectionFailed(f"response body cut: {exc}")
    if isinstance(exc, aiohttp.ClientError | OSError):
        return ConnectionFailed(str(exc) or type(exc).__name__)
    raise TypeError(f"not an API error: {exc!r}")


TRANSLATED: tuple[type[BaseException], ...] = (
    ApiException,
    aiohttp.ClientError,
    TimeoutError,
    OSError,
)


@contextmanager
def api_errors() -> Iterator[None]:
    """Translate transport and API exceptions raised inside the block."""
    try:
        yield
    except ApiError:
        raise
    except TRANSLATED as exc:
        raise translate(exc) from exc
