"""A heap keyed by a string, ordered by a sort key (a tuple) instead of a less-function.

Same interface as :class:`scheduler.queue.heap.KeyedHeap`, for a QueueSort plugin that
states its order as a key (``sort_key``) as well as ``less``. Entries are
``(sort key, sequence, key, item)`` tuples in a :mod:`heapq` list, so every comparison is
a C tuple comparison instead of a Python call; in issue 12's profile the Python sift of
KeyedHeap was a few percent of the CPU per bound pod.

Updates and removals are lazy: ``_live[key]`` is the item's current entry, and an entry in
the list that is not its key's live entry is stale and skipped when it reaches the top.
Stale entries are dropped all at once when they outnumber the live ones (so memory stays
within a constant factor of the live size).

Equal sort keys: the earlier push (or fix) comes out first. KeyedHeap's order among equal
keys is whatever its sift leaves (not specified); for PrioritySort equal keys mean equal
priority and equal queue timestamp, which upstream's heap does not order either.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from itertools import count
from typing import Any, Generic, TypeVar

T = TypeVar("T")

SortKey = tuple[Any, ...]
_Entry = tuple[SortKey, int, str, T]


class SortKeyHeap(Generic[T]):
    def __init__(self, key: Callable[[T], str], sort_key: Callable[[T], SortKey]) -> None:
        self._key = key
        self._sort_key = sort_key
        self._heap: list[_Entry[T]] = []
        self._live: dict[str, _Entry[T]] = {}
        self._seq = count()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def __iter__(self) -> Iterator[T]:
        """Items in no particular order."""
        return iter([e[3] for e in self._live.values()])

    def get(self, key: str) -> T | None:
        e = self._live.get(key)
        return None if e is None else e[3]

    def peek(self) -> T | None:
        self._drop_stale_top()
        return self._heap[0][3] if self._heap else None

    def push(self, item: T) -> None:
        """Add the item, or replace the one with the same key and restore the order."""
        self._enter(self._key(item), item)

    def pop(self) -> T:
        heap, live = self._heap, self._live
        while heap:
            e = heapq.heappop(heap)
            if live.get(e[2]) is e:
                del live[e[2]]
                return e[3]
        raise IndexError("pop from an empty heap")

    def remove(self, key: str) -> T | None:
        e = self._live.pop(key, None)
        if e is None:
            return None
        self._maybe_compact()
        return e[3]

    def fix(self, key: str) -> None:
        """Restore the order after the item's sort fields changed in place."""
        e = self._live.get(key)
        if e is not None:
            self._enter(key, e[3])

    # --- internals ---

    def _enter(self, key: str, item: T) -> None:
        e: _Entry[T] = (self._sort_key(item), next(self._seq), key, item)
        self._live[key] = e
        heapq.heappush(self._heap, e)
        self._maybe_compact()

    def _drop_stale_top(self) -> None:
        heap, live = self._heap, self._live
        while heap and live.get(heap[0][2]) is not heap[0]:
            heapq.heappop(heap)

    def _maybe_compact(self) -> None:
        if len(self._heap) > 2 * len(self._live) + 64:
            self._heap = list(self._live.values())
            heapq.heapify(self._heap)
