"""The client layer: the only importer of kubernetes_asyncio.

- `connection`: one authenticated session, raw JSON requests and watch streams.
- `informer`: Informer[T] (LIST+WATCH into a store of records, handlers, 410 re-list).
- `http1`: the keep-alive HTTP/1.1 client of the writes (llhttp framing, size caps, a
  bounded pool with idle expiry and a liveness check before reuse).
- `dispatcher`: every write (bind, status patch, delete, event, lease) with QPS/burst,
  a concurrency bound, the lease fence and deadline, and safe retries (`retries`:
  client-go's rule of which failed calls may be sent again).
- `events`: EventRecorder, fire-and-forget events aggregated into series.
- `errors`: the error tree, chosen by HTTP status (no transport import);
  `error_translation`: the transport's exceptions mapped onto it.

The names below resolve on first use (PEP 562): importing `scheduler.client.errors` to catch
an ApiError must not load aiohttp and kubernetes_asyncio (the configuration check imports
the plugin classes, which catch it, and must stay quick).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.client.connection import Connection, ConnectionSettings, Response
    from scheduler.client.dispatcher import Dispatcher, DispatcherSettings, TokenBucket
    from scheduler.client.errors import (
        AlreadyExists,
        ApiError,
        BadRequest,
        Conflict,
        ConnectionFailed,
        Forbidden,
        Gone,
        Invalid,
        NotFound,
        ServerError,
        Timeout,
        TooManyRequests,
        TransportError,
        Unauthorized,
    )
    from scheduler.client.events import NORMAL, WARNING, EventRecorder, ObjectRef, pod_ref
    from scheduler.client.informer import (
        NODES,
        PODS,
        EventHandler,
        Informer,
        InformerState,
        InformerStateError,
        InformerStopped,
        Resource,
        Store,
    )

# exported name -> the module that defines it
_WHERE: dict[str, str] = {
    "Connection": "scheduler.client.connection",
    "ConnectionSettings": "scheduler.client.connection",
    "Response": "scheduler.client.connection",
    "Dispatcher": "scheduler.client.dispatcher",
    "DispatcherSettings": "scheduler.client.dispatcher",
    "TokenBucket": "scheduler.client.dispatcher",
    "AlreadyExists": "scheduler.client.errors",
    "ApiError": "scheduler.client.errors",
    "BadRequest": "scheduler.client.errors",
    "Conflict": "scheduler.client.errors",
    "ConnectionFailed": "scheduler.client.errors",
    "Forbidden": "scheduler.client.errors",
    "Gone": "scheduler.client.errors",
    "Invalid": "scheduler.client.errors",
    "NotFound": "scheduler.client.errors",
    "ServerError": "scheduler.client.errors",
    "Timeout": "scheduler.client.errors",
    "TooManyRequests": "scheduler.client.errors",
    "TransportError": "scheduler.client.errors",
    "Unauthorized": "scheduler.client.errors",
    "NORMAL": "scheduler.client.events",
    "WARNING": "scheduler.client.events",
    "EventRecorder": "scheduler.client.events",
    "ObjectRef": "scheduler.client.events",
    "pod_ref": "scheduler.client.events",
    "NODES": "scheduler.client.informer",
    "PODS": "scheduler.client.informer",
    "EventHandler": "scheduler.client.informer",
    "Informer": "scheduler.client.informer",
    "InformerState": "scheduler.client.informer",
    "InformerStateError": "scheduler.client.informer",
    "InformerStopped": "scheduler.client.informer",
    "Resource": "scheduler.client.informer",
    "Store": "scheduler.client.informer",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

__all__ = [
    "NODES",
    "NORMAL",
    "PODS",
    "WARNING",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Connection",
    "ConnectionFailed",
    "ConnectionSettings",
    "Dispatcher",
    "DispatcherSettings",
    "EventHandler",
    "EventRecorder",
    "Forbidden",
    "Gone",
    "Informer",
    "InformerState",
    "InformerStateError",
    "InformerStopped",
    "Invalid",
    "NotFound",
    "ObjectRef",
    "Resource",
    "Response",
    "ServerError",
    "Store",
    "Timeout",
    "TokenBucket",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "pod_ref",
]
