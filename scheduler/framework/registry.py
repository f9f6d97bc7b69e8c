"""Plugin registry: name -> the plugin's class and its factory(args, handle) (upstream
runtime.Registry, which keeps the factory only: upstream learns a plugin's extension points
from the instance; here the class answers them before any instance exists, so the
configuration loader can expand multiPoint and name a misplaced plugin's field).

In-tree plugins come from `scheduler.plugins.registry.in_tree_registry()`; other layers
(DefaultPreemption from scheduler.preemption) register theirs on top, and
`scheduler.catalog` holds the whole set this scheduler ships.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import extension_points_of

PluginFactory = Callable[[Any, Handle], Any]
P = TypeVar("P")


class RegistryError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Registration(Generic[P]):
    """A plugin's class and the factory that makes it (mypy holds the factory to the
    class; the framework checks each instance's Protocols again where it places it)."""

    plugin_type: type[P]
    factory: Callable[[Any, Handle], P]


class Registry:
    def __init__(self, registrations: Mapping[str, Registration[Any]] | None = None) -> None:
        self._entries: dict[str, Registration[Any]] = dict(registrations or {})

    def register(
        self, name: str, plugin_type: type[P], factory: Callable[[Any, Handle], P]
    ) -> None:
        if name in self._entries:
            raise RegistryError(f"plugin {name!r} is already registered")
        self._entries[name] = Registration(plugin_type, factory)

    def merge(self, other: Registry) -> Registry:
        out = Registry(self._entries)
        for name, entry in other._entries.items():
            out.register(name, entry.plugin_type, entry.factory)
        return out

    def get(self, name: str) -> PluginFactory:
        try:
            return self._entries[name].factory
        except KeyError:
            raise RegistryError(f"plugin {name!r} is not registered") from None

    def plugin_type(self, name: str) -> type:
        try:
            return self._entries[name].plugin_type
        except KeyError:
            raise RegistryError(f"plugin {name!r} is not registered") from None

    def implements(self, name: str) -> frozenset[str]:
        """The extension points (YAML keys) the plugin's class serves; none if unknown
        (a configuration loader's ImplementsFn for this registry)."""
        entry = self._entries.get(name)
        return extension_points_of(entry.plugin_type) if entry is not None else frozenset()

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)
