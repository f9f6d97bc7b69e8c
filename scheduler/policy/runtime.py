"""The PreemptionPolicy machinery of one scheduler process, wired in one place.

The app creates it before the frameworks (the evaluator reads `store`), starts it once
the HTTP server is up, tells it when this replica starts leading, and stops it during
shutdown. kopf is imported only when `start()` runs (scheduler.policy.controller).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from scheduler.client.dispatcher import Dispatcher
from scheduler.client.errors import NotFound
from scheduler.metrics import PolicyMetrics
from scheduler.policy.status import StatusWriter
from scheduler.policy.store import PolicyStore

if TYPE_CHECKING:
    from scheduler.policy.controller import PolicyController

__all__ = ["PolicyRuntime"]

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"


class PolicyRuntime:
    def __init__(
        self,
        dispatcher: Dispatcher,
        ns_labels: Callable[[str], Mapping[str, str] | None],
        *,
        kubeconfig: str | None,
        is_leader: Callable[[], bool],
        requeue_waiting: Callable[[], None],
        on_stop_signal: Callable[[], None] | None = None,
        metrics: PolicyMetrics | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._kubeconfig = kubeconfig
        self._on_stop_signal = on_stop_signal
        metrics = metrics if metrics is not None else PolicyMetrics()
        self.store = PolicyStore(ns_labels, metrics=metrics, on_spec_change=requeue_waiting)
        self.status = StatusWriter(
            self.store,
            self._patch_status,
            is_leader,
            lambda exc: isinstance(exc, NotFound),
            metrics=metrics,
        )
        self.store.on_change = self.status.mark
        self.controller: PolicyController | None = None
        self._writer: asyncio.Task[None] | None = None

    async def _patch_status(self, path: str, body: dict[str, Any]) -> Any:
        # a leader-only write: fenced as a bind is, and ending with the lease
        return await self._dispatcher.call(
            "patch", "preemptionpolicies/status", "PATCH", path, body=body,
            content_type=MERGE_PATCH, fenced=True,
        )  # fmt: skip

    async def start(self) -> None:
        from scheduler.policy.controller import PolicyController

        self.controller = PolicyController(
            self.store, self._kubeconfig, on_stop_signal=self._on_stop_signal
        )
        await self.controller.start()
        self._writer = asyncio.create_task(self.status.run(), name="policy-status")

    def started_leading(self) -> None:
        self.status.mark_all()

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
