"""The client layer: the only importer of kubernetes_asyncio.

- `connection`: one authenticated session, raw JSON requests and watch streams.
- `informer`: Informer[T] (LIST+WATCH into a store of records, handlers, 410 re-list).
- `dispatcher`: every write (bind, status patch, delete, event, lease) with QPS/burst,
  a concurrency bound and safe retries.
- `events`: EventRecorder, fire-and-forget events aggregated into series.
- `errors`: the error tree, chosen by HTTP status.
"""

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
