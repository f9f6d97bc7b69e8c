"""An injectable clock, so backoff, expiry and flush timing are tested exactly (the tests'
clock that only moves when told to is tests/unit/helpers/fake_clock.py)."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK: Clock = MonotonicClock()
