"""The scheduler process's policy for CPython's cyclic garbage collector.

Two decisions, both for the process only (an app run inside a test process leaves the
collector alone):

- the youngest generation's threshold is raised for the whole run (`tune_gc`);
- during the first sync of the informers the collector is paused, and once the caches
  are filled the heap is collected once and frozen (`paused_until_synced`).

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
from typing import Any

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


async def paused_until_synced(
    synced: asyncio.Event,
    ended: asyncio.Future[Any],
    limit_s: float = SYNC_PAUSE_LIMIT_S,
) -> bool:
    """Pause the collector until `synced` is set, `ended` is done (the app stopped first)
    or `limit_s` passes, whichever is first; then turn it back on. When the caches did
    sync, collect once and freeze what survives. Returns whether they synced."""
    wait_synced = asyncio.create_task(synced.wait())
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        await asyncio.wait(
            {wait_synced, ended}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        wait_synced.cancel()
        if was_enabled:
            gc.enable()
    if not synced.is_set():
        return False
    t0 = time.monotonic()
    found = gc.collect()
    gc.freeze()
    log.info(
        "heap settled after the first sync: %d unreachable objects collected, %d frozen, %.3f s",
        found,
        gc.get_freeze_count(),
        time.monotonic() - t0,
    )
    return True
