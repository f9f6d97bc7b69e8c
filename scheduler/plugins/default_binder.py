"""DefaultBinder (Bind): calls the handle's async binder (the client's pods/binding)."""

from __future__ import annotations

from scheduler.client.errors import ApiError
from scheduler.config import names
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    BindPlugin,
)
from scheduler.framework.status import Code, Status
from scheduler.model.pod import PodInfo


class DefaultBinder(BindPlugin):
    name = names.DEFAULT_BINDER

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        try:
            await self._handle.binder(pod, node_name)
        except ApiError as e:
            # client-go's StatusError reads as the API server's own message, which is
            # what upstream's event then says
            return Status(Code.ERROR, (e.message or str(e),), self.name, e)
        except Exception as e:  # the binding cycle turns this into forget + requeue
            return Status.from_error(e, plugin=self.name)
        return Status.success()


def new(args: object, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)
