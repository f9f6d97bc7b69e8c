"""Go's sort.Slice, step for step, so that equal elements end where Go leaves them.

Upstream sorts preemption victims with sort.Slice (SelectVictimsOnNode), which is not
stable: pods of one Job started in the same second compare equal, and the order Go leaves
them in decides which of them are reprieved. Python's sort is stable and so differs on
ties. This is a transcription of Go 1.26's pattern-defeating quicksort
($GOROOT/src/sort/zsortfunc.go, the generated *_func variants, and sort.go for xorshift,
nextPowerOfTwo and the hints; sort.Slice in slice.go passes limit = bits.Len(length)).
kube-scheduler v1.37.2 is built with go1.26.8 (`go version <binary>`). Every step is
deterministic: insertion sort up to 12 elements (stable), then pdqsort whose
"random" pattern breaking is an xorshift seeded with the sub-slice's length.

tests/unit/preemption/test_go_sort.py compares it with Go's own sort.Slice on thousands of
tie-heavy inputs.
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from typing import TypeVar

__all__ = ["sort_slice"]

T = TypeVar("T")

_MAX_INSERTION = 12  # pdqsort_func: maxInsertion
_SHORTEST_NINTHER = 50  # choosePivot_func
_MAX_SWAPS = 4 * 3
_SHORTEST_SHIFTING = 50  # partialInsertionSort_func
_MAX_STEPS = 5
_MASK64 = (1 << 64) - 1

# sort.go: sortedHint
_UNKNOWN, _INCREASING, _DECREASING = 0, 1, 2


def sort_slice(data: MutableSequence[T], less: Callable[[T, T], bool]) -> None:
    """Sort `data` in place exactly as Go's sort.Slice(data, less) does (slice.go)."""
    n = len(data)
    _Sorter(data, less).pdqsort(0, n, n.bit_length())


class _Sorter:
    __slots__ = ("d", "lt")

    def __init__(self, data: MutableSequence[T], less: Callable[[T, T], bool]) -> None:
        self.d: MutableSequence[object] = data  # type: ignore[assignment]
        self.lt: Callable[[object, object], bool] = less  # type: ignore[assignment]

    def less(self, i: int, j: int) -> bool:
        d = self.d
        return self.lt(d[i], d[j])

    def swap(self, i: int, j: int) -> None:
        d = self.d
        d[i], d[j] = d[j], d[i]

    def insertion_sort(self, a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and self.less(j, j - 1):
                self.swap(j, j - 1)
                j -= 1

    def sift_down(self, lo: int, hi: int, first: int) -> None:
        root = lo
        while True:
            child = 2 * root + 1
            if child >= hi:
                return
            if child + 1 < hi and self.less(first + child, first + child + 1):
                child += 1
            if not self.less(first + root, first + child):
                return
            self.swap(first + root, first + child)
            root = child

    def heap_sort(self, a: int, b: int) -> None:
        first, lo, hi = a, 0, b - a
        for i in range((hi - 1) // 2, -1, -1):
            self.sift_down(i, hi, first)
        for i in range(hi - 1, -1, -1):
            self.swap(first, first + i)
            self.sift_down(lo, i, first)

    def pdqsort(self, a: int, b: int, limit: int) -> None:
        was_balanced = True
        was_partitioned = True
        while True:
            length = b - a
            if length <= _MAX_INSERTION:
                self.insertion_sort(a, b)
                return
            if limit == 0:
                self.heap_sort(a, b)
                return
            if not was_balanced:
                self.break_patterns(a, b)
                limit -= 1
            pivot, hint = self.choose_pivot(a, b)
            if hint == _DECREASING:
                self.reverse_range(a, b)
                pivot = (b - 1) - (pivot - a)
                hint = _INCREASING
            if (
                was_balanced
                and was_partitioned
                and hint == _INCREASING
                and self.partial_insertion_sort(a, b)
            ):
                return
            # `a > 0` is the absolute index, as in Go (a sub-slice after its pivot)
            if a > 0 and not self.less(a - 1, pivot):
                a = self.partition_equal(a, b, pivot)
                continue
            mid, was_partitioned = self.partition(a, b, pivot)
            left, right = mid - a, b - mid
            threshold = length // 8
            if left < right:
                was_balanced = left >= threshold
                self.pdqsort(a, mid, limit)
                a = mid + 1
            else:
                was_balanced = right >= threshold
                self.pdqsort(mid + 1, b, limit)
                b = mid

    def partition(self, a: int, b: int, pivot: int) -> tuple[int, bool]:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while i <= j and self.less(i, a):
            i += 1
        while i <= j and not self.less(j, a):
            j -= 1
        if i > j:
            self.swap(j, a)
            return j, True
        self.swap(i, j)
        i += 1
        j -= 1
        while True:
            while i <= j and self.less(i, a):
                i += 1
            while i <= j and not self.less(j, a):
                j -= 1
            if i > j:
                break
            self.swap(i, j)
            i += 1
            j -= 1
        self.swap(j, a)
        return j, False

    def partition_equal(self, a: int, b: int, pivot: int) -> int:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while True:
            while i <= j and not self.less(a, i):
                i += 1
            while i <= j and self.less(a, j):
                j -= 1
            if i > j:
                break
            self.swap(i, j)
            i += 1
            j -= 1
        return i

    def partial_insertion_sort(self, a: int, b: int) -> bool:
        i = a + 1
        for _ in range(_MAX_STEPS):
            while i < b and not self.less(i, i - 1):
                i += 1
            if i == b:
                return True
            if b - a < _SHORTEST_SHIFTING:
                return False
            self.swap(i, i - 1)
            if i - a >= 2:  # shift the smaller one to the left
                j = i - 1
                while j >= 1:
                    if not self.less(j, j - 1):
                        break
                    self.swap(j, j - 1)
                    j -= 1
            if b - i >= 2:  # shift the greater one to the right
                j = i + 1
                while j < b:
                    if not self.less(j, j - 1):
                        break
                    self.swap(j, j - 1)
                    j += 1
        return False

    def break_patterns(self, a: int, b: int) -> None:
        length = b - a
        if length < 8:
            return
        r = length  # xorshift(length): seeded by the length, so deterministic
        modulus = 1 << length.bit_length()  # nextPowerOfTwo
        for idx in range(a + (length // 4) * 2 - 1, a + (length // 4) * 2 + 2):
            r ^= (r << 13) & _MASK64
            r ^= r >> 7
            r ^= (r << 17) & _MASK64
            other = r & (modulus - 1)
            if other >= length:
                other -= length
            self.swap(idx, a + other)

    def choose_pivot(self, a: int, b: int) -> tuple[int, int]:
        n = b - a
        swaps = [0]
        i, j, k = a + n // 4, a + n // 4 * 2, a + n // 4 * 3
        if n >= 8:
            if n >= _SHORTEST_NINTHER:  # Tukey's ninther
                i = self.median(i - 1, i, i + 1, swaps)
                j = self.median(j - 1, j, j + 1, swaps)
                k = self.median(k - 1, k, k + 1, swaps)
            j = self.median(i, j, k, swaps)
        if swaps[0] == 0:
            return j, _INCREASING
        if swaps[0] == _MAX_SWAPS:
            return j, _DECREASING
        return j, _UNKNOWN

    def order2(self, a: int, b: int, swaps: list[int]) -> tuple[int, int]:
        if self.less(b, a):
            swaps[0] += 1
            return b, a
        return a, b

    def median(self, a: int, b: int, c: int, swaps: list[int]) -> int:
        a, b = self.order2(a, b, swaps)
        b, c = self.order2(b, c, swaps)
        a, b = self.order2(a, b, swaps)
        return b

    def reverse_range(self, a: int, b: int) -> None:
        i, j = a, b - 1
        while i < j:
            self.swap(i, j)
            i += 1
            j -= 1
