"""When a preemptor goes back to activeQ after its preemption task ended (steps 6 and 7
of the executor's contract).

At once after a success, a cancellation or a first failure; after consecutive failures
of the same preemptor each further re-activation waits longer (retry_initial * 2^(n-2),
at most retry_max), so a refusal that persists (an admission webhook, RBAC) is no retry
loop hammering the API server. The failure counts are forgotten after `horizon` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from scheduler.clock import Clock


class Reactivations:
    def __init__(self, clock: Clock, retry_initial: float, retry_max: float) -> None:
        self._clock = clock
        self._initial = retry_initial
        self._max = retry_max
        # preemptor uid -> (consecutive failed tasks, when the last one ended)
        self._failures: dict[str, tuple[int, float]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}  # delayed re-activations
        self._closed = False

    def delay_after(self, uid: str, succeeded: bool, cancelled: bool) -> float:
        """Seconds until the preemptor whose task just ended is re-activated."""
        if succeeded:
            self._failures.pop(uid, None)
            return 0.0
        if cancelled:
            return 0.0
        n = self._failures.get(uid, (0, 0.0))[0] + 1
        self._failures[uid] = (n, self._clock.now())
        if n < 2 or self._initial <= 0:
            return 0.0
        return float(min(self._initial * float(2 ** (n - 2)), self._max))

    def schedule(self, uid: str, delay: float, activate: Callable[[], None]) -> None:
        """`activate` now, or after `delay` seconds (replacing any pending one)."""
        self.cancel(uid)
        if delay > 0 and not self._closed:

            def fire() -> None:
                self._timers.pop(uid, None)
                activate()

            self._timers[uid] = asyncio.get_running_loop().call_later(delay, fire)
            return
        activate()

    def cancel(self, uid: str) -> None:
        timer = self._timers.pop(uid, None)
        if timer is not None:
            timer.cancel()

    def prune(self, horizon: float) -> None:
        for uid in [u for u, (_, t) in self._failures.items() if t < horizon]:
            del self._failures[uid]

    def close(self) -> None:
        """Shutdown: pending delayed re-activations are dropped; later ones run at once."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
