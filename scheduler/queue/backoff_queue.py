"""backoffQ: pods that failed recently, ordered by when their backoff expires
(``timestamp + initial * 2^(attempts-1)``, capped at the maximum), as upstream's
backoff_queue.go."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic

from scheduler.clock import Clock
from scheduler.queue.heap import KeyedHeap
from scheduler.queue.pod_info import P, QueuedPodInfo, backoff_duration


class BackoffQueue(Generic[P]):
    def __init__(self, initial: float, maximum: float, clock: Clock) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError("need 0 < pod_initial_backoff <= pod_max_backoff")
        self._initial = initial
        self._maximum = maximum
        self._clock = clock
        self._heap: KeyedHeap[QueuedPodInfo[P]] = KeyedHeap(
            lambda i: i.uid, lambda a, b: self.expiry(a) < self.expiry(b)
        )

    def __len__(self) -> int:
        return len(self._heap)

    def __contains__(self, uid: object) -> bool:
        return uid in self._heap

    def __iter__(self) -> Iterator[QueuedPodInfo[P]]:
        return iter(self._heap)

    def get(self, uid: str) -> QueuedPodInfo[P] | None:
        return self._heap.get(uid)

    def push(self, info: QueuedPodInfo[P]) -> None:
        self._heap.push(info)

    def remove(self, uid: str) -> QueuedPodInfo[P] | None:
        return self._heap.remove(uid)

    def expiry(self, info: QueuedPodInfo[P]) -> float:
        return info.timestamp + backoff_duration(info.attempts, self._initial, self._maximum)

    def backing_off(self, info: QueuedPodInfo[P]) -> bool:
        return self.expiry(info) > self._clock.now()

    def pop_completed(self) -> Iterator[QueuedPodInfo[P]]:
        """Take out, one by one, the pods whose backoff has expired, earliest first."""
        now = self._clock.now()
        while True:
            head = self._heap.peek()
            if head is None or self.expiry(head) > now:
                return
            self._heap.pop()
            yield head
