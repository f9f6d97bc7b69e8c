"""Evicting one victim, shared by every preemption task of the process.

A victim gets the DisruptionTarget condition (unless it has it) and a DELETE with its
uid as precondition (a namesake that replaced it is never deleted). NotFound counts as
done. Each call checks the leader-election fence right before it is sent.

The bookkeeping is by victim uid: a victim whose DELETE another preemptor has in flight
is not deleted again (the second caller shares the first call's outcome), and one whose
DELETE succeeded is skipped for `ttl` seconds, until the informer shows its
deletionTimestamp.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, Protocol

from scheduler.client.errors import ApiError, Conflict, LeaseNotHeld, NotFound
from scheduler.clock import Clock
from scheduler.model.pod import (
    CONDITION_DISRUPTION_TARGET,
    REASON_PREEMPTION_BY_SCHEDULER,
    PodInfo,
)
from scheduler.timestamps import rfc3339

log = logging.getLogger(__name__)

FENCED_PATCH = "patch pods/status"
FENCED_DELETE = "delete pods"


class PodWriter(Protocol):
    """The API calls preemption makes (client.dispatcher.Dispatcher is one)."""

    async def patch_pod_status(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]: ...

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]: ...


class VictimEvictions:
    def __init__(
        self,
        writer: PodWriter,
        fence: Callable[[str], bool],
        clock: Clock,
        wall: Callable[[], dt.datetime],
        ttl: float,
    ) -> None:
        self._writer = writer
        self._fence = fence
        self._clock = clock
        self._wall = wall
        self._ttl = ttl
        self._deleting: dict[str, asyncio.Future[bool]] = {}  # victim uid -> in-flight call
        self._deleted: dict[str, float] = {}  # victim uid -> when its DELETE succeeded

    def succeeded(self, uid: str) -> bool:
        """This victim's DELETE succeeded within the last `ttl` seconds."""
        self.prune()
        return uid in self._deleted

    def issued(self, uid: str) -> bool:
        """A DELETE for this victim is in flight or succeeded recently."""
        return uid in self._deleting or self.succeeded(uid)

    def prune(self) -> None:
        if not self._deleted:
            return
        horizon = self._clock.now() - self._ttl
        for uid in [u for u, t in self._deleted.items() if t < horizon]:
            del self._deleted[uid]

    async def evict(
        self,
        victim: PodInfo,
        preemptor: PodInfo,
        node: str,
        errors: list[str],
        *,
        preemptor_kind: str = "pod",
        quiet: bool = False,
    ) -> bool:
        """Evict `victim` for `preemptor` once across all tasks. True when it is (being)
        gone; a failure is appended to `errors` (and logged as a warning, at debug level
        when `quiet`: a retry whose caller logs once for all its attempts)."""
        if self.succeeded(victim.uid):
            return True
        in_flight = self._deleting.get(victim.uid)
        if in_flight is not None:
            # another preemptor is deleting it right now: share that call's outcome
            return await asyncio.shield(in_flight)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._deleting[victim.uid] = future
        good = False
        try:
            level = logging.DEBUG if quiet else logging.WARNING
            good = await self._evict(victim, preemptor, node, errors, preemptor_kind, level)
        finally:
            del self._deleting[victim.uid]
            if good:
                self._deleted[victim.uid] = self._clock.now()
            future.set_result(good)
        return good

    def _check_fence(self, operation: str) -> None:
        if not self._fence(operation):
            raise LeaseNotHeld(operation)

    async def _evict(
        self,
        victim: PodInfo,
        preemptor: PodInfo,
        node: str,
        errors: list[str],
        preemptor_kind: str,
        level: int,
    ) -> bool:
        if not victim.preempted_by_scheduler:
            condition = {
                "type": CONDITION_DISRUPTION_TARGET,
                "status": "True",
                "reason": REASON_PREEMPTION_BY_SCHEDULER,
                "message": (
                    f"{preemptor.scheduler_name}: preempting to accommodate a higher priority "
                    f"{preemptor_kind}"
                ),
                "lastTransitionTime": rfc3339(self._wall()),
            }
            try:
                self._check_fence(FENCED_PATCH)
                await self._writer.patch_pod_status(
                    victim.namespace, victim.name, {"status": {"conditions": [condition]}}
                )
            except NotFound:
                log.debug("victim already gone victim=%s", victim.key)
                return True
            except ApiError as exc:
                errors.append(f"condition on {victim.key}: {exc}")
                log.log(
                    level,
                    "victim condition patch failed victim=%s preemptor=%s err=%s",
                    victim.key,
                    preemptor.key,
                    exc,
                )
                return False
        try:
            self._check_fence(FENCED_DELETE)
            await self._writer.delete_pod(victim.namespace, victim.name, uid=victim.uid)
        except NotFound:
            log.debug("victim already gone victim=%s", victim.key)
            return True
        except Conflict as exc:
            # the uid precondition failed: the pod of that uid is gone and a namesake
            # (a StatefulSet's successor) stands in its place, which we must not delete
            log.info("victim replaced by a namesake victim=%s err=%s", victim.key, exc)
            return True
        except ApiError as exc:
            errors.append(f"delete {victim.key}: {exc}")
            log.log(
                level,
                "victim delete failed victim=%s preemptor=%s err=%s",
                victim.key,
                preemptor.key,
                exc,
            )
            return False
        log.info("preempted victim=%s preemptor=%s node=%s", victim.key, preemptor.key, node)
        return True
