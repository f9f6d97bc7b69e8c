"""Status: the outcome of one plugin call, as upstream's framework.Status.

Expected failure is a value, never an exception. Each code says what it means for
requeue and backoff:

- SUCCESS: go on.
- ERROR: an internal error; the pod is retried with backoff.
- UNSCHEDULABLE: the pod does not fit this node now, but removing pods (preemption) or a
  cluster change could make it fit. PostFilter may run.
- UNSCHEDULABLE_AND_UNRESOLVABLE: no preemption on this node can help (wrong labels,
  untolerated taint, ...). PostFilter skips such nodes.
- WAIT: Permit asks the pod to wait.
- SKIP: the plugin has nothing to do for this pod (PreFilter/PreScore); its
  Filter/Score are skipped for the cycle.

Upstream's seventh code, Pending, is left out: no in-tree plugin returns it (upstream's
framework only reads it), and this scheduler runs in-tree plugins only.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    error: BaseException | None = field(default=None, compare=False)

    @classmethod
    def success(cls) -> Status:
        return _SUCCESS

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, reasons, plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)

    @classmethod
    def from_error(cls, error: BaseException, plugin: str = "") -> Status:
        return cls(Code.ERROR, (str(error),), plugin, error)

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_rejected(self) -> bool:
        """Unschedulable in either form: the pod does not fit (not an internal error)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)


_SUCCESS = Status()


def with_plugin(status: Status, plugin: str) -> Status:
    """The status, naming `plugin` as its source unless it succeeded or names one."""
    if status.code == Code.SUCCESS or status.plugin:
        return status
    # the constructor, not dataclasses.replace: this runs for every rejection of a
    # preemption dry run's reprieve steps, and replace() costs several times more
    return Status(status.code, status.reasons, plugin, status.error)


def go_list(items: Sequence[str]) -> str:
    """A []string as Go's %v prints it: "[a b c]" (upstream's messages list plugins so)."""
    return "[" + " ".join(items) + "]"
