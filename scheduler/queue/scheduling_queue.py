"""The scheduling queue: activeQ, backoffQ, unschedulable pods, gated pods, in-flight pods.

Modelled on upstream's PriorityQueue (pkg/scheduler/backend/queue). Every pending pod of
this scheduler is in exactly one of:

- **activeQ**: a heap ordered by the QueueSort less-function; ``pop()`` takes the head.
- **backoffQ**: pods that failed recently, ordered by backoff expiry
  (``timestamp + initial * 2^(attempts-1)``, capped); moved to activeQ by
  ``flush_backoff_completed`` (every second).
- **unschedulable**: pods rejected by plugins; each remembers its rejector plugins. Only a
  cluster event registered by one of them (and whose hint says QUEUE) moves it, or the
  leftover flush after 5 minutes.
- **gated**: pods PreEnqueue rejected (scheduling gates, the preemption gate). They never
  enter activeQ until PreEnqueue passes; PreEnqueue is re-run when a registered event of
  the gating plugin arrives, on update, on ``activate`` and by the leftover flush.
- **in flight**: popped and not yet ``done``. Cluster events that arrive while a pod is in
  flight are kept, so that when the attempt fails, an event that may have made it
  schedulable sends the pod to backoff instead of unschedulable (upstream's in-flight
  events, KEP-4247). Activation of an in-flight pod is remembered the same way.

PreEnqueue runs on every entry into activeQ. The queue does not import plugins: the
PreEnqueue check and the per-plugin events are supplied at construction. Time comes from
an injectable clock; the periodic flushes are plain methods so tests call them directly.

Its parts live beside it: backoffQ (backoff_queue), the in-flight pods and their events
(in_flight), the queueing-hint decision (queueing_hints), the metrics (queue_metrics), the
periodic flushes and the lifecycle (flush_tasks), the queue names (statistics).

Thread model: one asyncio loop; all methods but ``pop`` are synchronous and never await,
so each is atomic with respect to other tasks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic

from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.framework.cluster_event import ClusterEvent, ClusterEventWithHint, EventResource
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.queue import events as ev
from scheduler.queue.backoff_queue import BackoffQueue
from scheduler.queue.flush_tasks import FlushTasks, QueueState
from scheduler.queue.heap import KeyedHeap
from scheduler.queue.in_flight import InFlightPods
from scheduler.queue.pod_info import (
    LessFn,
    P,
    QueuedPodInfo,
    SortKeyFn,
    priority_sort_key,
    priority_sort_less,
)
from scheduler.queue.queue_metrics import QueueMetrics
from scheduler.queue.queueing_hints import QueueingHints, RequeueStrategy
from scheduler.queue.sort_key_heap import SortKeyHeap
from scheduler.queue.statistics import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, QueueStatistics

log = logging.getLogger(__name__)

DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
# upstream DefaultPodMaxInUnschedulablePodsDuration and the flush periods
DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0
BACKOFF_FLUSH_INTERVAL = 1.0
UNSCHEDULABLE_FLUSH_INTERVAL = 30.0

PreEnqueueFn = Callable[[Any], Status]


def _always_enqueue(_pod: Any) -> Status:
    return Status.success()


def _no_group(_pod: Any) -> str:
    return ""


class SchedulingQueue(Generic[P]):
    def __init__(
        self,
        *,
        less: LessFn[P] = priority_sort_less,
        sort_key: SortKeyFn[P] | None = None,
        pre_enqueue: PreEnqueueFn = _always_enqueue,
        events_to_register: Mapping[str, Sequence[ClusterEventWithHint]] | None = None,
        pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
        pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
        max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
        clock: Clock = SYSTEM_CLOCK,
        metrics: SchedulerMetrics | None = None,
        backoff_flush_interval: float = BACKOFF_FLUSH_INTERVAL,
        unschedulable_flush_interval: float = UNSCHEDULABLE_FLUSH_INTERVAL,
        group_of: Callable[[Any], str] = _no_group,
    ) -> None:
        self._clock = clock
        # a pod's PodGroup key ("" for none): members are popped together (take_group)
        self._group_of = group_of
        self._group_members: dict[str, set[str]] = {}
        self._pre_enqueue = pre_enqueue
        self._hints = QueueingHints(events_to_register or {})
        self._max_in_unschedulable = max_in_unschedulable
        self._metrics = QueueMetrics(metrics)

        # activeQ compares sort keys in C when the QueueSort order comes with one
        # (sort_key_heap.py); a plugin with only `less` keeps the less-function heap
        if sort_key is None and less is priority_sort_less:
            sort_key = priority_sort_key
        self._active: KeyedHeap[QueuedPodInfo[P]] | SortKeyHeap[QueuedPodInfo[P]]
        if sort_key is None:
            self._active = KeyedHeap(lambda i: i.uid, less)
        else:
            key_of = sort_key
            self._active = SortKeyHeap(lambda i: i.uid, lambda i: key_of(i.pod, i.timestamp))
        self._backoff: BackoffQueue[P] = BackoffQueue(pod_initial_backoff, pod_max_backoff, clock)
        self._unschedulable: dict[str, QueuedPodInfo[P]] = {}
        self._gated: dict[str, QueuedPodInfo[P]] = {}
        self._in_flight: InFlightPods[P] = InFlightPods()
        self._scheduling_cycle = 0
        self._move_request_cycle = -1
        # while the caches first fill (defer_moves .. resume_moves): events seen, not acted on
        self._deferring = False
        self._deferred = 0

        self._wakeup = asyncio.Event()
        self._flush_periods = (backoff_flush_interval, unschedulable_flush_interval)
        self._flushes = FlushTasks()
        self._metrics.bind_pending_pods(
            {
                ACTIVE: lambda: len(self._active),
                BACKOFF: lambda: len(self._backoff),
                UNSCHEDULABLE: lambda: len(self._unschedulable),
                GATED: lambda: len(self._gated),
            }
        )

    # ------------------------------------------------------------------ informer intake

    def add(self, pod: P) -> None:
        """A new pending pod (informer add)."""
        if self._where(pod.uid) is not None or pod.uid in self._in_flight:
            self.update(pod, pod)
            return
        info: QueuedPodInfo[P] = QueuedPodInfo(pod=pod, timestamp=self._clock.now())
        group = self._group_of(pod)
        if group:
            self._group_members.setdefault(group, set()).add(pod.uid)
        self._move_to_active(info, ev.POD_ADD)

    def update(self, old: P, new: P) -> None:
        """A pending pod changed (informer update)."""
        uid = new.uid
        flight = self._in_flight.get(uid)
        if flight is not None:
            # the attempt in progress uses the old object; keep the update as an event so a
            # failure of this attempt can be requeued by it
            flight.info.pod = new
            event = ev.pod_update_event(EventResource.UNSCHEDULED_POD, old, new)
            if event is not None:
                self._in_flight.record(event, old, new)
            return
        where = self._where(uid)
        if where is None:
            self.add(new)
            return
        if where == ACTIVE:
            info = self._active.get(uid)
            assert info is not None
            info.pod = new
            self._active.fix(uid)
        elif where == BACKOFF:
            info = self._backoff.get(uid)
            assert info is not None
            info.pod = new
        elif where == GATED:
            # the gate itself may have opened (scheduling gates removed): check it again
            info = self._gated.pop(uid)
            info.pod = new
            self._move_to_active(info, ev.POD_UPDATE)
        else:
            info = self._unschedulable[uid]
            info.pod = new
            event = ev.pod_update_event(EventResource.UNSCHEDULED_POD, old, new)
            if event is None:
                return
            strategy = self._hints.strategy(info, event, old, new)
            if strategy is not RequeueStrategy.SKIP:
                del self._unschedulable[uid]
                self._requeue(info, strategy, ev.POD_UPDATE)

    def delete(self, pod: P) -> None:
        """A pending pod was deleted (or got bound by someone else)."""
        uid = pod.uid
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.deleted = True
        self._active.remove(uid)
        self._backoff.remove(uid)
        self._unschedulable.pop(uid, None)
        self._gated.pop(uid, None)
        self._metrics.uncount_unschedulable(uid)
        group = self._group_of(pod)
        members = self._group_members.get(group) if group else None
        if members is not None:
            members.discard(uid)
            if not members:
                del self._group_members[group]

    def assigned_pod_added(self, pod: Any) -> None:
        """A pod was bound to a node: usage grew, affinity targets appeared."""
        self.move_all_to_active_or_backoff(ev.ASSIGNED_POD_ADD, None, pod)

    def assigned_pod_updated(self, old: Any, new: Any) -> None:
        event = ev.pod_update_event(EventResource.ASSIGNED_POD, old, new)
        if event is not None:
            self.move_all_to_active_or_backoff(event, old, new)

    def assigned_pod_deleted(self, pod: Any) -> None:
        """A bound pod went away: its node has room now."""
        self.move_all_to_active_or_backoff(ev.ASSIGNED_POD_DELETE, pod, None)

    # ------------------------------------------------------------------ scheduling loop

    async def pop(self) -> QueuedPodInfo[P] | None:
        """The head of activeQ, waiting for one; None once the queue is closed.

        The pod is in flight until ``done(uid)``.
        """
        while True:
            if self._flushes.state is QueueState.CLOSED:
                return None
            if len(self._active):
                return self._pop_now()
            self._wakeup.clear()
            await self._wakeup.wait()

    def _pop_now(self) -> QueuedPodInfo[P]:
        info = self._active.pop()
        info.attempts += 1
        self._scheduling_cycle += 1
        self._metrics.uncount_unschedulable(info.uid)
        info.unschedulable_plugins = set()
        self._in_flight.start(info)
        return info

    def take_group(self, info: QueuedPodInfo[P]) -> list[QueuedPodInfo[P]]:
        """The popped pod's PodGroup siblings that wait in activeQ, backoffQ or among the
        unschedulable pods, taken out and put in flight with it: the pod-group cycle
        schedules them as one unit, as upstream's queue pops one entity for the group
        (pkg/scheduler/backend/queue). Gated siblings stay gated. Each taken sibling
        counts an attempt and must be handed back (done, or requeued) like a popped pod.
        """
        group = self._group_of(info.pod)
        out: list[QueuedPodInfo[P]] = []
        for uid in sorted(self._group_members.get(group, ())) if group else ():
            if uid == info.uid or uid in self._in_flight:
                continue
            sibling = self._active.remove(uid) or self._take_waiting(uid, keep_gated=True)
            if sibling is None:
                continue
            sibling.attempts += 1
            self._metrics.uncount_unschedulable(uid)
            sibling.unschedulable_plugins = set()
            self._in_flight.start(sibling)
            out.append(sibling)
        return out

    @property
    def scheduling_cycle(self) -> int:
        """Incremented by every pop; hand it back to add_unschedulable_if_not_present."""
        return self._scheduling_cycle

    def done(self, uid: str) -> None:
        """The attempt of this pod is over (bound, requeued or dropped)."""
        self._in_flight.finish(uid)

    def add_unschedulable_if_not_present(
        self,
        info: QueuedPodInfo[P],
        rejector_plugins: Iterable[str],
        pod_scheduling_cycle: int,
    ) -> str | None:
        """Put a pod back after a failed attempt; returns the queue it went to.

        ``rejector_plugins`` are the plugins that returned Unschedulable; none means the
        attempt failed with an error, and the pod goes to backoff. Otherwise it goes to
        unschedulable, unless an event relevant to its rejectors arrived while it was in
        flight (or, for a pod not popped from this queue, a move request happened since
        ``pod_scheduling_cycle``): then to backoff. An ``activate`` during the attempt
        sends it to activeQ. A pod deleted while in flight is dropped (returns None), and
        so is one already queued elsewhere.
        """
        uid = info.uid
        if self._where(uid) is not None:
            log.warning("pod already queued, not re-adding pod=%s", info.key)
            return None
        flight = self._in_flight.get(uid)
        if flight is not None:
            if flight.deleted:
                log.debug("pod deleted during its attempt, dropping pod=%s", info.key)
                return None
            if flight.info is not info:
                info.pod = flight.info.pod  # the latest object the informer delivered
        info.unschedulable_plugins = set(rejector_plugins)
        info.gated = False
        info.timestamp = self._clock.now()
        self._metrics.count_unschedulable(info)

        if flight is not None and flight.force_activate:
            strategy = RequeueStrategy.IMMEDIATELY
        elif not info.unschedulable_plugins or self._group_of(info.pod):
            # a rejected pod group never rests among the unschedulable pods: upstream
            # requeues it through backoff whatever the events (scheduling_queue.go
            # AddAttemptedPodGroupIfNeeded)
            strategy = RequeueStrategy.AFTER_BACKOFF
        elif flight is not None:
            strategy = RequeueStrategy.SKIP
            for rec in self._in_flight.events_seen_by(flight):
                s = self._hints.strategy(info, rec.event, rec.old, rec.new)
                if s is not RequeueStrategy.SKIP:
                    strategy = s
                    break
        elif self._move_request_cycle >= pod_scheduling_cycle:
            strategy = RequeueStrategy.AFTER_BACKOFF
        else:
            strategy = RequeueStrategy.SKIP

        if strategy is RequeueStrategy.SKIP:
            self._unschedulable[uid] = info
            self._metrics.incoming(UNSCHEDULABLE, ev.SCHEDULE_ATTEMPT_FAILURE)
            return UNSCHEDULABLE
        return self._requeue(info, strategy, ev.SCHEDULE_ATTEMPT_FAILURE)

    def activate(self, pods: Iterable[Any]) -> None:
        """Move these pods to activeQ now (through PreEnqueue), skipping backoff and hints.

        Used when a plugin knows a pod can go (the preemption task ended). A pod in flight
        is remembered and goes to activeQ when its attempt fails.
        """
        for pod in pods:
            uid = pod.uid
            flight = self._in_flight.get(uid)
            if flight is not None:
                # a PodGroup member in flight comes back through backoff all the same
                # (upstream records a ForceActivate event for it, which the group's
                # backoff still applies to): GangScheduling's Permit activating the
                # members of the group being submitted must not retry them at once
                if not self._group_of(pod):
                    flight.force_activate = True
                continue
            info = self._take_waiting(uid)
            if info is None:
                continue  # in activeQ already, or unknown
            self._move_to_active(info, ev.FORCE_ACTIVATE.label)

    def retry_at_once(self, uid: str) -> None:
        """The pod in flight goes straight to activeQ when its attempt ends (a placed
        pod group's members that did not fit: upstream requeues the group to activeQ,
        its timestamp kept, AddAttemptedPodGroupIfNeeded)."""
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.force_activate = True

    def move_all_to_active_or_backoff(
        self,
        event: ClusterEvent,
        old: Any = None,
        new: Any = None,
        pre_check: Callable[[Any], bool] | None = None,
    ) -> int:
        """A cluster event happened: requeue the unschedulable and gated pods it may help.

        A pod moves when one of its rejector plugins registered a matching event whose hint
        says QUEUE (no hint: QUEUE); wildcard events move every pod. Returns how many pods
        moved.
        """
        if self._deferring:
            self._deferred += 1
            return 0
        self._in_flight.record(event, old, new)
        self._move_request_cycle = self._scheduling_cycle
        moved = 0
        label = ev.event_label(event)
        for source in (self._unschedulable, self._gated):
            for uid, info in list(source.items()):
                if pre_check is not None and not pre_check(info.pod):
                    continue
                strategy = self._hints.strategy(info, event, old, new)
                if strategy is RequeueStrategy.SKIP:
                    continue
                del source[uid]
                self._requeue(info, strategy, label)
                moved += 1
        return moved

    def defer_moves(self) -> None:
        """Until `resume_moves`: cluster events are counted, not acted on. For the first
        fill of the caches, before any cycle: every listed object is an Add event, and
        acting on each means every gated pod's hints, or its PreEnqueue, once per object
        listed (a thousand pods waiting for their claims and 3500 claims listed cost
        seconds of CPU here). Nothing is lost: no pod was attempted yet, so nothing
        is unschedulable, and `resume_moves` gives every gated pod its PreEnqueue again
        once, against the filled caches, which is where the events would have left it."""
        self._deferring = True

    def resume_moves(self) -> int:
        """The caches are filled: act on the events held back (see defer_moves); returns
        how many pods moved."""
        self._deferring = False
        held, self._deferred = self._deferred, 0
        if not held:
            return 0
        moved = 0
        for source in (self._unschedulable, self._gated):
            for uid, info in list(source.items()):
                del source[uid]
                if self._requeue(info, RequeueStrategy.AFTER_BACKOFF, ev.CACHES_SYNCED) != GATED:
                    moved += 1
        return moved

    # ------------------------------------------------------------------ periodic flushes

    def flush_backoff_completed(self) -> int:
        """Move pods whose backoff expired to activeQ (through PreEnqueue)."""
        moved = 0
        for info in self._backoff.pop_completed():
            self._move_to_active(info, ev.BACKOFF_COMPLETE)
            moved += 1
        return moved

    def flush_unschedulable_left_over(self) -> int:
        """Requeue pods unschedulable for longer than max_in_unschedulable (5 minutes).

        Gated pods that long are checked against PreEnqueue again: the gate may have opened
        without an event the gating plugin registered (a victim gone during a re-list).
        """
        now = self._clock.now()
        label = ev.UNSCHEDULABLE_TIMEOUT.label
        moved = 0
        for uid, info in list(self._unschedulable.items()):
            if now - info.timestamp > self._max_in_unschedulable:
                del self._unschedulable[uid]
                self._requeue(info, RequeueStrategy.AFTER_BACKOFF, label)
                moved += 1
        for uid, info in list(self._gated.items()):
            if now - info.timestamp > self._max_in_unschedulable:
                del self._gated[uid]
                if self._requeue(info, RequeueStrategy.AFTER_BACKOFF, label) != GATED:
                    moved += 1
        return moved

    # ------------------------------------------------------------------ lifecycle

    @property
    def state(self) -> QueueState:
        return self._flushes.state

    def run(self) -> None:
        """Start the flush tasks (needs a running event loop)."""
        backoff_period, unschedulable_period = self._flush_periods
        self._flushes.start(
            (
                ("queue-flush-backoff", self.flush_backoff_completed, backoff_period),
                (
                    "queue-flush-unschedulable",
                    self.flush_unschedulable_left_over,
                    unschedulable_period,
                ),
            )
        )

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        """The flush tasks started by run() (for the app's task guard)."""
        return self._flushes.tasks

    def close(self) -> None:
        """Stop the flushes and wake every pop() waiter, which then returns None."""
        if self._flushes.close():
            self._wakeup.set()

    # ------------------------------------------------------------------ introspection

    def statistics(self) -> QueueStatistics:
        return QueueStatistics(
            active=len(self._active),
            backoff=len(self._backoff),
            unschedulable=len(self._unschedulable),
            gated=len(self._gated),
            in_flight=len(self._in_flight),
            scheduling_cycle=self._scheduling_cycle,
        )

    def pending_pods(self) -> list[tuple[QueuedPodInfo[P], str]]:
        """Every queued pod with its queue name (for the debug endpoint)."""
        out: list[tuple[QueuedPodInfo[P], str]] = [(i, ACTIVE) for i in self._active]
        out += [(i, BACKOFF) for i in self._backoff]
        out += [(i, UNSCHEDULABLE) for i in self._unschedulable.values()]
        out += [(i, GATED) for i in self._gated.values()]
        return out

    def where(self, uid: str) -> str | None:
        """The queue holding this pod (active/backoff/unschedulable/gated), 'in_flight', or
        None."""
        if uid in self._in_flight:
            return "in_flight"
        return self._where(uid)

    def get(self, uid: str) -> QueuedPodInfo[P] | None:
        flight = self._in_flight.get(uid)
        if flight is not None:
            return flight.info
        return (
            self._active.get(uid)
            or self._backoff.get(uid)
            or self._unschedulable.get(uid)
            or self._gated.get(uid)
        )

    # ------------------------------------------------------------------ internals

    def _where(self, uid: str) -> str | None:
        if uid in self._active:
            return ACTIVE
        if uid in self._backoff:
            return BACKOFF
        if uid in self._unschedulable:
            return UNSCHEDULABLE
        if uid in self._gated:
            return GATED
        return None

    def _take_waiting(self, uid: str, *, keep_gated: bool = False) -> QueuedPodInfo[P] | None:
        info = self._backoff.remove(uid)
        if info is None:
            info = self._unschedulable.pop(uid, None)
        if info is None and not keep_gated:
            info = self._gated.pop(uid, None)
        return info

    def _move_to_active(self, info: QueuedPodInfo[P], label: str) -> str:
        status = self._pre_enqueue(info.pod)
        if not status.ok:
            if not info.gated:
                log.debug(
                    "pod gated by PreEnqueue pod=%s plugin=%s reason=%s",
                    info.key,
                    status.plugin,
                    status.message(),
                )
            was_gated = info.gated
            info.gated = True
            info.unschedulable_plugins = {status.plugin} if status.plugin else set()
            self._gated[info.uid] = info
            if not was_gated:  # a re-check that keeps the gate closed is not an arrival
                self._metrics.incoming(GATED, label)
            return GATED
        info.gated = False
        if info.initial_attempt_timestamp is None:
            info.initial_attempt_timestamp = self._clock.now()
        self._active.push(info)
        self._metrics.incoming(ACTIVE, label)
        self._wakeup.set()
        return ACTIVE

    def _requeue(self, info: QueuedPodInfo[P], strategy: RequeueStrategy, label: str) -> str:
        """Into backoffQ if still backing off, else through PreEnqueue into activeQ."""
        if (
            strategy is RequeueStrategy.AFTER_BACKOFF
            and not info.gated
            and self._backoff.backing_off(info)
        ):
            self._backoff.push(info)
            self._metrics.incoming(BACKOFF, label)
            return BACKOFF
        return self._move_to_active(info, label)
