"""Strict reading of raw YAML: unknown fields, wrong types and duplicate keys are errors.

kube-scheduler decodes its config strictly (unknown or duplicate fields fail); so do we,
and every error names the dotted field path (``profiles[0].plugins.score.enabled[2].name``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from scheduler.config.duration import parse_duration
from scheduler.config.errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML keeps the last silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            mark = key_node.start_mark
            raise ConfigError("", f"duplicate field {key!r} at line {mark.line + 1}")
        out[key] = loader.construct_object(value_node, deep=True)
    return out


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except ConfigError:
        raise
    except yaml.YAMLError as e:
        raise ConfigError("", f"{source}: invalid YAML: {e}") from e


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, Mapping):
        return "object"
    return type(v).__name__


class Fields:
    """Typed getters over one raw mapping; ``done()`` rejects fields nobody read."""

    def __init__(self, raw: Any, path: str) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(path, f"must be an object, got {_type_name(raw)}")
        self.raw: Mapping[str, Any] = raw
        self.path = path
        self._seen: set[str] = set()

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def get(self, key: str) -> Any:
        self._seen.add(key)
        return self.raw.get(key)

    def int_(self, key: str, default: int) -> int:
        v = self.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(self.sub(key), f"must be an integer, got {_type_name(v)}")
        return v

    def optional_int(self, key: str) -> int | None:
        return self.int_(key, 0) if self.has(key) else self.get(key)

    def float_(self, key: str, default: float) -> float:
        v = self.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ConfigError(self.sub(key), f"must be a number, got {_type_name(v)}")
        return float(v)

    def bool_(self, key: str, default: bool) -> bool:
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ConfigError(self.sub(key), f"must be a boolean, got {_type_name(v)}")
        return v

    def str_(self, key: str, default: str) -> str:
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise ConfigError(self.sub(key), f"must be a string, got {_type_name(v)}")
        return v

    def duration(self, key: str, default: float) -> float:
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise ConfigError(
                self.sub(key), f'must be a duration string such as "15s", got {_type_name(v)}'
            )
        try:
            return parse_duration(v)
        except ValueError as e:
            raise ConfigError(self.sub(key), f'{e} (use Go syntax such as "15s", "1m30s")') from e

    def list_(self, key: str) -> list[Any]:
        v = self.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise ConfigError(self.sub(key), f"must be a list, got {_type_name(v)}")
        return v

    def obj(self, key: str) -> Fields:
        return Fields(self.get(key), self.sub(key))

    def done(self) -> None:
        unknown = [k for k in self.raw if k not in self._seen]
        if unknown:
            raise ConfigError(self.sub(str(unknown[0])), "unknown field")
