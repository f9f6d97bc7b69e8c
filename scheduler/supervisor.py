"""Every task the process runs, under one supervisor.

Two kinds:
- long-lived tasks, by name (`spawn`/`watch`): the informers, the scheduling loop, the
  leader elector, the event writer, the queue's flushes. Each runs for the life of the
  process; a death is logged and fails /healthz.
- short-lived tasks in named groups (`group`): the binding cycles, the preemption
  tasks, the status writes. A group tracks its tasks so shutdown can give them a grace
  period and cancel the rest (`TaskSet.drain`), in the order the app chooses.

The informers, the scheduling loop, the leader elector, the event writer, the queue's
flushes... each runs for the life of the process. asyncio keeps a task's exception to
itself until someone awaits it, so without a watcher a dead informer or elector is
silent: the process answers /healthz 200 and never schedules again (issue 10 saw a huge
leaseDuration kill the elector this way).

`Supervisor` watches each named long-lived task. A task that raises, or returns while it was
expected to run until shutdown, is logged with its traceback and recorded; `healthz()`
then reports it, so the liveness probe restarts the process, as kube-scheduler's
supervision of its goroutines ends in a restart (a panic exits the process). Cancellation
during shutdown is not a death: `begin_shutdown()` marks the point from which tasks may
end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["Supervisor", "TaskDeath", "TaskSet"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TaskDeath:
    name: str
    reason: str


class TaskSet:
    """Short-lived tasks of one kind (a bind per pod, a preemption per preemptor, a
    status write per pod). The owner starts them here; shutdown drains them. Not
    asyncio.TaskGroup: a task's failure cancels none of the others, and nothing awaits
    the set as a whole but `drain`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(list(self._tasks))

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        return list(self._tasks)

    async def drain(self, grace: float) -> int:
        """Let the running tasks finish for `grace` seconds, then cancel the rest and
        wait for them to unwind (each cancelled task cleans up after itself). Returns
        how many were cancelled."""
        if not self._tasks:
            return 0
        _, still = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in still:
            task.cancel()
        if still:
            await asyncio.gather(*still, return_exceptions=True)
        return len(still)


class Supervisor:
    def __init__(self) -> None:
        self._groups: dict[str, TaskSet] = {}
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._may_return: set[str] = set()
        self._deaths: list[TaskDeath] = []
        self._shutting_down = False

    def group(self, name: str) -> TaskSet:
        """The group `name` (created on first use)."""
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = TaskSet(name)
        return group

    def spawn(
        self, name: str, coro: Coroutine[Any, Any, Any], *, may_return: bool = False
    ) -> asyncio.Task[Any]:
        """Run `coro` as the task `name` and watch it. `may_return`: returning normally
        is a legitimate end (the elector returns when leadership ends)."""
        return self.watch(asyncio.create_task(coro, name=name), name, may_return=may_return)

    def watch(
        self, task: asyncio.Task[Any], name: str | None = None, *, may_return: bool = False
    ) -> asyncio.Task[Any]:
        """Watch a task someone else created (the queue's flushes, the event writer)."""
        key = name or task.get_name()
        if key in self._tasks and not self._tasks[key].done():
            raise ValueError(f"a guarded task named {key!r} is already running")
        self._tasks[key] = task
        if may_return:
            self._may_return.add(key)
        task.add_done_callback(lambda t: self._ended(key, t))
        return task

    def begin_shutdown(self) -> None:
        """From now on tasks may end (cancelled or returning) without being a death."""
        self._shutting_down = True

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        return list(self._tasks.values())

    @property
    def deaths(self) -> list[TaskDeath]:
        return list(self._deaths)

    def _ended(self, name: str, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            if not self._shutting_down:
                self._died(name, "cancelled outside shutdown", None)
            return
        exc = task.exception()
        if exc is not None:
            first_line = (str(exc).splitlines() or [""])[0]
            self._died(name, f"{type(exc).__name__}: {first_line}".rstrip(": "), exc)
        elif not self._shutting_down and name not in self._may_return:
            self._died(name, "returned while it should run until shutdown", None)

    def _died(self, name: str, reason: str, exc: BaseException | None) -> None:
        self._deaths.append(TaskDeath(name, reason))
        log.error("long-lived task died task=%s reason=%s", name, reason, exc_info=exc)

    def healthz(self) -> str | None:
        """None while every guarded task lives (or ended legitimately)."""
        if not self._deaths:
            return None
        return "; ".join(f"task {d.name} died: {d.reason}" for d in self._deaths)
