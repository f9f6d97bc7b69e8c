"""Queue building blocks: the keyed heap, backoff durations, ordering, pod update events."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from scheduler.framework.cluster_event import ActionType, EventResource
from scheduler.queue import QueuedPodInfo, backoff_duration, pod_update_event, priority_sort_less
from scheduler.queue.heap import KeyedHeap


@dataclass(frozen=True)
class Pod:
    uid: str
    priority: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    scheduling_gates: tuple[str, ...] = ()
    requests: dict[str, int] = field(default_factory=dict)
    resource_version: str = "1"

    @property
    def key(self) -> str:
        return f"default/{self.uid}"


def test_heap_pops_in_order_under_random_pushes_removes_and_updates() -> None:
    rng = random.Random(7)
    values: dict[str, int] = {}
    heap: KeyedHeap[str] = KeyedHeap(lambda k: k, lambda a, b: values[a] < values[b])
    for step in range(400):
        op = rng.random()
        if op < 0.6:
            k = f"k{rng.randrange(60)}"
            values[k] = rng.randrange(1000)
            heap.push(k)  # new key or update of an existing one
        elif op < 0.8 and len(heap):
            k = rng.choice(list(heap))
            assert heap.remove(k) == k
        elif len(heap):
            k = rng.choice(list(heap))
            values[k] = rng.randrange(1000)
            heap.fix(k)
        assert len(heap) == len(set(heap)), step
    drained = [values[heap.pop()] for _ in range(len(heap))]
    assert drained == sorted(drained)


def test_heap_get_peek_contains_and_empty_pop() -> None:
    heap: KeyedHeap[int] = KeyedHeap(str, lambda a, b: a < b)
    assert heap.peek() is None
    for v in (5, 3, 9):
        heap.push(v)
    assert heap.peek() == 3
    assert "9" in heap
    assert heap.get("5") == 5
    assert heap.remove("42") is None
    for _ in range(3):
        heap.pop()
    with pytest.raises(IndexError):
        heap.pop()


@pytest.mark.parametrize(
    ("attempts", "initial", "maximum", "expected"),
    [
        (0, 1, 10, 0),  # never tried (only gated): no backoff
        (1, 1, 10, 1),
        (2, 1, 10, 2),
        (3, 1, 10, 4),
        (4, 1, 10, 8),
        (5, 1, 10, 10),  # 16 capped
        (60, 1, 10, 10),
        (1, 3, 10, 3),
        (2, 3, 10, 6),
        (3, 3, 10, 10),
        (4, 5, 5, 5),
        (2, 0.5, 10, 1.0),
    ],
)
def test_backoff_doubles_from_initial_and_caps_at_max(
    attempts: int, initial: float, maximum: float, expected: float
) -> None:
    assert backoff_duration(attempts, initial, maximum) == expected


@pytest.mark.parametrize(
    ("a", "b", "a_first"),
    [
        ((10, 5.0), (0, 1.0), True),  # higher priority first, though later
        ((0, 1.0), (10, 5.0), False),
        ((1, 1.0), (1, 2.0), True),  # same priority: earlier timestamp first
        ((1, 2.0), (1, 1.0), False),
        ((1, 1.0), (1, 1.0), False),  # strict
        ((-5, 0.0), (-1, 9.0), False),
    ],
)
def test_priority_sort(a: tuple[int, float], b: tuple[int, float], a_first: bool) -> None:
    ia = QueuedPodInfo(pod=Pod("a", priority=a[0]), timestamp=a[1])
    ib = QueuedPodInfo(pod=Pod("b", priority=b[0]), timestamp=b[1])
    assert priority_sort_less(ia, ib) is a_first


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (Pod("p"), Pod("p", resource_version="2"), None),  # status-only change: no event
        (Pod("p"), Pod("p", labels={"a": "b"}), ActionType.UPDATE_POD_LABEL),
        (
            Pod("p", scheduling_gates=("g",)),
            Pod("p"),
            ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
        ),
        (
            Pod("p", scheduling_gates=("g",)),
            Pod("p", scheduling_gates=("h",)),
            ActionType.UPDATE_POD_GENERATED,
        ),
        (
            Pod("p", requests={"cpu": 2}),
            Pod("p", requests={"cpu": 1}),
            ActionType.UPDATE_POD_SCALE_DOWN,
        ),
        (
            Pod("p", requests={"cpu": 1}),
            Pod("p", requests={"cpu": 2}),
            ActionType.UPDATE_POD_GENERATED,
        ),
        (Pod("p", priority=1), Pod("p", priority=2), ActionType.UPDATE_POD_GENERATED),
        (
            Pod("p", labels={"a": "b"}, requests={"cpu": 2}),
            Pod("p", labels={}, requests={"cpu": 1}),
            ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_SCALE_DOWN,
        ),
    ],
)
def test_pod_update_event_names_what_changed(
    old: Pod, new: Pod, expected: ActionType | None
) -> None:
    event = pod_update_event(EventResource.UNSCHEDULED_POD, old, new)
    if expected is None:
        assert event is None
    else:
        assert event is not None
        assert event.action == expected
        assert event.resource == EventResource.UNSCHEDULED_POD
        assert event.label == "UnscheduledPodUpdate"


def test_pod_update_event_compares_array_requests() -> None:
    np = pytest.importorskip("numpy")

    @dataclass(frozen=True, eq=False)
    class ArrPod:
        uid: str
        requests: object

    old = ArrPod("p", np.array([2000, 100]))
    assert pod_update_event(EventResource.ASSIGNED_POD, old, ArrPod("p", old.requests)) is None
    shrunk = pod_update_event(EventResource.ASSIGNED_POD, old, ArrPod("p", np.array([1000, 100])))
    assert shrunk is not None
    assert shrunk.action == ActionType.UPDATE_POD_SCALE_DOWN
    assert shrunk.label == "AssignedPodUpdate"


def test_the_model_pod_record_works_with_the_queue() -> None:
    from scheduler.model.pod import PodInfo, pod_from_dict
    from scheduler.queue import SchedulingQueue

    def raw(labels: dict[str, str], cpu: str, rv: str) -> dict[str, object]:
        return {
            "metadata": {"uid": "u1", "namespace": "ns", "name": "p", "labels": labels,
                         "resourceVersion": rv},
            "spec": {"schedulerName": "kube-async-scheduler", "containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        }  # fmt: skip

    old = pod_from_dict(raw({}, "2", "1"))
    q: SchedulingQueue[PodInfo] = SchedulingQueue()
    q.add(old)
    assert q.where("u1") == "active"
    assert (
        pod_update_event(EventResource.UNSCHEDULED_POD, old, pod_from_dict(raw({}, "2", "2")))
        is None
    )
    shrunk = pod_update_event(EventResource.UNSCHEDULED_POD, old, pod_from_dict(raw({}, "1", "2")))
    assert shrunk is not None
    assert shrunk.action == ActionType.UPDATE_POD_SCALE_DOWN
