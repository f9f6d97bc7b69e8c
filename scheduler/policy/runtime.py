"""The PreemptionPolicy machinery of one scheduler process, wired in one place.

The app creates it before the frameworks (the evaluator reads `store`), starts it with
the informers (both its tasks are long-lived tasks of the app's Supervisor: the watcher
and the status writer), registers `readyz` as the readiness check "preemption-policies",
tells it when this replica starts leading, and stops it during shutdown.

It reads and writes on the scheduler's own connection and dispatcher: one identity
(kubeconfig with exec plugins or token files, in-cluster token, the same server address).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from scheduler.client.connection import Connection
from scheduler.client.dispatcher import Dispatcher
from scheduler.client.errors import NotFound
from scheduler.metrics import PolicyMetrics
from scheduler.policy.status import PolicyStatusWriter
from scheduler.policy.store import PolicyStore
from scheduler.policy.sync import PolicySync
from scheduler.policy.watcher import PolicyWatcher
from scheduler.supervisor import Supervisor

__all__ = ["READINESS_CHECK", "PolicyRuntime"]

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
READINESS_CHECK = "preemption-policies"


class PolicyRuntime:
    def __init__(
        self,
        connection: Connection,
        dispatcher: Dispatcher,
        ns_labels: Callable[[str], Mapping[str, str] | None],
        *,
        is_leader: Callable[[], bool],
        metrics: PolicyMetrics | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        # the queue is built after the preemption plugin that reads this runtime's store:
        # set_requeue_waiting wires it (until then nothing waits)
        self._requeue_waiting: Callable[[], None] = lambda: None
        metrics = metrics if metrics is not None else PolicyMetrics()
        self.metrics = metrics
        self.sync = PolicySync()
        self.store = PolicyStore(
            ns_labels, metrics=metrics, on_spec_change=self._requeue, sync=self.sync
        )
        self.watcher = PolicyWatcher(connection, self.store, self.sync, metrics=metrics)

        def became_current() -> None:
            self.watcher.became_current()
            # the preemptors refused meanwhile get their attempt now
            self._requeue()

        self.sync.on_current = became_current
        metrics.synced.set_function(lambda: 1.0 if self.sync.current else 0.0)
        self.status = PolicyStatusWriter(
            self.store,
            self._patch_status,
            is_leader,
            lambda exc: isinstance(exc, NotFound),
            metrics=metrics,
        )
        self.store.on_change = self.status.mark
        self._tasks: list[asyncio.Task[Any]] = []

    def set_requeue_waiting(self, requeue_waiting: Callable[[], None]) -> None:
        """What gives every waiting pod a fresh attempt when the rules change."""
        self._requeue_waiting = requeue_waiting

    def _requeue(self) -> None:
        self._requeue_waiting()

    async def _patch_status(self, path: str, body: dict[str, Any]) -> Any:
        # a leader-only write: fenced as a bind is, and ending with the lease
        return await self._dispatcher.call(
            "patch", "preemptionpolicies/status", "PATCH", path, body=body,
            content_type=MERGE_PATCH, fenced=True,
        )  # fmt: skip

    def readyz(self) -> str | None:
        """The readiness check: None while the policies are in sync."""
        return self.sync.reason()

    def start(self, supervisor: Supervisor) -> None:
        self._tasks = [
            supervisor.spawn("policy-watcher", self.watcher.run()),
            supervisor.spawn("policy-status", self.status.run()),
        ]

    def started_leading(self) -> None:
        self.status.mark_all()

    async def stop(self) -> None:
        """During shutdown (after the supervisor's begin_shutdown)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
