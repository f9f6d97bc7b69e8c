"""Capped, jittered exponential backoff for reconnects and retries.

The defaults are client-go's reflector backoff (800ms doubling to 30s); the delay
resets to the initial value after `reset()` (the caller resets after a healthy run).
Randomness is injectable so tests see exact delays.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """delay(n) = min(maximum, initial * factor**n) * (1 + jitter * U[0, 1)), capped at
    `maximum` again after jitter."""

    def __init__(
        self,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1 or jitter < 0:
            raise ValueError("backoff needs 0 < initial <= maximum, factor >= 1, jitter >= 0")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._rand = rand
        self._attempts = 0

    @property
    def attempts(self) -> int:
        return self._attempts

    def next_delay(self) -> float:
        base = min(self.maximum, self.initial * self.factor**self._attempts)
        if base < self.maximum:  # stop counting once capped: no float overflow
            self._attempts += 1
        return min(self.maximum, base * (1.0 + self.jitter * self._rand()))

    def reset(self) -> None:
        self._attempts = 0
