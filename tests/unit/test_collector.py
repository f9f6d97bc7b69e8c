"""The scheduler process's collector policy: the youngest threshold raised, the collector
paused while the caches first fill, and the settled heap collected and frozen once."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from scheduler.collector import GC_GEN0_THRESHOLD, StartupPause, tune_gc


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    saved = gc.get_threshold()
    enabled = gc.isenabled()
    gc.unfreeze()
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


def test_paused_until_settled_then_collected_and_frozen_once() -> None:
    gc.enable()
    pause = StartupPause()
    pause.begin()
    assert not gc.isenabled()
    pause.settle()
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    gc.unfreeze()
    pause.settle()  # a second sync (a re-list) settles nothing
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()


def test_the_app_ending_first_turns_the_collector_back_on_without_freezing() -> None:
    gc.enable()
    pause = StartupPause()
    pause.begin()
    pause.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_sync_past_the_limit_turns_the_collector_back_on() -> None:
    gc.enable()
    pause = StartupPause(limit_s=0.02)
    pause.begin()
    asyncio.run(pause.expire())
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    # a sync after the limit still settles the heap, and leaves the collector on
    pause.settle()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    pause = StartupPause()
    pause.begin()
    pause.settle()
    assert not gc.isenabled()
