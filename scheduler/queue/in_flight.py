"""Pods popped for a scheduling attempt and the cluster events that arrive meanwhile
(upstream's in-flight pods and events, KEP-4247).

When an attempt fails, the events recorded since the pod was popped decide whether it
may have become schedulable (then backoff, not the unschedulable pool). An activation
or a deletion of a pod in flight is remembered the same way. Events no in-flight pod can
still see are dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic

from scheduler.framework.cluster_event import ClusterEvent
from scheduler.queue.pod_info import P, QueuedPodInfo


@dataclass(slots=True)
class InFlight(Generic[P]):
    info: QueuedPodInfo[P]
    first_event: int  # sequence number of the first event this attempt may see
    force_activate: bool = False
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    seq: int
    event: ClusterEvent
    old: Any
    new: Any


class InFlightPods(Generic[P]):
    def __init__(self) -> None:
        self._pods: dict[str, InFlight[P]] = {}
        self._events: list[RecordedEvent] = []
        self._next_seq = 0

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def get(self, uid: str) -> InFlight[P] | None:
        return self._pods.get(uid)

    def start(self, info: QueuedPodInfo[P]) -> None:
        """The pod was popped: it sees every event recorded from now on."""
        self._pods[info.uid] = InFlight(info, self._next_seq)

    def finish(self, uid: str) -> bool:
        """The attempt is over; False if the pod was not in flight."""
        if self._pods.pop(uid, None) is None:
            return False
        self._prune()
        return True

    def record(self, event: ClusterEvent, old: Any, new: Any) -> None:
        if self._pods:
            self._events.append(RecordedEvent(self._next_seq, event, old, new))
            self._next_seq += 1

    def events_seen_by(self, flight: InFlight[P]) -> Iterator[RecordedEvent]:
        """The events that arrived while this pod was in flight, oldest first."""
        return (rec for rec in self._events if rec.seq >= flight.first_event)

    def _prune(self) -> None:
        """Drop events no in-flight pod can still see."""
        if not self._pods:
            self._events.clear()
            return
        oldest = min(f.first_event for f in self._pods.values())
        if self._events and self._events[0].seq < oldest:
            self._events = [e for e in self._events if e.seq >= oldest]
