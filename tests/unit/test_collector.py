"""The scheduler process's collector policy: the youngest threshold raised, the collector
paused while the caches fill and the settled heap frozen once they have."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from scheduler.collector import GC_GEN0_THRESHOLD, paused_until_synced, tune_gc


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    saved = gc.get_threshold()
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    gc.set_threshold(*saved)
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_tune_gc_raises_gen0_and_keeps_older_generations() -> None:
    gc.set_threshold(700, 11, 13)
    tune_gc()
    assert gc.get_threshold() == (GC_GEN0_THRESHOLD, 11, 13)
    assert gc.isenabled()


async def _run(
    synced_after: float | None, ended_after: float | None, limit_s: float
) -> tuple[bool, list[bool]]:
    """Run paused_until_synced with the sync and the app's end scheduled as given and
    sample gc.isenabled() while it waits."""
    synced = asyncio.Event()
    ended: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    loop = asyncio.get_running_loop()
    if synced_after is not None:
        loop.call_later(synced_after, synced.set)
    if ended_after is not None:
        loop.call_later(ended_after, ended.set_result, None)
    seen: list[bool] = []

    async def sample() -> None:
        while True:
            seen.append(gc.isenabled())
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    try:
        return await paused_until_synced(synced, ended, limit_s=limit_s), seen
    finally:
        sampler.cancel()


def test_paused_while_the_caches_fill_then_collected_and_frozen() -> None:
    gc.enable()
    gc.unfreeze()
    synced, seen = asyncio.run(_run(synced_after=0.05, ended_after=None, limit_s=5.0))
    assert synced
    assert seen and not any(seen)  # never enabled while waiting
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


def test_the_app_ending_first_turns_the_collector_back_on_without_freezing() -> None:
    gc.enable()
    gc.unfreeze()
    synced, seen = asyncio.run(_run(synced_after=None, ended_after=0.05, limit_s=5.0))
    assert not synced
    assert seen and not any(seen)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_sync_past_the_limit_turns_the_collector_back_on() -> None:
    gc.enable()
    gc.unfreeze()
    synced, _ = asyncio.run(_run(synced_after=1.0, ended_after=None, limit_s=0.05))
    assert not synced
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    synced, _ = asyncio.run(_run(synced_after=0.02, ended_after=None, limit_s=5.0))
    assert synced
    assert not gc.isenabled()
