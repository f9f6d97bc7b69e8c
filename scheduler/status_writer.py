"""PodScheduled=False (and nominatedNodeName) for pods that failed a scheduling cycle.

Upstream's rule (pkg/scheduler/schedule_one.go updatePod, with
pkg/api/v1/pod/util.go UpdatePodCondition and pkg/scheduler/util PatchPodStatus): the
condition is compared with the pod's current PodScheduled condition; when status,
reason and message are all the same there is nothing to write, and neither is there when
nominatedNodeName is not being changed. lastTransitionTime is now when the status
changes, else the old one is kept (we send none, so the API server keeps it).

Beyond upstream, which writes from a goroutine per failure, the writes are bounded: at
most `max_in_flight` patches are on their way at once, and the rest wait coalesced per
pod, so only the latest wanted status of a pod is ever written. A backlog of thousands of
unschedulable pods thus holds a handful of dispatcher tokens at a time instead of one per
pod, and binds (and the Lease, which has its own client anyway) are not starved behind
them. Pods wait in arrival order.

Nothing is dropped silently: every outcome is counted in
scheduler_pod_status_patches_total{result}.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from scheduler.client.errors import ApiError, LeaseNotHeld, NotFound
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.supervisor import TaskSet
from scheduler.timestamps import rfc3339

__all__ = ["StatusWriter", "WantedStatus", "needs_update"]

log = logging.getLogger(__name__)

POD_SCHEDULED = "PodScheduled"

Patch = Callable[[str, str, dict[str, Any]], Awaitable[Any]]

# results of scheduler_pod_status_patches_total
WRITTEN = "written"
UNCHANGED = "unchanged"
COALESCED = "coalesced"
GONE = "gone"
FAILED = "failed"
FENCED = "fenced"  # not sent: this replica does not surely hold the leader lease


@dataclass(frozen=True, slots=True)
class WantedStatus:
    reason: str
    message: str
    nominated: str | None
    """None: leave nominatedNodeName alone; "": clear it; else set it."""


def needs_update(pod: PodInfo, wanted: WantedStatus) -> bool:
    """Upstream updatePod's test, on the pod as the informer last showed it."""
    nominated_changes = wanted.nominated is not None and pod.nominated_node_name != (
        wanted.nominated
    )
    current = pod.condition(POD_SCHEDULED)
    condition_same = (
        current is not None
        and current.status == "False"
        and current.reason == wanted.reason
        and current.message == wanted.message
    )
    return nominated_changes or not condition_same


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class StatusWriter:
    def __init__(
        self,
        patch: Patch,
        *,
        max_in_flight: int = 8,
        metrics: SchedulerMetrics | None = None,
        wall: Callable[[], dt.datetime] = _utcnow,
        is_pending: Callable[[PodInfo], bool] | None = None,
        tasks: TaskSet | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self._patch = patch
        self._max_in_flight = max_in_flight
        self._metrics = metrics
        self._wall = wall
        # a pod that waited for a slot may have been bound or deleted meanwhile: its
        # write is then pointless (or a 422 for a nomination on a bound pod)
        self._is_pending = is_pending or (lambda pod: True)
        self._in_flight: dict[str, WantedStatus] = {}  # uid -> what is being written
        self._waiting: OrderedDict[str, tuple[PodInfo, WantedStatus]] = OrderedDict()
        self._tasks = tasks if tasks is not None else TaskSet("status-writes")
        self._idle = asyncio.Event()
        self._idle.set()

    # ---- the loop's side: never blocks ------------------------------------------------
    def unschedulable(
        self, pod: PodInfo, reason: str, message: str, nominated_node: str | None
    ) -> None:
        """Want PodScheduled=False with this reason/message on `pod` (the latest object
        the informer delivered), and nominatedNodeName set ("" clears) unless None."""
        wanted = WantedStatus(reason, message, nominated_node)
        if not needs_update(pod, wanted):
            self._count(UNCHANGED)
            return
        uid = pod.uid
        if uid in self._waiting:
            self._waiting[uid] = (pod, wanted)  # keeps its place in line; latest wins
            self._count(COALESCED)
            return
        if self._in_flight.get(uid) == wanted:
            self._count(COALESCED)  # that very status is on its way
            return
        if uid in self._in_flight or len(self._in_flight) >= self._max_in_flight:
            self._waiting[uid] = (pod, wanted)
            return
        self._start(pod, wanted)

    def forget(self, uid: str) -> None:
        """Someone else writes this pod's status now (a preemption task): drop what
        waits. A write already on its way is not recalled."""
        if self._waiting.pop(uid, None) is not None:
            self._count(COALESCED)

    # ---- introspection -------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def wait_idle(self) -> None:
        """Until nothing is in flight or waiting (tests, shutdown)."""
        await self._idle.wait()

    async def drain(self, grace: float) -> int:
        """At shutdown: forget what waits, let what is in flight finish for `grace`
        seconds, cancel the rest. Returns how many writes were given up."""
        given_up = len(self._waiting)
        for _ in range(given_up):
            self._count(FAILED)
        self._waiting.clear()
        return given_up + await self._tasks.drain(grace)

    # ---- the writers ---------------------------------------------------------------
    def _start(self, pod: PodInfo, wanted: WantedStatus) -> None:
        self._in_flight[pod.uid] = wanted
        self._idle.clear()
        self._tasks.spawn(self._write(pod, wanted), name=f"status-{pod.key}")

    def _body(self, pod: PodInfo, wanted: WantedStatus) -> dict[str, Any]:
        condition: dict[str, Any] = {
            "type": POD_SCHEDULED,
            "status": "False",
            "reason": wanted.reason,
            "message": wanted.message,
        }
        current = pod.condition(POD_SCHEDULED)
        if current is None or current.status != "False":
            # a transition: upstream stamps it; otherwise the server keeps the old time
            condition["lastTransitionTime"] = rfc3339(self._wall())
        status: dict[str, Any] = {"conditions": [condition]}
        if wanted.nominated is not None and wanted.nominated != pod.nominated_node_name:
            status["nominatedNodeName"] = wanted.nominated or None
        return {"status": status}

    async def _write(self, pod: PodInfo, wanted: WantedStatus) -> None:
        result = FAILED
        try:
            await self._patch(pod.namespace, pod.name, self._body(pod, wanted))
            result = WRITTEN
        except NotFound:
            result = GONE
        except LeaseNotHeld:
            # a follower (a refused pod's status) or a leader stepping down: the leader
            # writes it; the fence counted it
            result = FENCED
        except ApiError as exc:
            log.warning("status patch failed pod=%s err=%s", pod.key, exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("status patch crashed pod=%s", pod.key)
        finally:
            self._count(result)
            self._in_flight.pop(pod.uid, None)
            self._next()

    def _next(self) -> None:
        while self._waiting and len(self._in_flight) < self._max_in_flight:
            # the oldest pod that has no write on its way
            uid = next((u for u in self._waiting if u not in self._in_flight), None)
            if uid is None:
                break
            pod, wanted = self._waiting.pop(uid)
            if not self._is_pending(pod):
                self._count(GONE)
                continue
            self._start(pod, wanted)
        if not self._in_flight and not self._waiting:
            self._idle.set()

    def _count(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.pod_status_patches.labels(result=result).inc()
