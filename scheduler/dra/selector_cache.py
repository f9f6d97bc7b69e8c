"""Compiled device selectors by expression (upstream's cel/cache.go). The CEL engine
behind them (scheduler/dra/cel_selector.py) is imported on the first compilation: it
costs tenths of a second to load, which a scheduler that never sees a selector (no pod
with claims) should not pay at start-up.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from scheduler.dra.selector import MAX_COMPILED

if TYPE_CHECKING:
    from scheduler.dra.cel_selector import CompiledSelector


class SelectorCache:
    """Compiled selectors by expression, least recently used dropped past MAX_COMPILED
    (cel/cache.go). A failed compilation is not kept, as upstream."""

    def __init__(self, max_entries: int = MAX_COMPILED) -> None:
        self._max = max_entries
        self._compiled: OrderedDict[str, CompiledSelector] = OrderedDict()

    def get(self, expression: str) -> CompiledSelector:
        """Raises CompileError."""
        found = self._compiled.get(expression)
        if found is not None:
            self._compiled.move_to_end(expression)
            return found
        # imported here, on the first compilation: the CEL engine is costly to load
        from scheduler.dra.cel_selector import compile_selector

        compiled = compile_selector(expression)
        self._compiled[expression] = compiled
        if len(self._compiled) > self._max:
            self._compiled.popitem(last=False)
        return compiled

    def __len__(self) -> int:
        return len(self._compiled)
