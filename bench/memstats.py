"""Where our scheduler's memory goes: run it in this process and write a breakdown of
its Python heap whenever its resident memory has grown and settled, and at exit.

    python -m bench.memstats --out FILE -- run --config ... (the scheduler's arguments)

The pinned suite runs it as the contender `ours-memstats` (named only on purpose, after
the compared contenders: its figures are a profile's, not a comparison's). Issue 26
asks why ours' peak RSS at 150,000 pods is above upstream's; this says what holds it:

- objects by type: every object the collector tracks, and the strings, numbers and
  bytes they refer to (counted once each), with their sizes;
- by owner, in this order, each counting what it reaches that an earlier one did not:
  the informers' stores, the cache's pod states, the cache's node views, the snapshot,
  the pod matcher, the queue; what the pod records themselves take (all PodInfo objects
  and what they reach) is reported apart, with the bytes per record;
- pymalloc's arenas (how much of the heap is allocated but free: what a transient peak
  leaves behind) and the process's RSS.

A breakdown walks the whole heap: seconds of CPU and a few hundred MiB of its own while
it runs (the `walk_rss_mib` line says how much), so this contender's CPU and RSS figures
are not comparable with ours-async's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import sys
import tempfile
import threading
import time
import types
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# a breakdown when RSS has grown by this much since the last one and then held for
# SETTLE_S (a LIST in progress is not the steady state)
GROWTH = 1.15
SETTLE_S = 8.0
FIRST_MIB = 300.0
# object kinds never walked into: code and modules are not the scheduler's data
_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
         types.CodeType, types.FrameType, types.MethodType)  # fmt: skip
_LEAVES = (str, bytes, int, float, bool, type(None))
_OWNERS = (
    ("informer stores", "scheduler.client.informer", "Store"),
    ("cache pod states", "scheduler.cache.cache", "Cache", "_pods"),
    ("cache node views", "scheduler.cache.cache", "Cache", "_nodes"),
    ("snapshot", "scheduler.cache.snapshot", "Snapshot"),
    ("pod matcher", "scheduler.cache.pod_matcher", "PodMatcher"),
    ("nominator", "scheduler.cache.nominator", "Nominator"),
)


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _instances(module: str, cls: str) -> list[Any]:
    mod = sys.modules.get(module)
    klass = getattr(mod, cls, None) if mod is not None else None
    if klass is None:
        return []
    return [o for o in gc.get_objects() if type(o) is klass]


def _reach(roots: Iterable[Any], seen: set[int]) -> tuple[int, int]:
    """(bytes, objects) reachable from `roots` and not in `seen` (which it extends)."""
    size = count = 0
    stack = [r for r in roots if id(r) not in seen]
    while stack:
        o = stack.pop()
        i = id(o)
        if i in seen or isinstance(o, _SKIP):
            continue
        seen.add(i)
        size += sys.getsizeof(o)
        count += 1
        if not isinstance(o, _LEAVES):
            stack.extend(gc.get_referents(o))
    return size, count


def _by_type() -> tuple[Counter[str], Counter[str]]:
    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    leaves: set[int] = set()
    for o in gc.get_objects():
        name = type(o).__qualname__
        sizes[name] += sys.getsizeof(o)
        counts[name] += 1
        for r in gc.get_referents(o):
            # strings and numbers are not tracked by the collector: counted once, here
            if isinstance(r, _LEAVES) and id(r) not in leaves:
                leaves.add(id(r))
                rname = type(r).__qualname__
                sizes[rname] += sys.getsizeof(r)
                counts[rname] += 1
    return sizes, counts


def _mallocstats() -> str:
    """sys._debugmallocstats() writes to the C stderr: catch it through a temporary fd."""
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    keep = [ln for ln in text.splitlines() if ln.startswith(("# arenas", "Total", "#"))]
    return "\n".join(keep[-12:])


def breakdown(why: str) -> str:
    t0 = time.monotonic()
    rss0 = _rss_mib()
    out = io.StringIO()
    w = out.write
    w(f"=== breakdown ({why}) at {time.strftime('%H:%M:%S')}, RSS {rss0:.0f} MiB\n")
    seen: set[int] = set()
    for label, module, cls, *attr in _OWNERS:
        objs = _instances(module, cls)
        roots = [getattr(o, attr[0]) for o in objs] if attr else objs
        size, n = _reach(roots, seen)
        w(f"owner {label:<20} {size / 2**20:9.1f} MiB {n:>10} objects ({len(objs)} roots)\n")
    pod_mod = sys.modules.get("scheduler.model.pod")
    pod_cls = getattr(pod_mod, "PodInfo", None)
    if pod_cls is not None:
        pods = [o for o in gc.get_objects() if type(o) is pod_cls]
        size, n = _reach(pods, set())
        per = size / max(1, len(pods))
        w(f"pod records: {len(pods)} PodInfo, {size / 2**20:.1f} MiB reachable "
          f"({n} objects, {per:.0f} bytes a record, shared parts counted once)\n")  # fmt: skip
    sizes, counts = _by_type()
    total = sum(sizes.values())
    w(f"python objects (tracked + their leaves): {total / 2**20:.1f} MiB\n")
    for name, s in sizes.most_common(25):
        w(f"  {name:<36} {s / 2**20:9.1f} MiB {counts[name]:>10}\n")
    w(_mallocstats() + "\n")
    w(f"walk: {time.monotonic() - t0:.1f}s, walk_rss_mib +{_rss_mib() - rss0:.0f}\n")
    return out.getvalue()


class Watcher(threading.Thread):
    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True, name="memstats")
        self.out = out
        self.last = 0.0
        self.peak = 0.0
        self.lock = threading.Lock()

    def write(self, why: str) -> None:
        with self.lock:
            text = breakdown(why)
            with self.out.open("a") as f:
                f.write(text + "\n")
            self.last = _rss_mib()

    def run(self) -> None:
        grown_at: float | None = None
        level = 0.0
        while True:
            time.sleep(0.5)
            rss = _rss_mib()
            self.peak = max(self.peak, rss)
            if rss < max(FIRST_MIB, self.last * GROWTH):
                grown_at = None
                continue
            # grown: wait until it holds within 2% for SETTLE_S
            if grown_at is None or abs(rss - level) > 0.02 * level:
                grown_at, level = time.monotonic(), rss
                continue
            if time.monotonic() - grown_at >= SETTLE_S:
                with contextlib.suppress(Exception):
                    self.write(f"settled after growth, peak so far {self.peak:.0f} MiB")
                grown_at = None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.memstats")
    ap.add_argument("--out", required=True)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    watcher = Watcher(out)
    watcher.start()
    from scheduler.cli import main as scheduler_main

    try:
        return scheduler_main(args)
    finally:
        with contextlib.suppress(Exception):
            watcher.write(f"at exit, peak RSS seen {watcher.peak:.0f} MiB")


if __name__ == "__main__":
    raise SystemExit(main())
