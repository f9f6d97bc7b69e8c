"""Plugin registry: name -> factory(args, handle) -> plugin (upstream runtime.Registry).

In-tree plugins come from `scheduler.plugins.registry.in_tree_registry()`; other layers
(DefaultPreemption from scheduler.preemption) register theirs on top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from scheduler.framework.handle import Handle

PluginFactory = Callable[[Any, Handle], Any]


class RegistryError(ValueError):
    pass


class Registry:
    def __init__(self, factories: dict[str, PluginFactory] | None = None) -> None:
        self._factories: dict[str, PluginFactory] = dict(factories or {})

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self._factories:
            raise RegistryError(f"plugin {name!r} is already registered")
        self._factories[name] = factory

    def merge(self, other: Registry) -> Registry:
        out = Registry(self._factories)
        for name, f in other._factories.items():
            out.register(name, f)
        return out

    def get(self, name: str) -> PluginFactory:
        try:
            return self._factories[name]
        except KeyError:
            raise RegistryError(f"plugin {name!r} is not registered") from None

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)
