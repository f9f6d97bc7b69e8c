"""The admission of explain's evaluations: one at a time, a short wait queue, 429 beyond
it, an answer per pod kept a few seconds, and a budget of the event loop's time.

An evaluation (explain's dry run) runs on the scheduler's one event loop, beside the
scheduling loop and the lease renewal. So that they never wait on it:

- **one at a time**: a second evaluation waits for the first to end (FIFO);
- **a small wait queue**: at most `queue_size` evaluations wait; a request beyond it is
  refused at once (`Busy`, HTTP 429 with Retry-After, as the apiserver's
  priority-and-fairness filter refuses: k8s.io/apiserver@v0.37.2
  pkg/server/filters/priority-and-fairness.go tooManyRequests);
- **one evaluation per question**: requests for a pod whose evaluation is running or
  waiting join it (they take no place in the queue), and a finished answer is served
  again for `ttl` seconds, keyed by the pod's uid and resourceVersion (a changed pod is a
  new question), so a burst of the same question costs one evaluation;
- **a share of the loop**: after an evaluation that kept the event loop busy for t
  seconds of CPU (its synchronous steps; the evaluator measures them), the next one starts no
  sooner than t * (1 - share) / share later, so explain takes at most `share` of the
  loop's time however many callers keep asking; the caller of that evaluation is
  answered at once, the pause only delays the next.

Everything runs on the event loop: no lock of the threading kind, no task of its own
(the pause ends in a timer callback).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Busy", "EvaluationGate", "Timed"]

T = TypeVar("T")

# at most this many evaluations wait: at the 5% share a waiting caller waits about
# 20 times the evaluations ahead of it (0.5-1 s each at 5000 nodes)
DEFAULT_QUEUE_SIZE = 4
DEFAULT_TTL = 3.0
# explain may hold the event loop at most 5% of the time: with the HTTP handling of a
# burst of calls, the scheduling loop keeps 90% of its throughput (bench.explain_load)
DEFAULT_SHARE = 0.05
MAX_ANSWERS_KEPT = 1024


class Busy(Exception):
    """Refused: the wait queue is full. `retry_after`: whole seconds to wait."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"explain is busy: retry after {retry_after}s")
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Timed(Generic[T]):
    """An evaluation's answer and the event-loop time its synchronous steps took."""

    value: T
    busy: float


class EvaluationGate(Generic[T]):
    def __init__(
        self,
        *,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        ttl: float = DEFAULT_TTL,
        share: float = DEFAULT_SHARE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if queue_size < 0 or ttl < 0 or not 0 < share <= 1:
            raise ValueError("queue_size >= 0, ttl >= 0 and 0 < share <= 1 are required")
        self.queue_size = queue_size
        self.ttl = ttl
        self.share = share
        self._clock = clock
        self._turn = asyncio.Lock()  # FIFO: waiters acquire in arrival order
        self._waiting = 0
        self._in_flight: dict[Hashable, asyncio.Future[T]] = {}
        self._answers: OrderedDict[Hashable, tuple[float, T]] = OrderedDict()
        self._last_cycle = 0.0  # busy + pause of the last evaluation (Retry-After)
        self.evaluations = 0  # evaluations run (tests, the benchmark)

    @property
    def waiting(self) -> int:
        return self._waiting

    def cached(self, key: Hashable) -> T | None:
        kept = self._answers.get(key)
        if kept is None:
            return None
        if self._clock() >= kept[0]:
            del self._answers[key]
            return None
        return kept[1]

    async def run(self, key: Hashable, evaluate: Callable[[], Awaitable[Timed[T]]]) -> T:
        """The answer for `key`: kept, joined, or evaluated in turn. Raises Busy."""
        kept = self.cached(key)
        if kept is not None:
            return kept
        joined = self._in_flight.get(key)
        if joined is not None:
            return await asyncio.shield(joined)
        if self._turn.locked() and self._waiting >= self.queue_size:
            raise Busy(self.retry_after())
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            value = await self._evaluate_in_turn(key, evaluate)
        except BaseException as exc:
            if not future.done():
                # the joiners learn that this evaluation did not happen; they may retry
                future.set_exception(Busy(1) if isinstance(exc, asyncio.CancelledError) else exc)
                future.exception()  # retrieved: no "never retrieved" warning without joiners
            raise
        finally:
            del self._in_flight[key]
        future.set_result(value)
        return value

    async def _evaluate_in_turn(
        self, key: Hashable, evaluate: Callable[[], Awaitable[Timed[T]]]
    ) -> T:
        self._waiting += 1
        try:
            await self._turn.acquire()
        finally:
            self._waiting -= 1
        pause = 0.0
        try:
            timed = await evaluate()
            pause = timed.busy * (1 - self.share) / self.share
            self._last_cycle = timed.busy + pause
            self.evaluations += 1
            self._keep(key, timed.value)
            return timed.value
        finally:
            if pause > 0:
                asyncio.get_running_loop().call_later(pause, self._turn.release)
            else:
                self._turn.release()

    def _keep(self, key: Hashable, value: T) -> None:
        if self.ttl <= 0:
            return
        answers = self._answers
        answers[key] = (self._clock() + self.ttl, value)
        answers.move_to_end(key)
        while len(answers) > MAX_ANSWERS_KEPT:
            answers.popitem(last=False)

    def retry_after(self) -> int:
        """Whole seconds until a place in the queue is likely free (at least 1)."""
        return max(1, math.ceil(self._last_cycle * (self._waiting + 1)))
