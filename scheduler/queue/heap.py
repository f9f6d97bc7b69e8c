"""A binary heap keyed by a string, ordered by a supplied less-function.

Like upstream's internal heap (pkg/scheduler/backend/heap): items are found, updated and
removed by key in O(log n), which a plain ``heapq`` list cannot do. Invariant: ``_index[k]``
is the position of the item with key ``k`` in ``_items``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class KeyedHeap(Generic[T]):
    def __init__(self, key: Callable[[T], str], less: Callable[[T, T], bool]) -> None:
        self._key = key
        self._less = less
        self._items: list[T] = []
        self._index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[T]:
        """Items in no particular order."""
        return iter(list(self._items))

    def get(self, key: str) -> T | None:
        i = self._index.get(key)
        return None if i is None else self._items[i]

    def peek(self) -> T | None:
        return self._items[0] if self._items else None

    def push(self, item: T) -> None:
        """Add the item, or replace the one with the same key and restore the order."""
        k = self._key(item)
        i = self._index.get(k)
        if i is not None:
            self._items[i] = item
            self._fix(i)
            return
        self._items.append(item)
        self._index[k] = len(self._items) - 1
        self._up(len(self._items) - 1)

    def pop(self) -> T:
        if not self._items:
            raise IndexError("pop from an empty heap")
        return self._remove_at(0)

    def remove(self, key: str) -> T | None:
        i = self._index.get(key)
        return None if i is None else self._remove_at(i)

    def fix(self, key: str) -> None:
        """Restore the order after the item's sort fields changed in place."""
        i = self._index.get(key)
        if i is not None:
            self._fix(i)

    # --- internals ---

    def _remove_at(self, i: int) -> T:
        last = len(self._items) - 1
        if i != last:
            self._swap(i, last)
        item = self._items.pop()
        del self._index[self._key(item)]
        if i < len(self._items):
            self._fix(i)
        return item

    def _fix(self, i: int) -> None:
        if not self._down(i):
            self._up(i)

    def _swap(self, i: int, j: int) -> None:
        items = self._items
        items[i], items[j] = items[j], items[i]
        self._index[self._key(items[i])] = i
        self._index[self._key(items[j])] = j

    def _up(self, i: int) -> None:
        while i > 0:
            parent = (i - 1) // 2
            if not self._less(self._items[i], self._items[parent]):
                break
            self._swap(i, parent)
            i = parent

    def _down(self, i: int) -> bool:
        start = i
        n = len(self._items)
        while True:
            left = 2 * i + 1
            if left >= n:
                break
            smallest = left
            right = left + 1
            if right < n and self._less(self._items[right], self._items[left]):
                smallest = right
            if not self._less(self._items[smallest], self._items[i]):
                break
            self._swap(i, smallest)
            i = smallest
        return i > start
