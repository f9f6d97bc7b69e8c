"""A scheduler.clock.Clock that only moves when a test tells it to, so backoff, expiry and
flush timing are asserted exactly, never waited for."""

from __future__ import annotations


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
