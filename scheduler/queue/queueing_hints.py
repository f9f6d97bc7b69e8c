"""Whether a cluster event may make a rejected pod schedulable (upstream's
isPodWorthRequeuing): the events each plugin registered, and their queueing hints."""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.framework.cluster_event import (
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
)
from scheduler.queue import events as ev
from scheduler.queue.pod_info import P, QueuedPodInfo

log = logging.getLogger(__name__)
_MATCHING_LIMIT = 4096


class RequeueStrategy(enum.Enum):
    SKIP = 0  # stays where it is
    AFTER_BACKOFF = 1  # to backoffQ while backing off, else activeQ
    IMMEDIATELY = 2  # to activeQ (through PreEnqueue)


class QueueingHints:
    """The events each plugin registered (`events_to_register`), by plugin name."""

    def __init__(self, events_to_register: Mapping[str, Sequence[ClusterEventWithHint]]) -> None:
        self._hints: dict[str, tuple[ClusterEventWithHint, ...]] = {
            name: tuple(evs) for name, evs in events_to_register.items()
        }
        # (plugin, event) -> that plugin's registrations the event matches: the same few
        # events arrive again and again, each tried against every rejected pod
        self._matching: dict[tuple[str, ClusterEvent], tuple[ClusterEventWithHint, ...]] = {}

    def _registered_for(self, plugin: str, event: ClusterEvent) -> tuple[ClusterEventWithHint, ...]:
        key = (plugin, event)
        found = self._matching.get(key)
        if found is None:
            found = tuple(r for r in self._hints.get(plugin, ()) if r.event.matches(event))
            if len(self._matching) >= _MATCHING_LIMIT:
                self._matching.clear()  # updates combine actions: bounded, not unbounded
            self._matching[key] = found
        return found

    def strategy(
        self, info: QueuedPodInfo[P], event: ClusterEvent, old: Any, new: Any
    ) -> RequeueStrategy:
        """A pod moves when one of its rejector plugins registered a matching event whose
        hint says QUEUE (no hint: QUEUE); a wildcard event, or a pod no plugin rejected
        (an error), moves always; a failing hint requeues rather than strands the pod."""
        if event == ev.FORCE_ACTIVATE:
            return RequeueStrategy.IMMEDIATELY
        rejectors = info.unschedulable_plugins
        if not rejectors or event.resource == EventResource.WILDCARD:
            return RequeueStrategy.AFTER_BACKOFF
        for plugin in sorted(rejectors) if len(rejectors) > 1 else rejectors:
            for registered in self._registered_for(plugin, event):
                if registered.hint is None:
                    return RequeueStrategy.AFTER_BACKOFF
                try:
                    hint = registered.hint(info.pod, old, new)
                except Exception:
                    # as upstream: a failing hint must not strand the pod
                    log.exception(
                        "queueing hint failed, requeueing pod=%s plugin=%s", info.key, plugin
                    )
                    return RequeueStrategy.AFTER_BACKOFF
                if hint is QueueingHint.QUEUE:
                    return RequeueStrategy.AFTER_BACKOFF
        return RequeueStrategy.SKIP
