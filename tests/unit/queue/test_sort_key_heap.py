"""SortKeyHeap against a reference, and its agreement with KeyedHeap and PrioritySort."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from scheduler.plugins.priority_sort import PrioritySort
from scheduler.queue.heap import KeyedHeap
from scheduler.queue.pod_info import QueuedPodInfo, priority_sort_key, priority_sort_less
from scheduler.queue.sort_key_heap import SortKeyHeap


@dataclass
class Pod:
    uid: str
    key: str
    priority: int


def info(uid: str, priority: int, timestamp: float) -> QueuedPodInfo[Pod]:
    return QueuedPodInfo(pod=Pod(uid, "ns/" + uid, priority), timestamp=timestamp)


def sort_key(i: QueuedPodInfo[Pod]) -> tuple[int, float]:
    return priority_sort_key(i.pod, i.timestamp)


Heap = SortKeyHeap[QueuedPodInfo[Pod]] | KeyedHeap[QueuedPodInfo[Pod]]


def run_against_reference(seed: int, h: Heap, fifo_ties: bool) -> list[str]:
    """Random push/update/fix/remove/pop; every pop checked against a sorted reference.

    With ``fifo_ties`` the popped uid must be exactly the reference's (equal keys in push
    order); otherwise only its key must be the least (KeyedHeap leaves ties unordered).
    """
    rng = random.Random(seed)
    # reference: uid -> (sort key, order of the last push/fix)
    ref: dict[str, tuple[tuple[int, float], int]] = {}
    popped: list[str] = []
    stamp = 0
    for _ in range(600):
        op = rng.random()
        # few priorities and timestamps, so equal keys are common
        if op < 0.45:
            uid = f"p{rng.randrange(60)}"
            it = info(uid, rng.randrange(3), float(rng.randrange(5)))
            h.push(it)
            stamp += 1
            ref[uid] = (sort_key(it), stamp)
        elif op < 0.55 and ref:
            uid = rng.choice(sorted(ref))
            got = h.get(uid)
            assert got is not None
            got.timestamp = float(rng.randrange(5))  # changed in place, then fixed
            h.fix(uid)
            stamp += 1
            ref[uid] = (sort_key(got), stamp)
        elif op < 0.65:
            uid = f"p{rng.randrange(60)}"
            removed = h.remove(uid)
            assert (removed is None) == (uid not in ref)
            assert removed is None or removed.uid == uid
            ref.pop(uid, None)
        elif ref:
            expected = min(ref, key=lambda u: ref[u])
            head = h.peek()
            out = h.pop()
            assert head is out
            if fifo_ties:
                assert out.uid == expected
            else:
                assert ref[out.uid][0] == ref[expected][0]
            del ref[out.uid]
            popped.append(out.uid)
        else:
            with pytest.raises(IndexError):
                h.pop()
            assert h.peek() is None
        assert len(h) == len(ref)
        assert sorted(i.uid for i in h) == sorted(ref)
        assert all(uid in h and h.get(uid) is not None for uid in ref)
    return popped


@pytest.mark.parametrize("seed", range(20))
def test_sort_key_heap_pops_in_key_then_push_order(seed: int) -> None:
    h: SortKeyHeap[QueuedPodInfo[Pod]] = SortKeyHeap(lambda i: i.uid, sort_key)
    assert len(run_against_reference(seed, h, fifo_ties=True)) > 50


@pytest.mark.parametrize("seed", range(20))
def test_less_heap_pops_in_key_order(seed: int) -> None:
    h: KeyedHeap[QueuedPodInfo[Pod]] = KeyedHeap(lambda i: i.uid, priority_sort_less)
    assert len(run_against_reference(seed, h, fifo_ties=False)) > 50


def test_fifo_reference_can_fail() -> None:
    # the exact-uid check is not vacuous: a heap that breaks ties last-in-first-out fails it
    h: SortKeyHeap[QueuedPodInfo[Pod]] = SortKeyHeap(lambda i: i.uid, sort_key)
    h._seq = iter(range(10**9, 0, -1))  # type: ignore[assignment]
    with pytest.raises(AssertionError):
        run_against_reference(0, h, fifo_ties=True)


def test_stale_entries_are_compacted() -> None:
    h: SortKeyHeap[QueuedPodInfo[Pod]] = SortKeyHeap(lambda i: i.uid, sort_key)
    for n in range(1000):
        h.push(info("same", 0, float(n)))
    assert len(h) == 1
    assert len(h._heap) <= 2 * len(h) + 64
    assert h.pop().timestamp == 999.0


@pytest.mark.parametrize("seed", range(5))
def test_priority_sort_key_orders_as_its_less(seed: int) -> None:
    rng = random.Random(seed)
    plugin = PrioritySort()
    for _ in range(2000):
        a = info("a", rng.randrange(-3, 3), float(rng.randrange(4)))
        b = info("b", rng.randrange(-3, 3), float(rng.randrange(4)))
        ka = plugin.sort_key(a.pod, a.timestamp)  # type: ignore[arg-type]
        kb = plugin.sort_key(b.pod, b.timestamp)  # type: ignore[arg-type]
        assert plugin.less(a, b) == (ka < kb)  # type: ignore[arg-type]
