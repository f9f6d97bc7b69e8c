"""PreemptionPolicy status, written by the leader only.

Every replica keeps the policies in memory (a follower's evaluator must be ready the
moment it leads), but only the leader writes `status`: observedGeneration, the Ready
condition (with lastTransitionTime), inForceGeneration and the counters. Writes are
merge patches of the status subresource, coalesced: a burst of counter changes becomes
one write per policy per `interval`. A follower that becomes leader writes every policy
once (its own view). A write that fails is counted (`result` label) and retried at the
next round, after a delay doubling per failed round (at most 10 s); a policy deleted
meanwhile (NotFound) is dropped.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from scheduler.metrics import PolicyMetrics
from scheduler.policy.spec import GROUP, PLURAL, VERSION
from scheduler.policy.store import PolicyState, PolicyStore
from scheduler.timestamps import rfc3339

__all__ = ["PolicyStatusWriter", "status_body"]

log = logging.getLogger(__name__)

MAX_RETRY_DELAY = 10.0

# (path, merge patch) -> None; raises on failure. LookupError-like NotFound is told
# apart by `is_not_found`.
Patch = Callable[[str, dict[str, Any]], Awaitable[Any]]


def _now() -> str:
    return rfc3339(dt.datetime.now(dt.UTC))


def status_body(state: PolicyState, transition_time: str) -> dict[str, Any]:
    condition = {
        "type": "Ready",
        "status": "True" if state.ready else "False",
        "reason": "InForce" if state.ready else "Invalid",
        "message": state.message,
        "observedGeneration": state.generation,
        "lastTransitionTime": transition_time,
    }
    status: dict[str, Any] = {
        "observedGeneration": state.generation,
        "conditions": [condition],
        "victimsChosen": state.victims_chosen,
        "preemptionsRefused": state.preemptions_refused,
    }
    if state.in_force_generation is not None:
        status["inForceGeneration"] = state.in_force_generation
    return {"status": status}


class PolicyStatusWriter:
    def __init__(
        self,
        store: PolicyStore,
        patch: Patch,
        is_leader: Callable[[], bool],
        is_not_found: Callable[[BaseException], bool],
        *,
        interval: float = 0.2,
        metrics: PolicyMetrics | None = None,
    ) -> None:
        self._store = store
        self._patch = patch
        self._is_leader = is_leader
        self._is_not_found = is_not_found
        self._interval = interval
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._written: dict[str, dict[str, Any]] = {}
        self._transition: dict[str, tuple[bool, str]] = {}
        self._failures = 0
        self.writes = (metrics if metrics is not None else PolicyMetrics()).status_writes

    def mark(self, name: str) -> None:
        """The policy's state changed (store.on_change)."""
        self._dirty.add(name)
        self._wake.set()

    def mark_all(self) -> None:
        """Leadership was just taken: write every policy's status once."""
        self._written.clear()
        self._dirty.update(self._store.names())
        self._wake.set()

    def _body(self, name: str, state: PolicyState) -> dict[str, Any]:
        seen = self._transition.get(name)
        if seen is None or seen[0] != state.ready:
            seen = (state.ready, _now())
            self._transition[name] = seen
        return status_body(state, seen[1])

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._is_leader():
                continue  # kept dirty: written when (if) this replica leads
            names, self._dirty = sorted(self._dirty), set()
            failed = False
            for name in names:
                failed = not await self._write(name) or failed
            # coalesce: changes arriving meanwhile are written together next round; a
            # refusal that persists (RBAC, a webhook) is retried ever more slowly
            self._failures = self._failures + 1 if failed else 0
            delay = self._interval * (2 ** min(self._failures, 6)) if failed else self._interval
            await asyncio.sleep(min(delay, MAX_RETRY_DELAY) if failed else delay)

    async def _write(self, name: str) -> bool:
        """False when the write failed (it stays dirty)."""
        state = self._store.state(name)
        if state is None:
            self._written.pop(name, None)
            self._transition.pop(name, None)
            return True
        body = self._body(name, state)
        if self._written.get(name) == body:
            return True
        path = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{name}/status"
        try:
            await self._patch(path, body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._is_not_found(exc):
                self.writes.labels(result="not_found").inc()
                return True
            self.writes.labels(result="error").inc()
            log.warning("PreemptionPolicy %s status write failed: %s", name, exc)
            self._dirty.add(name)  # retried at the next round
            self._wake.set()
            return False
        self.writes.labels(result="success").inc()
        self._written[name] = body
        return True
