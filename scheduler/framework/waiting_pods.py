"""Pods held at Permit, owned by the framework (upstream framework/runtime/waiting_pods_map.go).

A Permit plugin that answers WAIT parks the pod here; its binding cycle awaits the
verdict. Anyone holding the framework handle may allow or reject a waiting pod in
memory: preemption rejects a victim that is still waiting instead of deleting it.
One map serves every profile of the process, so a victim waiting in another profile's
framework is found too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo


@dataclass
class WaitingPod:
    """A pod held at Permit on `node`; `verdict` resolves to the Status that ends the wait."""

    pod: PodInfo
    node: str
    verdict: asyncio.Future[Status] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def allow(self) -> None:
        if not self.verdict.done():
            self.verdict.set_result(Status.success())

    def reject(self, plugin: str, message: str) -> None:
        if not self.verdict.done():
            self.verdict.set_result(Status.unschedulable(message, plugin=plugin))


class WaitingPods:
    """uid -> WaitingPod."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, waiting: WaitingPod) -> None:
        self._pods[waiting.pod.uid] = waiting

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def reject(self, uid: str, plugin: str, message: str) -> bool:
        """Reject the pod if it waits at Permit; False when it does not."""
        waiting = self._pods.get(uid)
        if waiting is None:
            return False
        waiting.reject(plugin, message)
        return True

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)
