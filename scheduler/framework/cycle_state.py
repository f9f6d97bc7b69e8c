"""CycleState: per-cycle plugin scratch space (upstream framework.CycleState).

Values written by PreFilter are read by Filter and Score. `clone()` is used when the
framework evaluates a node with extra pods (nominated pods, preemption dry runs): values
with a `clone()` method are cloned, others are shared (they must be immutable then).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class StateData(Protocol):
    def clone(self) -> StateData: ...


class CycleState:
    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()  # plugins whose PreFilter returned SKIP
        self.skip_score: set[str] = set()  # plugins whose PreScore returned SKIP

    def read(self, key: str) -> Any:
        """The value under `key`; KeyError when PreFilter/PreScore did not write it."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        c = CycleState()
        for k, v in self._data.items():
            # getattr, not isinstance(v, StateData): a runtime Protocol check walks the
            # Protocol's attributes on every call, and this runs per key per clone
            clone = getattr(v, "clone", None)
            c._data[k] = clone() if clone is not None else v
        c.skip_filter = set(self.skip_filter)
        c.skip_score = set(self.skip_score)
        return c
