"""scheduler.supervisor: a long-lived task that dies is logged with its traceback and
fails /healthz; ends during shutdown, and legitimate returns, do not."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from scheduler.supervisor import Supervisor
from tests.unit.helpers.serving import make_served


async def forever() -> None:
    await asyncio.Event().wait()


async def crash(error: Exception) -> None:
    await asyncio.sleep(0)
    raise error


async def test_a_task_that_raises_is_logged_with_its_traceback_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = Supervisor()
    guard.spawn("informer-pods", forever())
    task = guard.spawn("leader-election", crash(OverflowError("timestamp too large\nsecond")))
    await asyncio.gather(task, return_exceptions=True)
    problem = guard.healthz()
    assert problem == "task leader-election died: OverflowError: timestamp too large"
    record = next(r for r in caplog.records if "long-lived task died" in r.message)
    assert record.exc_info is not None and record.exc_info[0] is OverflowError
    for t in guard.tasks:
        t.cancel()


async def test_a_task_that_returns_early_is_a_death_unless_it_may() -> None:
    guard = Supervisor()

    async def done() -> None:
        return None

    a = guard.spawn("scheduling-loop", done())
    b = guard.spawn("leader-election", done(), may_return=True)
    await asyncio.gather(a, b)
    assert [d.name for d in guard.deaths] == ["scheduling-loop"]
    assert "returned while it should run until shutdown" in (guard.healthz() or "")


async def test_cancellation_is_a_death_only_outside_shutdown() -> None:
    guard = Supervisor()
    a = guard.spawn("queue-flush-backoff", forever())
    await asyncio.sleep(0)
    a.cancel()
    await asyncio.gather(a, return_exceptions=True)
    assert guard.healthz() == "task queue-flush-backoff died: cancelled outside shutdown"

    calm = Supervisor()
    tasks = [calm.spawn(f"informer-{i}", forever()) for i in range(3)]
    await asyncio.sleep(0)
    calm.begin_shutdown()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert calm.healthz() is None


async def test_watch_adopts_a_task_created_elsewhere_and_names_must_be_unique() -> None:
    guard = Supervisor()
    task = asyncio.create_task(forever(), name="event-recorder")
    guard.watch(task)
    with pytest.raises(ValueError, match="already running"):
        guard.spawn("event-recorder", forever())
    guard.begin_shutdown()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_dead_task_fails_healthz_on_the_health_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    guard = Supervisor()
    served = make_served(tmp_path)
    server = served.server
    server.add_health_check("background-tasks", guard.healthz)
    await server.start()
    caplog.set_level(logging.INFO, logger="scheduler.server")
    try:
        assert (await served.get("/healthz"))[0] == 200
        task = guard.spawn("informer-nodes", crash(RuntimeError("watch decoder bug")))
        await asyncio.gather(task, return_exceptions=True)
        status, body = await served.get("/healthz")
        assert status == 500
        # withheld from the public body, written to the log
        assert "[-]background-tasks failed: reason withheld" in body
        assert (
            "[-]background-tasks failed: task informer-nodes died: "
            "RuntimeError: watch decoder bug"
        ) in caplog.text
    finally:
        await server.stop()
