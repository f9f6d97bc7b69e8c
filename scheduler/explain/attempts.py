"""The last failed attempt of each pod, as the scheduling cycle recorded it.

The loop calls `AttemptLog.record` on a FitError after PostFilter with the Diagnosis the
cycle already built; explain shows it as `lastAttempt`. Nothing is converted per failed
cycle: turning a node -> Status map into a list costs a pass over every node, paid only
when someone asks for the per-node list.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scheduler.framework.diagnosis import FitError
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo

__all__ = ["MAX_NODE_ENTRIES", "MAX_REMEMBERED", "Attempt", "AttemptLog"]

MAX_REMEMBERED = 10_000  # pods whose last attempt is kept (oldest forgotten first)
# node statuses kept over all attempts: about 40 MB at most (a pointer pair per entry in
# the shared maps; the Status objects themselves are shared by many nodes)
MAX_NODE_ENTRIES = 1_000_000


@dataclass(frozen=True, slots=True)
class Attempt:
    uid: str
    time: float
    message: str
    # the cycle's own node -> Status map, kept as it is (never mutated after the cycle)
    statuses: Mapping[str, Status]
    nominated_node: str | None


class AttemptLog:
    """The last failed attempt of each pod, by uid, oldest forgotten first.

    Bounded twice: at most `max_pods` pods, and at most `max_node_entries` node statuses
    over all kept attempts (each attempt holds one per node of the cluster, so on a
    5000-node cluster the pod bound alone would allow 50 million). A forgotten attempt
    only loses the `lastAttempt` part of explain; its `now` dry run does not need it."""

    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        *,
        max_pods: int = MAX_REMEMBERED,
        max_node_entries: int = MAX_NODE_ENTRIES,
    ) -> None:
        self._wall = wall
        self._max_pods = max_pods
        self._max_entries = max_node_entries
        self._entries = 0
        self._attempts: OrderedDict[str, Attempt] = OrderedDict()

    def record(self, pod: PodInfo, fit: FitError, nominated: str | None) -> None:
        # built (and cached) for PostFilter and the event already; never mutated after
        statuses = fit.diagnosis.node_to_status()
        attempt = Attempt(pod.uid, self._wall(), fit.message(), statuses, nominated)
        self.forget(pod.uid)
        self._attempts[pod.uid] = attempt
        self._entries += len(statuses)
        while len(self._attempts) > 1 and (
            len(self._attempts) > self._max_pods or self._entries > self._max_entries
        ):
            _, oldest = self._attempts.popitem(last=False)
            self._entries -= len(oldest.statuses)

    def get(self, uid: str) -> Attempt | None:
        return self._attempts.get(uid)

    def forget(self, uid: str) -> None:
        old = self._attempts.pop(uid, None)
        if old is not None:
            self._entries -= len(old.statuses)
