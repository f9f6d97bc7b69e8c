"""In-tree plugins, one module per plugin, named as upstream's. See registry.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.framework.registry import Registry


def default_registry() -> Registry:
    """The in-tree registry (same as registry.in_tree_registry())."""
    from scheduler.plugins.registry import in_tree_registry

    return in_tree_registry()


__all__ = ["default_registry"]
