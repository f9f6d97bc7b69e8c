"""The scheduler process's policy for CPython's cyclic garbage collector.

Two decisions, both for the process only (an app run inside a test process leaves the
collector alone):

- the youngest generation's threshold is raised for the whole run (`tune_gc`);
- during the first sync of the informers the collector is paused, and once the caches
  are filled the heap is collected once and frozen (`StartupPause`).

Why the second: the first LIST of a large cluster builds hundreds of thousands of
long-lived records in a few seconds. Each full collection walks every tracked object,
and CPython starts one whenever the objects that survived since the last one exceed a
quarter of the old generation, so a heap growing from nothing is walked again and again
while it fills (about 24 us of collector CPU per pod offline, several seconds at 150,000
pods). The LIST's own garbage (decoded pages) is freed by reference counting, so little
is lost by pausing. Freezing afterwards moves the settled heap (modules, plugins, the
records of the first LIST) out of every later collection: objects in it are still freed
by reference counting when they go away, only a reference cycle among them would stay.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger(__name__)

# The cyclic collector's youngest-generation threshold. CPython's default (700 net
# container allocations) runs a collection every few watch events and scheduling cycles;
# the scheduler allocates thousands of short-lived dicts and lists per pod (decoded watch
# events, request bodies), nearly all freed by reference counting, so those collections
# find little garbage. Measured on a 500-node cluster with 1500 pods arriving at 100/s:
# about 500 collections and 0.4 s of collector CPU at the default against 7 collections
# and 0.1 s at this threshold. The older generations keep their default ratios.
GC_GEN0_THRESHOLD = 50_000

# The longest the collector stays paused while the caches fill. A sync that takes longer
# (an API server that refuses or is down, informers retrying) must not run for long with
# no collection at all: the retries' garbage (exceptions and their frames) is cyclic.
SYNC_PAUSE_LIMIT_S = 120.0


def tune_gc() -> None:
    """Raise the youngest generation's threshold (see GC_GEN0_THRESHOLD); collection stays
    on, so cyclic garbage is still reclaimed, only in fewer, larger passes."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


class StartupPause:
    """The collector paused from the process's start until the caches are first synced.

    `begin()` at start; `settle()` when every informer has listed (the app calls it
    before it campaigns for the lease or schedules anything, so the one collection does
    not land on a new leader's first cycles): the collector is turned back on, the heap
    collected once and frozen. `expire()` turns it back on after `limit_s` if the caches
    have not synced by then; `resume()` does so at once (the app ended first)."""

    def __init__(self, limit_s: float = SYNC_PAUSE_LIMIT_S) -> None:
        self.limit_s = limit_s
        self._paused = False
        self._was_enabled = True
        self._settled = False

    def begin(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._paused = True

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            if self._was_enabled:
                gc.enable()

    async def expire(self) -> None:
        await asyncio.sleep(self.limit_s)
        if self._paused:
            log.info("caches not synced after %.0f s: the collector runs again", self.limit_s)
        self.resume()

    def settle(self) -> None:
        """Once: resume, collect, freeze what survives."""
        self.resume()
        if self._settled:
            return
        self._settled = True
        t0 = time.process_time()
        found = gc.collect()
        gc.freeze()
        log.info(
            "heap settled after the first sync: %d unreachable objects collected, "
            "%d frozen, %.3f s CPU",
            found,
            gc.get_freeze_count(),
            time.process_time() - t0,
        )
