"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Only the leader schedules; followers keep their caches warm so a failover is fast.

- Acquire: every retryPeriod (jittered, factor 1.2 as client-go) read the Lease. It may
  be taken when it has no holder, is ours, or has not changed for its
  leaseDurationSeconds. "Not changed" is measured as client-go does: from the local
  monotonic time at which *we* last saw the record change, never from the remote
  renewTime, so clock skew between schedulers does not matter.
- Renew: every retryPeriod. When no renewal succeeded for renewDeadline (counted from
  the start of the last successful attempt, stricter than client-go's per-round
  deadline) we stop leading. renewDeadline < leaseDuration, so we have stopped before
  any other candidate can consider the Lease expired.
- Writes are optimistic: PUT with the read resourceVersion; a 409 means someone else
  wrote first, and the next round re-reads.
- Release (graceful stop): holderIdentity "" and leaseDurationSeconds 1, so a follower
  takes over on its next poll instead of waiting out the lease.
- Health: `healthz()` reports a problem when leader election is stuck for longer than
  leaseDuration + timeout (kube-scheduler's 20 s): the elector loop has not ticked, the
  leader has not renewed (upstream's HealthzAdaptor), or - beyond upstream, which ignores
  standbys - a candidate has not had one answer about the Lease from the API server
  (unreachable, 403 on a Lease the RBAC does not cover, ...). Such a standby could never
  take over; failing liveness makes it visible and restarts it with a fresh connection.
  A leader in that situation has already stepped down at renewDeadline.
- Fence (`holds_lease()`): the lease counts as surely held only while less than
  renewDeadline has passed, on the monotonic clock, since the START of the last
  successful acquisition or renewal. The API server wrote that renewal at or after its
  start, and another candidate waits a whole leaseDuration (> renewDeadline) after it
  sees the record change, so while the fence is open no one else can hold the Lease
  (clock rates being alike). Writes that only the leader may make (binds, victim
  DELETEs, pod status patches) check it right before they are sent (LeaseFence: the
  binding cycle, the preemption executor, the dispatcher after its rate limiter, and
  once more when the request holds its pooled connection, client.connection.LAST_CHECK);
  a closed fence wakes the renew loop (`nudge()`), which then steps down at once.
  Why beyond upstream: client-go's
  leaderelection package says itself that it does not guarantee that only one client
  acts as leader (no fencing, client-go tools/leaderelection/leaderelection.go): its
  IsLeader() only compares the observed holder, its renew loop gives up after a
  renewDeadline per round, and kube-scheduler's OnStoppedLeading exits the process
  (cmd/kube-scheduler/app/server.go); nothing checks the lease before a bind. A process
  frozen past its lease (SIGSTOP, a VM pause, a long GC) wakes with a backlog and, if a
  renewal was in flight, a success for a request sent before the freeze: until its
  renew loop runs again it still believes it leads, and every bind it sends races the
  new leader's (the fault case leader_pause measured 72 binding requests in 1.6 s, 5 of
  them accepted while the other replica held the Lease; issue 10). The monotonic clock
  keeps running across a freeze, so the fence is already closed on waking, before any
  other task runs.

Callbacks are synchronous and run on the event loop: on_started_leading once we lead,
on_stopped_leading once we no longer do (lost or released; not called if we never led),
on_new_leader whenever the observed holder changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import enum
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from scheduler.client.errors import ApiError, Conflict, NotFound
from scheduler.client.events import micro_time
from scheduler.clock import SYSTEM_CLOCK, Clock

__all__ = [
    "ElectorState",
    "LeaderElectionSettings",
    "LeaderElector",
    "LeaderRecord",
    "LeaseClient",
    "LeaseFence",
    "can_acquire",
]

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2


@dataclass(frozen=True, slots=True)
class LeaderElectionSettings:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    """seconds a follower waits after the last change before taking the lease."""
    renew_deadline: float = 10.0
    """seconds the leader keeps trying to renew before it gives up leading."""
    retry_period: float = 2.0
    """seconds between attempts to acquire or renew."""
    healthz_timeout: float = 20.0
    """extra seconds past lease_duration before a stalled loop is reported unhealthy."""

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*1.2")
        if self.retry_period <= 0:
            raise ValueError("retryPeriod must be positive")


class LeaseClient(Protocol):
    """The Lease calls the elector needs; the Dispatcher provides them."""

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]: ...

    async def update_lease(
        self, namespace: str, name: str, lease: dict[str, Any]
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class LeaderRecord:
    holder: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaderRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


def can_acquire(record: LeaderRecord, observed_time: float, now: float, identity: str) -> bool:
    """May `identity` write itself into the lease? Free, ours, or expired by the local
    observation time (the record's own leaseDurationSeconds, as client-go)."""
    if not record.holder or record.holder == identity:
        return True
    return observed_time + record.lease_duration_seconds <= now


class ElectorState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPED = "stopped"


class LeaseFence:
    """What a leader-only write asks right before it is sent: `open(operation)`.

    Always open without leader election. Closed when the elector does not surely hold
    the lease (LeaderElector.holds_lease; a follower never does); a closed check is
    counted (`on_closed`, the app's metric) and nudges a leader to step down now.
    Cheap: one clock read and a float comparison on the open path."""

    def __init__(
        self,
        elector: LeaderElector | None = None,
        on_closed: Callable[[str], None] | None = None,
    ) -> None:
        self.elector = elector
        self._on_closed = on_closed

    def held_until(self) -> float | None:
        """Until when (the elector's monotonic clock) the lease is surely held: the
        deadline of a leader-only write (a write sent under the lease must not commit
        after another replica could take it over). None without leader election."""
        elector = self.elector
        if elector is None:
            return None
        return elector.held_until

    def open(self, operation: str) -> bool:
        elector = self.elector
        if elector is None or elector.holds_lease():
            return True
        if self._on_closed is not None:
            self._on_closed(operation)
        if elector.is_leader:  # a follower has nothing to step down from
            elector.nudge()
        return False


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderElector:
    def __init__(
        self,
        client: LeaseClient,
        settings: LeaderElectionSettings,
        *,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        wall: Callable[[], dt.datetime] = _utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._client = client
        self.settings = settings
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._rand = rand
        self._state = ElectorState.CREATED
        self._leading = False
        self._observed: LeaderRecord | None = None
        self._observed_time = 0.0
        self._lease: dict[str, Any] | None = None
        self._last_renew = 0.0
        self._last_tick = clock.now()
        self._last_contact = clock.now()
        self._last_error = ""
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._leader = ""
        # monotonic time until which the lease is surely held (see holds_lease)
        self._held_until = 0.0

    # ---- public surface ----------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self._leading

    def holds_lease(self) -> bool:
        """True while we lead and the last successful acquisition or renewal STARTED
        less than renewDeadline ago (monotonic). Cheap: one clock read, one comparison;
        called right before every leader-only write."""
        return self._leading and self._clock.now() < self._held_until

    @property
    def held_until(self) -> float:
        """The monotonic time until which holds_lease() is true while we lead (0 when
        we do not)."""
        return self._held_until if self._leading else 0.0

    def nudge(self) -> None:
        """A writer found the fence closed: wake the renew loop now (it steps down when
        the deadline has passed) instead of at the end of its retry period."""
        self._wake.set()

    @property
    def leader(self) -> str:
        """The holder last observed ("" when free or unknown)."""
        return self._leader

    @property
    def state(self) -> ElectorState:
        return self._state

    @property
    def key(self) -> str:
        return f"{self.settings.namespace}/{self.settings.name}"

    def healthz(self) -> str | None:
        """None when healthy, else why not (for the server's /healthz check)."""
        if self._state is not ElectorState.RUNNING:
            return None
        s = self.settings
        limit = s.lease_duration + s.healthz_timeout
        # a candidate legitimately waits up to retryPeriod * (1 + 1.2) between attempts
        # (client-go's jitter), which may exceed leaseDuration when retryPeriod is close
        # to its bound (renewDeadline / 1.2): the loop checks allow for that wait
        loop_limit = max(s.lease_duration, s.retry_period * (1.0 + JITTER_FACTOR))
        loop_limit += s.healthz_timeout
        stalled = self._clock.now() - self._last_tick
        if stalled > loop_limit:
            return f"leader election loop for lease {self.key} has not run for {stalled:.0f}s"
        if self._leading and self._clock.now() - self._last_renew > limit:
            return f"failed election to renew leadership on lease {self.key}"
        silent = self._clock.now() - self._last_contact
        if not self._leading and silent > loop_limit:
            return (
                f"leader election has had no answer about lease {self.key} for {silent:.0f}s"
                f" (last error: {self._last_error or 'none'})"
            )
        return None

    def stop(self) -> None:
        """Ask `run()` to release the lease (if held) and return."""
        self._stop.set()

    async def run(self) -> None:
        """Acquire, then renew until stopped (release, return) or lost (return)."""
        if self._state is not ElectorState.CREATED:
            raise RuntimeError(f"leader elector is {self._state.value}; it runs once")
        self._state = ElectorState.RUNNING
        self._last_tick = self._last_contact = self._clock.now()
        try:
            if await self._acquire():
                await self._renew()
            if self._stop.is_set():
                await self._release()
        except asyncio.CancelledError:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(self._release())
            raise
        finally:
            self._set_leading(False)
            self._state = ElectorState.STOPPED

    # ---- the rounds --------------------------------------------------------------
    async def _pause(self, delay: float) -> bool:
        """Sleep up to `delay`; True when stop() was called meanwhile."""
        if self._stop.is_set():
            return True
        if self._wake.is_set():
            self._wake.clear()
            return False
        sleeper = asyncio.ensure_future(self._sleep(delay))
        stopper = asyncio.ensure_future(self._stop.wait())
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, stopper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            stopper.cancel()
            waker.cancel()
        self._wake.clear()
        return self._stop.is_set()

    async def _acquire(self) -> bool:
        log.info(
            "attempting to acquire leader lease lease=%s identity=%s",
            self.key,
            self.settings.identity,
        )
        while not self._stop.is_set():
            self._last_tick = self._clock.now()
            started = self._clock.now()
            if await self._attempt(self.settings.renew_deadline):
                self._renewed(started)
                log.info(
                    "acquired leader lease lease=%s identity=%s", self.key, self.settings.identity
                )
                self._set_leading(True)
                return True
            delay = self.settings.retry_period * (1.0 + JITTER_FACTOR * self._rand())
            if await self._pause(delay):
                return False
        return False

    async def _renew(self) -> None:
        s = self.settings
        while True:
            # a renewal answered long after it was sent (the process was frozen) has
            # left the fence closed: no pause, step down now
            if self.holds_lease() and await self._pause(s.retry_period):
                return
            while True:
                self._last_tick = self._clock.now()
                remaining = self._last_renew + s.renew_deadline - self._clock.now()
                if remaining <= 0:
                    log.warning(
                        "failed to renew leader lease in time, stepping down lease=%s", self.key
                    )
                    self._set_leading(False)
                    return
                started = self._clock.now()
                if await self._attempt(remaining):
                    self._renewed(started)
                    break
                if self._observed and self._observed.holder not in ("", s.identity):
                    log.warning(
                        "leader lease taken by another lease=%s holder=%s",
                        self.key,
                        self._observed.holder,
                    )
                    self._set_leading(False)
                    return
                if await self._pause(min(s.retry_period, max(0.0, remaining))):
                    return

    def _renewed(self, started: float) -> None:
        """A successful acquisition or renewal that was sent at `started`."""
        self._last_renew = started
        self._held_until = started + self.settings.renew_deadline

    async def _attempt(self, limit: float) -> bool:
        started = self._clock.now()
        try:
            async with asyncio.timeout(limit):
                done = await self._try_acquire_or_renew()
        except TimeoutError:
            self._last_error = f"no answer within {limit:.1f}s"
            log.warning("leader lease call timed out lease=%s", self.key)
        except ApiError as exc:
            self._last_error = str(exc)
            log.warning("leader lease call failed lease=%s error=%s", self.key, exc)
        else:
            # an answer, even "taken by another" or a 409: the API server is reachable
            self._last_contact = started
            return done
        return False

    def _observe(self, lease: dict[str, Any]) -> LeaderRecord:
        record = LeaderRecord.from_lease(lease)
        if record != self._observed:
            self._observed = record
            self._observed_time = self._clock.now()
        self._lease = lease
        if record.holder != self._leader:
            self._leader = record.holder
            if record.holder and self._on_new_leader is not None:
                self._call(self._on_new_leader, record.holder)
        return record

    async def _try_acquire_or_renew(self) -> bool:
        s = self.settings
        now = micro_time(self._wall())
        try:
            lease = await self._client.get_lease(s.namespace, s.name)
        except NotFound:
            record = LeaderRecord(s.identity, round(s.lease_duration), now, now, 0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "spec": record.spec(),
            }
            try:
                created = await self._client.create_lease(s.namespace, body)
            except Conflict:  # AlreadyExists: another candidate was first
                return False
            self._observe(created)
            return True
        record = self._observe(lease)
        if not can_acquire(record, self._observed_time, self._clock.now(), s.identity):
            return False
        if record.holder == s.identity:
            acquire_time, transitions = record.acquire_time, record.transitions
        else:
            acquire_time, transitions = now, record.transitions + 1
        mine = LeaderRecord(s.identity, round(s.lease_duration), acquire_time, now, transitions)
        try:
            updated = await self._client.update_lease(
                s.namespace, s.name, {**lease, "spec": mine.spec()}
            )
        except Conflict:
            return False
        self._observe(updated)
        return True

    async def _release(self) -> None:
        if not self._leading or self._lease is None or self._observed is None:
            return
        s = self.settings
        now = micro_time(self._wall())
        released = LeaderRecord("", 1, now, now, self._observed.transitions)
        try:
            async with asyncio.timeout(s.renew_deadline):
                updated = await self._client.update_lease(
                    s.namespace, s.name, {**self._lease, "spec": released.spec()}
                )
            self._observe(updated)
            log.info("released leader lease lease=%s identity=%s", self.key, s.identity)
        except (ApiError, TimeoutError) as exc:
            log.warning("could not release leader lease lease=%s error=%s", self.key, exc)
        self._set_leading(False)

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        callback = self._on_started if leading else self._on_stopped
        if callback is not None:
            self._call(callback)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("leader election callback failed lease=%s", self.key)
