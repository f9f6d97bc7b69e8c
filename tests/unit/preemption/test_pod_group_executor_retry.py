"""A pod group whose preemption tasks keep failing (a victim DELETE refused every time)
is re-activated at once after its first failure only; each further one waits longer,
so a refusal that persists is no loop of cycles and DELETEs. A success resets it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from typing import Any

from scheduler.framework.waiting_pods import WaitingPods
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.preemption.pod_group_executor import PodGroupPreemptions
from tests.unit.helpers.builders import make_pod
from tests.unit.helpers.fake_clock import FakeClock

GROUP = PodGroupInfo(namespace="default", name="g", policy="gang", min_count=2, uid="g-uid")


class _Evictions:
    def __init__(self) -> None:
        self.refuse = True
        self.calls = 0

    async def evict(self, victim: PodInfo, *args: Any, **kwargs: Any) -> bool:
        self.calls += 1
        if self.refuse:
            args[2].append(f"delete {victim.key}: 403")
            return False
        return True


class _Events:
    def event(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Handle:
    def __init__(self) -> None:
        self.waiting_pods = WaitingPods()
        self.activations = 0

    def activate(self, pods: Iterable[PodInfo]) -> None:
        self.activations += 1


async def _attempt(pre: PodGroupPreemptions, handle: _Handle, victims: list[PodInfo]) -> None:
    members = [dataclasses.replace(make_pod(f"m{i}").obj(), pod_group="g") for i in range(2)]
    pre.start(GROUP, members, victims, handle)
    for _ in range(20):  # the task runs on the loop
        await asyncio.sleep(0)


def test_consecutive_failures_delay_the_reactivation_and_a_success_resets() -> None:
    async def run() -> None:
        evictions = _Evictions()
        handle = _Handle()
        pre = PodGroupPreemptions(
            evictions,  # type: ignore[arg-type]
            _Events(),  # type: ignore[arg-type]
            pod_lookup=lambda uid: None,
            clock=FakeClock(),
            retry_initial=0.05,
            retry_max=0.2,
        )
        victims = [make_pod(f"v{i}").node("n0").obj() for i in range(3)]
        await _attempt(pre, handle, victims)
        assert handle.activations == 1  # the first failure: at once
        await _attempt(pre, handle, victims)
        assert handle.activations == 1  # the second: only after retry_initial
        await asyncio.sleep(0.1)
        assert handle.activations == 2
        # only the first victims were tried each time: the last is left alone on failure
        assert evictions.calls == 4
        evictions.refuse = False
        await _attempt(pre, handle, victims)
        assert handle.activations == 2  # success: gated on its victims, not activated
        evictions.refuse = True
        await _attempt(pre, handle, victims)  # not gated: lookups find no victim running
        assert handle.activations == 3  # the count started over: at once again
        pre.close()

    asyncio.run(run())
