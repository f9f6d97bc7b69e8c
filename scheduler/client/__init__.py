"""The client layer: the only importer of kubernetes_asyncio.

- `connection`: one authenticated session, raw JSON requests and watch streams.
- `informer`: Informer[T] (LIST+WATCH into a store of records, handlers, 410 re-list).
- `http1`: the keep-alive HTTP/1.1 client of the writes (llhttp framing, size caps, a
  bounded pool with idle expiry and a liveness check before reuse).
- `dispatcher`: every write (bind, status patch, delete, event, lease) with QPS/burst,
  a concurrency bound, the lease fence and deadline, and safe retries (`retries`:
  client-go's rule of which failed calls may be sent again).
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
