"""The scheduler process raises the collector's youngest threshold, and only that one."""

from __future__ import annotations

import gc

from scheduler.process import GC_GEN0_THRESHOLD, tune_gc


def test_tune_gc_raises_gen0_and_keeps_older_generations() -> None:
    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 11, 13)
        tune_gc()
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, 11, 13)
        assert gc.isenabled()
    finally:
        gc.set_threshold(*saved)
