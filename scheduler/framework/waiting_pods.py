"""Pods held at Permit, owned by the framework (upstream framework/runtime/waiting_pods_map.go).

A Permit plugin that answers WAIT parks the pod here; its binding cycle awaits the
verdict. The wait is timed from the moment the pod is parked, as upstream's newWaitingPod
arms its timers (framework/runtime/waiting_pods_map.go): when it runs out the pod is
rejected by the plugin that asked to wait, in upstream's words
"rejected due to timeout after waiting <Go duration> at plugin <name>".

Anyone holding the framework handle may allow or reject a waiting pod in memory:
preemption rejects a victim that is still waiting instead of deleting it. One map
serves every profile of the process, so a victim waiting in another profile's framework
is found too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

from scheduler.config.duration import format_duration
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo


def permit_timeout_message(wait: float, plugin: str) -> str:
    """upstream waiting_pods_map.go newWaitingPod: the wait as Go's time.Duration prints
    it ("10s", "1m30s", "500ms")."""
    return f"rejected due to timeout after waiting {format_duration(wait)} at plugin {plugin}"


@dataclass
class WaitingPod:
    """A pod held at Permit on `node`; `verdict` resolves to the Status that ends the wait.
    With a `timeout`, the pod is rejected by `plugin` (the Permit plugin whose wait ends
    first) when that many seconds pass without a verdict."""

    pod: PodInfo
    node: str
    plugin: str = ""
    timeout: float | None = None
    verdict: asyncio.Future[Status] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.timeout is not None:
            message = permit_timeout_message(self.timeout, self.plugin)
            self._timer = asyncio.get_running_loop().call_later(
                self.timeout, self.reject, self.plugin, message
            )

    def allow(self) -> None:
        self._settle(Status.success())

    def reject(self, plugin: str, message: str) -> None:
        self._settle(Status.unschedulable(message, plugin=plugin))

    def _settle(self, status: Status) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self.verdict.done():
            self.verdict.set_result(status)


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
