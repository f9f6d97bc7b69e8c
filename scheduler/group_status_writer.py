"""The PodGroupInitiallyScheduled condition a pod-group cycle leaves on its PodGroup.

Upstream's rule (k8s.io/kubernetes v1.37.2 pkg/scheduler/schedule_one_podgroup.go
updatePodGroupCondition, with apimachinery's meta.SetStatusCondition): True/Scheduled
once the group is placed, False/Unschedulable or False/SchedulerError with the group's
message otherwise; a True condition is never set back to False (later cycles for extra
members); nothing is written when status, reason, message and observedGeneration are all
unchanged; lastTransitionTime moves only when the status does. The patch is a strategic
merge patch of status, merged by condition type.

Upstream sends it from the cycle and waits; here it goes out from a background task,
coalesced per PodGroup (only the latest wanted condition of a group is ever sent), at
most `max_in_flight` at once, fenced by the lease like every leader-only write. Every
outcome is counted in scheduler_podgroup_status_patches_total{result}.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from scheduler.client.errors import ApiError, LeaseNotHeld, NotFound
from scheduler.metrics import PodGroupMetrics
from scheduler.model.pod_group import INITIALLY_SCHEDULED, GroupCondition, PodGroupInfo
from scheduler.supervisor import TaskSet
from scheduler.timestamps import rfc3339

__all__ = ["GroupStatusWriter", "WantedCondition"]

log = logging.getLogger(__name__)

Patch = Callable[[str, str, dict[str, Any]], Awaitable[Any]]

MAX_REMEMBERED = 10000

WRITTEN = "written"
UNCHANGED = "unchanged"
COALESCED = "coalesced"
GONE = "gone"
FAILED = "failed"
FENCED = "fenced"


@dataclass(frozen=True, slots=True)
class WantedCondition:
    status: str  # "True" / "False"
    reason: str  # Scheduled, Unschedulable, SchedulerError
    message: str


def condition_patch(
    group: PodGroupInfo, wanted: WantedCondition, now: dt.datetime
) -> dict[str, Any] | None:
    """The patch that makes the group's condition `wanted`, None when there is nothing
    to write (upstream's rule above)."""
    old: GroupCondition | None = group.initially_scheduled
    if old is not None and old.status == "True" and wanted.status != "True":
        return None  # placed once: later cycles for extra members do not regress it
    if old is not None and (
        old.status, old.reason, old.message, old.observed_generation
    ) == (wanted.status, wanted.reason, wanted.message, group.generation):
        return None
    since = rfc3339(now)
    if old is not None and old.status == wanted.status and old.last_transition_time:
        since = old.last_transition_time
    condition = {
        "type": INITIALLY_SCHEDULED,
        "status": wanted.status,
        "reason": wanted.reason,
        "message": wanted.message,
        "observedGeneration": group.generation,
        "lastTransitionTime": since,
    }
    return {"status": {"conditions": [condition]}}


class GroupStatusWriter:
    def __init__(
        self,
        patch: Patch,
        *,
        metrics: PodGroupMetrics,
        tasks: TaskSet | None = None,
        max_in_flight: int = 4,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._patch = patch
        self._metrics = metrics
        self._tasks = tasks if tasks is not None else TaskSet("podgroup-status-writes")
        self._max_in_flight = max_in_flight
        self._now = now
        # group key -> (the group as last read, what it should say), oldest first
        self._waiting: OrderedDict[str, tuple[PodGroupInfo, WantedCondition]] = OrderedDict()
        self._in_flight = 0
        # PodGroup uid -> the condition this writer last wrote: the informer's copy may
        # not show it yet when the next cycle of the group ends (a True must not be
        # followed by a False the cache's stale copy would allow); bounded, oldest out
        self._sent: OrderedDict[str, GroupCondition] = OrderedDict()
        # PodGroup uids this writer was asked to mark placed (True): never False after,
        # even before that write lands (the next cycle of the group may end first)
        self._placed: OrderedDict[str, None] = OrderedDict()

    def _count(self, result: str) -> None:
        self._metrics.status_patches.labels(result=result).inc()

    def _latest(self, group: PodGroupInfo) -> PodGroupInfo:
        sent = self._sent.get(group.uid)
        if sent is None or sent == group.initially_scheduled:
            return group
        return dataclasses.replace(group, initially_scheduled=sent)

    def want(self, group: PodGroupInfo, wanted: WantedCondition) -> None:
        group = self._latest(group)
        waiting = self._waiting.get(group.key)
        placed = group.uid in self._placed or (waiting is not None and waiting[1].status == "True")
        if (placed and wanted.status != "True") or condition_patch(
            group, wanted, self._now()
        ) is None:
            self._count(UNCHANGED)
            return
        if wanted.status == "True" and group.uid:
            self._placed[group.uid] = None
            while len(self._placed) > MAX_REMEMBERED:
                self._placed.popitem(last=False)
        if group.key in self._waiting:
            self._count(COALESCED)
        self._waiting[group.key] = (group, wanted)
        self._waiting.move_to_end(group.key)
        self._start()

    def _start(self) -> None:
        while self._waiting and self._in_flight < self._max_in_flight:
            _, (group, wanted) = self._waiting.popitem(last=False)
            self._in_flight += 1
            self._tasks.spawn(self._write(group, wanted), name=f"podgroup-status-{group.key}")

    async def _write(self, group: PodGroupInfo, wanted: WantedCondition) -> None:
        try:
            group = self._latest(group)
            body = condition_patch(group, wanted, self._now())
            if body is None:
                self._count(UNCHANGED)
                return
            await self._patch(group.namespace, group.name, body)
            self._count(WRITTEN)
            c = body["status"]["conditions"][0]
            self._sent[group.uid] = GroupCondition(
                c["status"], c["reason"], c["message"], c["lastTransitionTime"],
                c["observedGeneration"],
            )  # fmt: skip
            self._sent.move_to_end(group.uid)
            while len(self._sent) > MAX_REMEMBERED:
                self._sent.popitem(last=False)
        except LeaseNotHeld:
            self._count(FENCED)
        except NotFound:
            self._count(GONE)
        except (TimeoutError, ApiError, OSError) as exc:
            log.warning("podgroup status write failed group=%s err=%s", group.key, exc)
            self._count(FAILED)
        finally:
            self._in_flight -= 1
            self._start()

    @property
    def waiting(self) -> int:
        return len(self._waiting)
