"""Informer[T]: LIST then WATCH one resource into a store of records, with handlers.

Our own, because kubernetes_asyncio has none (its Watch gives up after one 410). The
shape is client-go's reflector + a minimal shared informer:

1. LIST in pages (limit/continue) from etcd (a consistent read), transform each raw
   object once into a record T, and diff against the store: on_add for new keys,
   on_update for keys whose resourceVersion changed, on_delete for keys that vanished.
   After the first LIST `has_synced` is true. With `watch_list` (pods and nodes), 1
   is a streaming watch list instead, as client-go's reflector does by default: the
   same records and differences, handed on at its end bookmark (`_watch_list_once`).
2. WATCH from the list's resourceVersion with allowWatchBookmarks and timeoutSeconds.
   Every event moves the resourceVersion on; BOOKMARKs only do that. A stream that ends
   at timeoutSeconds is re-opened at once from the last resourceVersion.
3. 410 Gone, as the HTTP status or as an ERROR event in the stream ("too old resource
   version"), means the window is lost: go back to 1 (re-list and diff).
4. Any other failure (connection refused while the apiserver restarts, a body cut
   mid-stream, a read timeout, 5xx) is logged and retried with capped, jittered
   exponential backoff, from the last resourceVersion.

Observers, set before `run()`: `on_list(name)` after each complete LIST (the first and
every re-list) once its handlers have run, `on_event(name, type)` for each watch event
received (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR; anything else as "unknown", to keep
labels bounded), `on_error(name, exc)` for each failed LIST or WATCH (410 included),
before its backoff.

`relist_after_error`: every failure, not only 410, goes back to 1 (a fresh LIST). For a
small resource whose consumer must prove its view current (PreemptionPolicies): a watch
resumed after an outage would replay what it missed, but the consumer could not tell
how long it was blind; a LIST ends the doubt at once.

`update_transform(raw, old)`, when given, builds the record of an object already in the
store (updates, re-list differences, the final state of a delete) from its raw object and
the current record, as `transform(raw)` would: a transform that can reuse parts of the
old record (pods: the parsed spec, see model.pod_update_from_dict) saves its work there.

Invariants: handlers are synchronous and run on the event loop in event order; a
handler or `transform` that raises is logged (and `on_transform_error` called) and the
informer goes on; the store is only changed by this informer; the store's record for a
key is the one last handed to a handler.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import enum
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from scheduler.client.backoff import Backoff
from scheduler.client.connection import Connection
from scheduler.client.errors import ApiError, Gone, error_from_response

__all__ = [
    "NODES",
    "PODS",
    "EventHandler",
    "Informer",
    "InformerState",
    "InformerStateError",
    "InformerStatistics",
    "InformerStopped",
    "Resource",
    "Store",
    "object_key",
]

log = logging.getLogger(__name__)

# the watch event types of the API (metav1.WatchEvent); others are reported as "unknown"
WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

Raw = dict[str, Any]
# one object of a LIST: its key, its resourceVersion, and its new record (None: nothing
# to hand on)
_Listed = tuple[str, str, T | None]


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource collection: group ("" for core), version, plural, and a namespace to
    restrict a namespaced resource to (None: all namespaces / cluster-scoped)."""

    group: str
    version: str
    plural: str
    namespace: str | None = None

    @property
    def path(self) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespace:
            return f"{prefix}/namespaces/{self.namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods")
NODES = Resource("", "v1", "nodes")


class EventHandler(Protocol[T_contra]):
    def on_add(self, obj: T_contra) -> None: ...

    def on_update(self, old: T_contra, new: T_contra) -> None: ...

    def on_delete(self, obj: T_contra) -> None: ...


class InformerState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPED = "stopped"


class InformerStateError(RuntimeError):
    """The informer was used against its lifecycle (run twice, run after stop)."""


class InformerStopped(RuntimeError):
    """The informer stopped before it synced."""


@dataclass(frozen=True, slots=True)
class InformerStatistics:
    objects: int
    lists: int
    watches: int
    events: int
    gone: int
    errors: int
    transform_errors: int
    handler_errors: int
    resource_version: str


def object_key(raw: Raw) -> str:
    """ "namespace/name", or "name" for cluster-scoped objects, as client-go's
    MetaNamespaceKeyFunc."""
    meta = raw.get("metadata") or {}
    name = meta.get("name", "")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def _ends_initial_events(raw: Raw) -> bool:
    meta = raw.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return isinstance(annotations, dict) and annotations.get(INITIAL_EVENTS_END) == "true"


def _resource_version(raw: Raw) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion", ""))


class Store(Generic[T]):
    """key -> record, with the resourceVersion each record was built from."""

    def __init__(self) -> None:
        self._items: dict[str, T] = {}
        self._versions: dict[str, str] = {}

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def list(self) -> builtins.list[T]:
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def resource_version_of(self, key: str) -> str | None:
        return self._versions.get(key)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def _put(self, key: str, obj: T, resource_version: str) -> None:
        self._items[key] = obj
        self._versions[key] = resource_version

    def _pop(self, key: str) -> T | None:
        self._versions.pop(key, None)
        return self._items.pop(key, None)


class Informer(Generic[T]):
    """List+watch `resource` into `store`, calling `handler` for each change.

    `await run()` runs until `stop()` (then returns) or cancellation (then raises).
    """

    def __init__(
        self,
        connection: Connection,
        resource: Resource,
        transform: Callable[[Raw], T],
        handler: EventHandler[T],
        *,
        update_transform: Callable[[Raw, T], T] | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        on_transform_error: Callable[[Raw, Exception], None] | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        backoff: Backoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        name: str | None = None,
        relist_after_error: bool = False,
        store: Store[T] | None = None,
        list_decoder: Callable[[bytes], Raw] | None = None,
        event_decoder: Callable[[bytes], Any] | None = None,
        watch_list: bool = False,
    ) -> None:
        """`store`: where the records live (default: a new one); the app passes the pods'
        own so the parts built before the informer can already hold it. `list_decoder`
        and `event_decoder`: how a LIST page's body and a watch line are read, when not
        as plain JSON (lean_json: pods and nodes without their managedFields).
        `watch_list`: fill the store with a streaming watch list instead of a LIST
        (below), falling back to LIST for good when the server cannot serve one."""
        self._connection = connection
        self.resource = resource
        self._transform = transform
        # for an object already in the store: (raw, its current record) -> the record
        # transform(raw) would build, reusing what it can of the current one
        self._update_transform = update_transform
        self.handler = handler  # the wiring's; tests check which handler an informer feeds
        self.field_selector = field_selector
        self.label_selector = label_selector
        self._on_transform_error = on_transform_error
        self._page_size = page_size
        self._watch_timeout = watch_timeout_seconds
        self._backoff = backoff or Backoff()
        self._sleep = sleep
        self._relist_after_error = relist_after_error
        self._list_decoder = list_decoder
        self._event_decoder = event_decoder
        self._watch_list = watch_list
        self._need_list = True
        self.name = name or str(resource)
        self.store: Store[T] = store if store is not None else Store()
        self._state = InformerState.CREATED
        self._synced = asyncio.Event()
        self._stopped = asyncio.Event()
        self._stop_requested = False
        self._worker: asyncio.Task[None] | None = None
        self._resource_version = ""
        self._lists = self._watches = self._events = self._gone = 0
        self._errors = self._transform_errors = self._handler_errors = 0
        # metric observers (see the module docstring); called with self.name
        self.on_list: Callable[[str], None] | None = None
        self.on_event: Callable[[str, str], None] | None = None
        self.on_error: Callable[[str, Exception], None] | None = None

    # ---- public surface ----------------------------------------------------------
    @property
    def state(self) -> InformerState:
        return self._state

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def resource_version(self) -> str:
        return self._resource_version

    def list(self) -> builtins.list[T]:
        return self.store.list()

    def get(self, key: str) -> T | None:
        return self.store.get(key)

    async def wait_synced(self) -> None:
        """Return once the first LIST has been handled; raise InformerStopped if the
        informer stops first. Wrap in asyncio.timeout() for a deadline."""
        if self._synced.is_set():
            return
        if self._state is InformerState.STOPPED:
            raise InformerStopped(f"informer {self.name} stopped before it synced")
        synced = asyncio.ensure_future(self._synced.wait())
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({synced, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            synced.cancel()
            stopped.cancel()
        if not self._synced.is_set():
            raise InformerStopped(f"informer {self.name} stopped before it synced")

    def statistics(self) -> InformerStatistics:
        return InformerStatistics(
            objects=len(self.store),
            lists=self._lists,
            watches=self._watches,
            events=self._events,
            gone=self._gone,
            errors=self._errors,
            transform_errors=self._transform_errors,
            handler_errors=self._handler_errors,
            resource_version=self._resource_version,
        )

    async def run(self) -> None:
        if self._state is not InformerState.CREATED:
            raise InformerStateError(
                f"informer {self.name} is {self._state.value}; an informer runs once"
            )
        self._state = InformerState.RUNNING
        self._worker = asyncio.create_task(self._main(), name=f"informer:{self.name}")
        try:
            await self._worker
        except asyncio.CancelledError:
            if not self._stop_requested:
                raise
        finally:
            if not self._worker.done():
                self._worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._worker
            self._state = InformerState.STOPPED
            self._stopped.set()
            log.info("informer stopped resource=%s", self.name)

    def stop(self) -> None:
        """Stop the informer; `run()` then returns. Idempotent."""
        self._stop_requested = True
        if self._state is InformerState.CREATED:
            self._state = InformerState.STOPPED
            self._stopped.set()
        elif self._worker is not None:
            self._worker.cancel()

    # ---- the loop ----------------------------------------------------------------
    async def _main(self) -> None:
        # True until a LIST (or a watch list's initial events) has filled the store at a
        # resourceVersion a watch can go on from
        self._need_list = True
        consecutive_gone = 0
        while True:
            try:
                if self._need_list and self._watch_list:
                    # on success the same stream went on as the watch until it ended
                    if await self._watch_list_once():
                        consecutive_gone = 0
                        continue
                    self._watch_list = False  # not served here: LIST from now on
                if self._need_list:
                    await self._relist()
                    self._need_list = False
                await self._watch_once()
                consecutive_gone = 0
            except Gone as exc:
                self._observe_error(exc)
                self._gone += 1
                consecutive_gone += 1
                self._need_list = True
                log.info("watch expired, re-listing resource=%s error=%s", self.name, exc)
                if consecutive_gone > 2:  # a 410 loop: do not spin
                    await self._sleep(self._backoff.next_delay())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._observe_error(exc)
                self._errors += 1
                delay = self._backoff.next_delay()
                level = logging.WARNING if isinstance(exc, ApiError) else logging.ERROR
                log.log(
                    level,
                    "%s failed, retrying resource=%s delay=%.2fs error=%s",
                    "list" if self._need_list else "watch",
                    self.name,
                    delay,
                    exc,
                    exc_info=not isinstance(exc, ApiError),
                )
                self._need_list = self._need_list or self._relist_after_error
                await self._sleep(delay)

    def _observe_error(self, exc: Exception) -> None:
        if self.on_error is not None:
            try:
                self.on_error(self.name, exc)
            except Exception:
                log.exception("on_error observer failed resource=%s", self.name)

    def _selectors(self) -> builtins.list[tuple[str, str]]:
        query: builtins.list[tuple[str, str]] = []
        if self.field_selector:
            query.append(("fieldSelector", self.field_selector))
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        return query

    async def _relist(self) -> None:
        # each page is read into records as it arrives and its raw objects dropped: a
        # decoded pod is about 25 KB of Python objects against about 3 KB for its record,
        # so holding every raw page until the last one came in would make the peak of a
        # 150,000-pod LIST several GiB (docs/performance.md, "Start-up at scale").
        # The next page is asked for before this one is read: the API server encodes it
        # (on a core of its own) while this process turns the current one into records,
        # so at most two raw pages are held at once.
        listed: builtins.list[_Listed[T]] = []
        resource_version = ""
        fetch: asyncio.Future[Raw] | None = asyncio.ensure_future(self._list_page(""))
        try:
            while fetch is not None:
                page = await fetch
                meta = page.get("metadata") or {}
                resource_version = str(meta.get("resourceVersion", ""))
                token = str(meta.get("continue") or "")
                fetch = None
                if token:
                    fetch = asyncio.ensure_future(self._list_page(token))
                    await asyncio.sleep(0)  # let the request go out before reading
                self._read_page(page.get("items") or [], listed)
                del page
        finally:
            if fetch is not None and not fetch.done():
                fetch.cancel()
        self._listed(listed, resource_version)

    def _listed(self, listed: builtins.list[_Listed[T]], resource_version: str) -> None:
        """A complete listing (a LIST, or a watch list's initial events) applied."""
        self._lists += 1
        self._replace(listed)
        self._resource_version = resource_version
        self._need_list = False
        if self.on_list is not None:  # once the listing's handlers have run
            self.on_list(self.name)
        log.info(
            "listed resource=%s objects=%d resourceVersion=%s",
            self.name,
            len(self.store),
            resource_version,
        )
        if not self._synced.is_set():
            self._synced.set()

    async def _list_page(self, token: str) -> Raw:
        query = [*self._selectors(), ("limit", str(self._page_size))]
        if token:
            query.append(("continue", token))
        if self._list_decoder is None:
            return await self._connection.request("GET", self.resource.path, query=query)
        return await self._connection.request(
            "GET", self.resource.path, query=query, decode=self._list_decoder
        )

    async def _watch_list_once(self) -> bool:
        """Fill the store from a streaming watch list, as client-go's reflector does when
        its WatchListClient feature is on (the default from v1.35; the API server's
        WatchList, on by default from v1.34): a watch with sendInitialEvents=true
        answers with an ADDED event for every object, then a BOOKMARK annotated
        `k8s.io/initial-events-end` at the resourceVersion of that state
        (client-go tools/cache/reflector.go watchList; apiserver storage/cacher). The
        objects are read into records as they come; the store and the handlers see the
        whole state at the bookmark, as after a LIST (`_replace`). The same stream then
        goes on as the watch. The state comes from the API server's watch cache in one
        stream, instead of a LIST page by page.

        Returns False, having changed nothing, when the server does not serve watch
        lists: it refused the request as invalid (the gate off: 422/400), or the stream
        ended without the end bookmark (a server that ignores sendInitialEvents). Any
        other failure raises, and the next attempt is a watch list again."""
        query = [
            *self._selectors(),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("resourceVersion", ""),
            ("allowWatchBookmarks", "true"),
        ]
        self._watches += 1
        listed: builtins.list[_Listed[T]] = []
        initial = True
        stream = self._open_watch(query)
        try:
            async with contextlib.aclosing(stream) as events:
                async for event in events:
                    if not initial:
                        self._handle(event)
                        continue
                    kind = event.get("type")
                    raw = event.get("object") or {}
                    if kind == "ADDED":
                        if self.on_event is not None:
                            self.on_event(self.name, "ADDED")
                        self._read_page([raw], listed)
                    elif kind == "BOOKMARK" and _ends_initial_events(raw):
                        if self.on_event is not None:
                            self.on_event(self.name, "BOOKMARK")
                        initial = False
                        self._listed(listed, _resource_version(raw))
                        listed = []
                        self._backoff.reset()
                    else:  # an ERROR (410: Gone), an early bookmark, anything else
                        self._handle(event)
        except ApiError as exc:
            if initial and exc.status in (400, 422):
                log.warning(
                    "watch list refused, listing instead resource=%s error=%s", self.name, exc
                )
                return False
            raise
        if initial:
            log.warning(
                "watch list ended before its initial events did, listing instead resource=%s",
                self.name,
            )
            return False
        self._backoff.reset()
        return True

    def _read_page(self, items: builtins.list[Raw], listed: builtins.list[_Listed[T]]) -> None:
        """Append (key, version, record) for each object of one LIST page; the record is
        None when there is nothing to hand on: the store already holds this version, or
        the object cannot be read (reported here, once per LIST). The store is not
        touched: a LIST that fails half-way changes nothing."""
        for raw in items:
            key = object_key(raw)
            version = _resource_version(raw)
            old = self.store.get(key)
            if old is not None and self.store.resource_version_of(key) == version:
                listed.append((key, version, None))
            else:
                listed.append((key, version, self._safe_transform(raw, old)))

    def _replace(self, listed: builtins.list[_Listed[T]]) -> None:
        """Apply a complete LIST to the store and emit the differences; every listed key
        counts as present, even one whose object could not be read (present objects are
        never taken for deleted)."""
        seen: set[str] = set()
        for key, version, new in listed:
            seen.add(key)
            if new is None:
                continue
            old = self.store.get(key)
            self.store._put(key, new, version)
            if old is None:
                self._call(self.handler.on_add, new)
            else:
                self._call(self.handler.on_update, old, new)
        for key in [k for k in self.store._items if k not in seen]:
            gone = self.store._pop(key)
            if gone is not None:
                self._call(self.handler.on_delete, gone)

    async def _watch_once(self) -> None:
        query = [
            *self._selectors(),
            ("resourceVersion", self._resource_version),
            ("allowWatchBookmarks", "true"),
        ]
        self._watches += 1
        healthy = False
        stream = self._open_watch(query)
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                if not healthy:
                    healthy = True
                    self._backoff.reset()
                self._handle(event)
        # a clean end at timeoutSeconds: the stream worked
        self._backoff.reset()

    def _open_watch(self, query: builtins.list[tuple[str, str]]) -> AsyncGenerator[Raw, None]:
        if self._event_decoder is None:
            return self._connection.watch(
                self.resource.path, query=query, timeout_seconds=self._watch_timeout
            )
        return self._connection.watch(
            self.resource.path,
            query=query,
            timeout_seconds=self._watch_timeout,
            decode=self._event_decoder,
        )

    def _handle(self, event: Raw) -> None:
        kind = event.get("type")
        raw = event.get("object") or {}
        if self.on_event is not None:
            self.on_event(self.name, kind if kind in WATCH_EVENT_TYPES else "unknown")
        if kind == "ERROR":
            code = int(raw.get("code") or 0)
            raise error_from_response(code or 500, raw)
        version = _resource_version(raw)
        if version:
            self._resource_version = version
        if kind == "BOOKMARK":
            return
        self._events += 1
        key = object_key(raw)
        if kind in ("ADDED", "MODIFIED"):
            old = self.store.get(key)
            new = self._safe_transform(raw, old)
            if new is None:
                return
            self.store._put(key, new, version)
            if old is None:
                self._call(self.handler.on_add, new)
            else:
                self._call(self.handler.on_update, old, new)
        elif kind == "DELETED":
            old = self.store._pop(key)
            if old is None:
                return
            final = self._safe_transform(raw, old, report=False)
            self._call(self.handler.on_delete, final if final is not None else old)
        else:
            log.warning("unknown watch event resource=%s type=%s", self.name, kind)

    def _safe_transform(self, raw: Raw, old: T | None, *, report: bool = True) -> T | None:
        try:
            if old is not None and self._update_transform is not None:
                return self._update_transform(raw, old)
            return self._transform(raw)
        except Exception as exc:
            if not report:
                return None
            self._transform_errors += 1
            log.warning(
                "cannot read object, skipped resource=%s key=%s error=%s",
                self.name,
                object_key(raw),
                exc,
            )
            if self._on_transform_error is not None:
                try:
                    self._on_transform_error(raw, exc)
                except Exception:
                    log.exception("on_transform_error hook failed resource=%s", self.name)
            return None

    def _call(self, fn: Callable[..., None], *args: T) -> None:
        try:
            fn(*args)
        except Exception:
            self._handler_errors += 1
            log.exception("event handler failed resource=%s handler=%s", self.name, fn)
