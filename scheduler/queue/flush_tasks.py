"""The queue's periodic flushes as tasks, and the queue's lifecycle (new, running,
closed) that starts and stops them."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)


class QueueState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


class QueueClosedError(RuntimeError):
    """run() on a closed queue, or run() twice."""


# (task name, flush, period in seconds)
Flush = tuple[str, Callable[[], int], float]


class FlushTasks:
    def __init__(self) -> None:
        self.state = QueueState.NEW
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, flushes: Sequence[Flush]) -> None:
        """Start one task per flush (needs a running event loop)."""
        if self.state is not QueueState.NEW:
            raise QueueClosedError(f"queue cannot run in state {self.state.value}")
        self.state = QueueState.RUNNING
        self._tasks = [
            asyncio.create_task(_periodic(flush, period), name=name)
            for name, flush, period in flushes
        ]

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)

    def close(self) -> bool:
        """Cancel the tasks; False if already closed."""
        if self.state is QueueState.CLOSED:
            return False
        self.state = QueueState.CLOSED
        for task in self._tasks:
            task.cancel()
        return True


async def _periodic(flush: Callable[[], int], interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            flush()
        except Exception:  # a bug in one flush must not stop the queue
            log.exception("queue flush failed flush=%s", flush.__name__)
