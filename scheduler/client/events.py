"""EventRecorder: fire-and-forget events.k8s.io/v1 Events, aggregated into series.

`event()` is synchronous and never blocks or raises: it appends to a bounded buffer
that one background task writes through the dispatcher.

When a burst overflows the buffer something must give, and it is never silent: every
event that will not reach the API server is counted (`on_dropped(reason)`, the app's
scheduler_events_dropped_total{reason}) and logged at most every `drop_log_interval`
seconds with the counts since the last line. What gives first is a repeat, never a
pod's first event: the buffer keeps "first" writes (the first Event about an object)
apart from repeats (a series' second occurrence, or a new series about an object that
already has an Event). A full buffer evicts the oldest repeat; only when it holds first
events alone is the oldest first event dropped. An evicted series patch loses nothing
(the periodic flush still reports the count); an evicted create is a lost event, counted,
and its series forgotten so a later occurrence starts afresh.

A write the API server refuses (4xx, e.g. 404 when the namespace is gone) is dropped at
once and its series forgotten, as client-go abandons a rejected Event; the periodic
flush never resends it. Retryable failures were already retried by the dispatcher.

Each Event names the profile that reports it: upstream gives every profile a recorder of
its own whose reportingController is the profile's schedulerName
(pkg/scheduler/profile/profile.go newProfile), so callers pass `controller=` (the pod's
profile). One buffer and one writer serve every profile.

Repeats are aggregated as client-go's tools/events recorder does: events are
"isomorphic" when regarding object, related object, type, reason, action and reporting
controller match (client-go tools/events/event_broadcaster.go getKey)
(the note may differ, so "0/5 nodes are available ..." storms fold into one object).
The first is created; the second patches `series` {count: 2, lastObservedTime} at once;
later ones only bump the count in memory, and the series is patched every
`series_interval` while it grows. A series not seen for `series_expiry` (upstream's 6
minutes) is forgotten, so the next occurrence creates a fresh Event. Patching a series
whose Event is gone (dropped from the buffer, expired by the apiserver's TTL) re-creates
it with the series.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from scheduler.client.errors import ApiError, NotFound
from scheduler.clock import SYSTEM_CLOCK, Clock

__all__ = [
    "NORMAL",
    "WARNING",
    "EventAggregator",
    "EventApi",
    "EventRecorder",
    "ObjectRef",
    "RecorderStatistics",
    "SeriesEntry",
    "build_event",
    "micro_time",
    "pod_ref",
]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
NOTE_MAX_BYTES = 1024  # events.k8s.io validation limit
NAME_MAX = 253


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The regarding (or related) object of an Event. As client-go's
    reference.GetReference, it carries the object's resourceVersion, which is part of
    the isomorphic key: events about one pod aggregate into a series only while the pod
    is unchanged; after any update of the pod the next one is a new Event, as upstream's."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""

    def as_dict(self) -> dict[str, str]:
        ref = {"kind": self.kind, "name": self.name, "apiVersion": self.api_version}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.uid:
            ref["uid"] = self.uid
        if self.resource_version:
            ref["resourceVersion"] = self.resource_version
        return ref


def pod_ref(namespace: str, name: str, uid: str = "", resource_version: str = "") -> ObjectRef:
    return ObjectRef("Pod", namespace, name, uid, resource_version=resource_version)


class EventApi(Protocol):
    """The API calls the recorder writes events with; the Dispatcher is one."""

    async def create_event(self, event: dict[str, Any]) -> dict[str, Any]: ...

    async def patch_event(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]: ...


# regarding, type, reason, action, reporting controller, related
EventKey = tuple[ObjectRef, str, str, str, str, ObjectRef | None]


def micro_time(moment: dt.datetime) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _truncate_bytes(text: str, limit: int) -> str:
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[:limit].decode(errors="ignore")


@dataclass(slots=True)
class SeriesEntry:
    """One aggregated Event: created once, then its series count grows."""

    key: EventKey
    name: str
    namespace: str
    note: str
    first_time: dt.datetime
    last_time: dt.datetime
    last_seen: float  # monotonic, for expiry
    count: int = 1
    sent_count: int = 0  # the count the apiserver has last been told


class EventAggregator:
    """Pure bookkeeping for event series (no I/O), clock-injected for tests."""

    def __init__(self, series_expiry: float = 360.0) -> None:
        self.series_expiry = series_expiry
        self._entries: dict[EventKey, SeriesEntry] = {}
        self._per_object: dict[ObjectRef, int] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def observe(
        self, key: EventKey, note: str, now: float, wall: dt.datetime
    ) -> tuple[Literal["create", "patch", "count"], SeriesEntry]:
        """Record one occurrence: "create" for a new series, "patch" for its second
        occurrence (sent at once), "count" for later ones (flushed periodically)."""
        entry = self._entries.get(key)
        if entry is not None and now - entry.last_seen > self.series_expiry:
            self.forget(entry)
            entry = None
        if entry is None:
            regarding = key[0]
            entry = SeriesEntry(
                key=key,
                name=self._name(regarding, wall),
                namespace=regarding.namespace or "default",
                note=note,
                first_time=wall,
                last_time=wall,
                last_seen=now,
            )
            self._entries[key] = entry
            self._per_object[regarding] = self._per_object.get(regarding, 0) + 1
            return "create", entry
        entry.count += 1
        entry.last_time = wall
        entry.last_seen = now
        entry.note = note
        return ("patch" if entry.count == 2 else "count"), entry

    def series_about(self, regarding: ObjectRef) -> int:
        """How many live series are about this object."""
        return self._per_object.get(regarding, 0)

    def forget(self, entry: SeriesEntry) -> None:
        """Drop a series (expired, or its Event will never exist): a later occurrence
        creates a fresh Event."""
        if self._entries.get(entry.key) is not entry:
            return
        del self._entries[entry.key]
        regarding = entry.key[0]
        left = self._per_object.get(regarding, 0) - 1
        if left > 0:
            self._per_object[regarding] = left
        else:
            self._per_object.pop(regarding, None)

    def _name(self, regarding: ObjectRef, wall: dt.datetime) -> str:
        # upstream: "<regarding name>.<unix nanos in hex>"; a sequence keeps two events
        # in the same nanosecond apart.
        nanos = int(wall.timestamp() * 1e9) + next(self._seq)
        suffix = f".{nanos:x}"
        return regarding.name[: NAME_MAX - len(suffix)] + suffix

    def due(self) -> list[SeriesEntry]:
        """Series whose count grew since the apiserver last heard of it."""
        return [e for e in self._entries.values() if e.count > max(e.sent_count, 1)]

    def expire(self, now: float) -> int:
        stale = [e for e in self._entries.values() if now - e.last_seen > self.series_expiry]
        for entry in stale:
            self.forget(entry)
        return len(stale)


def build_event(entry: SeriesEntry, reporting_instance: str) -> dict[str, Any]:
    regarding, type_, reason, action, reporting_controller, related = entry.key
    event: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": entry.name, "namespace": entry.namespace},
        "eventTime": micro_time(entry.first_time),
        "reportingController": reporting_controller,
        "reportingInstance": reporting_instance[:128],
        "action": action[:128],
        "reason": reason[:128],
        "type": type_,
        "note": _truncate_bytes(entry.note, NOTE_MAX_BYTES),
        "regarding": regarding.as_dict(),
    }
    if related is not None:
        event["related"] = related.as_dict()
    if entry.count > 1:
        event["series"] = _series(entry)
    return event


def _series(entry: SeriesEntry) -> dict[str, Any]:
    return {"count": entry.count, "lastObservedTime": micro_time(entry.last_time)}


@dataclass(frozen=True, slots=True)
class RecorderStatistics:
    buffered: int
    series: int
    created: int
    patched: int
    dropped: int
    failed: int


@dataclass(slots=True)
class _Op:
    kind: Literal["create", "patch"]
    entry: SeriesEntry


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# reasons of scheduler_events_dropped_total
DROP_BUFFER_FULL = "buffer_full"
DROP_REJECTED = "rejected"
DROP_FAILED = "failed"
DROP_STOPPED = "stopped"


class EventRecorder:
    """Queue events for the API; `start()` the writer task, `await stop()` at shutdown."""

    def __init__(
        self,
        sink: EventApi,
        *,
        reporting_instance: str,
        reporting_controller: str | None = None,
        buffer_size: int = 1000,
        concurrency: int = 16,
        series_interval: float = 30.0,
        series_expiry: float = 360.0,
        drop_log_interval: float = 10.0,
        clock: Clock = SYSTEM_CLOCK,
        wall: Callable[[], dt.datetime] = _utcnow,
        on_dropped: Callable[[str], None] | None = None,
    ) -> None:
        if buffer_size < 1:
            raise ValueError("buffer_size must be >= 1")
        self._sink = sink
        # the controller of events that name none; the scheduler sets none, so an event
        # without its profile is refused rather than sent under another profile's name
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance
        # first events (the first Event about an object) and repeats, each in order
        self._firsts: deque[_Op] = deque()
        self._repeats: deque[_Op] = deque()
        self._buffer_size = buffer_size
        # one write at a time capped the recorder near 1/latency events per second, below
        # the bind rate: the buffer filled and Scheduled events were dropped (242 of 1001
        # written in a 500-node benchmark). Writes now overlap, one per series at a time.
        self._concurrency = max(1, concurrency)
        self._series_interval = series_interval
        self._aggregator = EventAggregator(series_expiry)
        self._clock = clock
        self._wall = wall
        self._on_dropped = on_dropped
        self._drop_log_interval = drop_log_interval
        self._unlogged: dict[str, int] = {}
        self._last_drop_log = float("-inf")
        # set when there is work (or a stop); the writer's idle wait is a future and a
        # timer handle, not asyncio.wait_for (a task and more loop passes per wait: in
        # the arrival benchmark the writer goes idle after every Scheduled event)
        self._woken = False
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_flush = clock.now()
        self._created = self._patched = self._dropped = self._failed = 0

    # ---- the caller's side: never blocks -------------------------------------------
    def event(
        self,
        regarding: ObjectRef,
        type: str,
        reason: str,
        action: str,
        note: str,
        *,
        controller: str | None = None,
        related: ObjectRef | None = None,
    ) -> None:
        """`controller`: the reportingController (the pod's profile); `related`: the
        other object involved (a preemptor for its victims' Preempted events)."""
        if type not in (NORMAL, WARNING):
            raise ValueError(f"event type must be Normal or Warning, not {type!r}")
        reporting = controller or self.reporting_controller
        if not reporting:
            raise ValueError(f"event {reason!r} names no reporting controller")
        if self._closed:
            self._drop(DROP_STOPPED, reason)
            return
        key: EventKey = (regarding, type, reason, action, reporting, related)
        what, entry = self._aggregator.observe(key, note, self._clock.now(), self._wall())
        if what == "create":
            first = self._aggregator.series_about(regarding) == 1
            self._push(_Op("create", entry), first)
        elif what == "patch":
            self._push(_Op("patch", entry), False)

    def _buffered(self) -> int:
        return len(self._firsts) + len(self._repeats)

    def _push(self, op: _Op, first: bool) -> None:
        if self._buffered() >= self._buffer_size:
            if self._repeats:
                self._evict(self._repeats.popleft())
            elif not first:
                self._evict(op)  # the buffer holds first events only: they win
                return
            else:
                self._evict(self._firsts.popleft())
        (self._firsts if first else self._repeats).append(op)
        self._wake()

    def _evict(self, op: _Op) -> None:
        if op.kind == "patch":
            return  # the series lives on: the periodic flush reports its count
        self._aggregator.forget(op.entry)
        self._drop(DROP_BUFFER_FULL, op.entry.key[2])

    def _drop(self, why: str, event_reason: str) -> None:
        """One event that will not reach the API server: count it, log (rate-limited)."""
        self._dropped += 1
        if self._on_dropped is not None:
            self._on_dropped(why)
        self._unlogged[why] = self._unlogged.get(why, 0) + 1
        now = self._clock.now()
        if now - self._last_drop_log >= self._drop_log_interval:
            self._last_drop_log = now
            counts = " ".join(f"{k}={v}" for k, v in sorted(self._unlogged.items()))
            self._unlogged.clear()
            log.warning(
                "events dropped since the last report %s last_reason=%s total=%d",
                counts,
                event_reason,
                self._dropped,
            )

    def statistics(self) -> RecorderStatistics:
        return RecorderStatistics(
            buffered=self._buffered(),
            series=len(self._aggregator),
            created=self._created,
            patched=self._patched,
            dropped=self._dropped,
            failed=self._failed,
        )

    # ---- the writer task -----------------------------------------------------------
    def start(self) -> asyncio.Task[None]:
        if self._task is not None:
            raise RuntimeError("EventRecorder already started")
        self._task = asyncio.create_task(self._run(), name="event-recorder")
        return self._task

    async def stop(self, grace: float = 5.0) -> None:
        """Stop taking events, write what is buffered (and the grown series) for up to
        `grace` seconds, then stop the writer. What is still buffered then is counted
        as dropped."""
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            self._wake()
            try:
                await asyncio.wait_for(asyncio.shield(task), grace)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for queue in (self._firsts, self._repeats):
            while queue:
                op = queue.popleft()
                if op.kind == "create":
                    self._drop(DROP_STOPPED, op.entry.key[2])

    def _next_batch(self) -> list[_Op]:
        """Up to `concurrency` ops, first events before repeats, one per series (a
        series' create and patch stay in order)."""
        batch: list[_Op] = []
        series: set[int] = set()
        for queue in (self._firsts, self._repeats):
            while queue and len(batch) < self._concurrency:
                entry_id = id(queue[0].entry)
                if entry_id in series:
                    break
                series.add(entry_id)
                batch.append(queue.popleft())
        return batch

    async def _run(self) -> None:
        while True:
            if not self._buffered():
                if self._closed:
                    await self.flush_series()
                    return
                await self._idle(
                    max(0.0, self._last_flush + self._series_interval - self._clock.now())
                )
            if self._buffered():
                batch = self._next_batch()
                if len(batch) == 1:
                    await self._send(batch[0])
                else:
                    await asyncio.gather(*(self._send(op) for op in batch))
            if self._clock.now() - self._last_flush >= self._series_interval:
                await self.flush_series()

    def _wake(self) -> None:
        self._woken = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _idle(self, seconds: float) -> None:
        """Until `_wake()` or `seconds` pass, whichever comes first."""
        if self._woken:
            self._woken = False
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(seconds, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
            self._woken = False

    async def flush_series(self) -> None:
        """Patch every series that grew, and forget expired ones."""
        self._last_flush = self._clock.now()
        for entry in self._aggregator.due():
            await self._send(_Op("patch", entry))
        self._aggregator.expire(self._clock.now())

    async def _send(self, op: _Op) -> None:
        entry = op.entry
        try:
            if op.kind == "create":
                count = entry.count
                await self._sink.create_event(build_event(entry, self.reporting_instance))
                entry.sent_count = max(entry.sent_count, count)
                self._created += 1
                return
            count = entry.count
            if count <= entry.sent_count:
                return
            if entry.sent_count == 0:
                return  # its create is still buffered (and will carry the count) or lost
            try:
                await self._sink.patch_event(
                    entry.namespace, entry.name, {"series": _series(entry)}
                )
                self._patched += 1
            except NotFound:
                await self._sink.create_event(build_event(entry, self.reporting_instance))
                self._created += 1
            entry.sent_count = max(entry.sent_count, count)
        except asyncio.CancelledError:
            raise
        except ApiError as exc:
            self._failed += 1
            log.warning(
                "event not written reason=%s regarding=%s/%s error=%s",
                entry.key[2],
                entry.namespace,
                entry.key[0].name,
                exc,
            )
            if not exc.transient:
                # refused (404 namespace gone, 403, 422...): resending cannot help
                self._aggregator.forget(entry)
                if entry.sent_count == 0 or op.kind == "patch":
                    self._drop(DROP_REJECTED, entry.key[2])
            elif entry.sent_count == 0:
                self._aggregator.forget(entry)
                self._drop(DROP_FAILED, entry.key[2])
        except Exception:
            self._failed += 1
            self._aggregator.forget(entry)
            log.exception("event writer failed reason=%s", entry.key[2])
            self._drop(DROP_FAILED, entry.key[2])
