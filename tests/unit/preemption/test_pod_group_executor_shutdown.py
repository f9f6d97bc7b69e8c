"""At shutdown a pod-group preemption's running task gets the grace the single-pod
executor's get: its deletions are not cut off at once (a group half deleted at the
process's exit is torn), and one that outlives the grace is cancelled."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from typing import Any

from scheduler.framework.waiting_pods import WaitingPods
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.preemption.pod_group_executor import PodGroupPreemptions
from scheduler.supervisor import TaskSet
from tests.unit.helpers.builders import make_pod
from tests.unit.helpers.fake_clock import FakeClock

GROUP = PodGroupInfo(namespace="default", name="g", policy="gang", min_count=2, uid="g-uid")


class _SlowEvictions:
    """Each eviction takes `seconds` of real time."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.done: list[str] = []

    async def evict(self, victim: PodInfo, *args: Any, **kwargs: Any) -> bool:
        await asyncio.sleep(self.seconds)
        self.done.append(victim.name)
        return True


class _Events:
    def event(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Handle:
    def __init__(self) -> None:
        self.waiting_pods = WaitingPods()

    def activate(self, pods: Iterable[PodInfo]) -> None:
        pass


async def _running(seconds: float) -> tuple[PodGroupPreemptions, _SlowEvictions, TaskSet]:
    evictions = _SlowEvictions(seconds)
    tasks = TaskSet("podgroup-preemptions")
    pre = PodGroupPreemptions(
        evictions,  # type: ignore[arg-type]
        _Events(),  # type: ignore[arg-type]
        pod_lookup=lambda uid: None,
        tasks=tasks,
        clock=FakeClock(),
    )
    members = [dataclasses.replace(make_pod(f"m{i}").obj(), pod_group="g") for i in range(2)]
    victims = [make_pod(f"v{i}").node("n0").obj() for i in range(3)]
    pre.start(GROUP, members, victims, _Handle())
    await asyncio.sleep(0)
    assert len(tasks) == 1
    return pre, evictions, tasks


async def test_shutdown_lets_a_running_task_finish_within_the_grace() -> None:
    pre, evictions, tasks = await _running(0.01)
    assert await pre.shutdown(5.0) == 0
    assert sorted(evictions.done) == ["v0", "v1", "v2"]
    assert len(tasks) == 0


async def test_shutdown_cancels_a_task_that_outlives_the_grace() -> None:
    pre, evictions, tasks = await _running(60.0)
    assert await pre.shutdown(0.0) == 1
    assert evictions.done == []
    assert len(tasks) == 0
