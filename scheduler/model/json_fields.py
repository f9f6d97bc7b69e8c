"""Readers for the fields of the API server's raw JSON that every model record shares.

Each reader raises InvalidObject naming the field; `Problems` turns such an error into
a recorded problem, so a record built from a partly unreadable object keeps the rest
(see pod_from_dict and node_from_dict).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

from scheduler.model.errors import InvalidObject

_R = TypeVar("_R")
_D = TypeVar("_D")


def parse_time(value: Any, path: str) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch (None when absent)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidObject(path, "must be an RFC 3339 timestamp")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError as e:
        raise InvalidObject(path, f"invalid timestamp {value!r}") from e


def string_map(raw: Any, path: str) -> dict[str, str]:
    """A map of strings (labels, nodeSelector); absent reads as empty."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise InvalidObject(path, "must be a map of strings")
    return dict(raw)


def json_list(raw: Any, path: str) -> list[Any]:
    """A list; absent reads as empty."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidObject(path, "must be a list")
    return raw


def object_entries(raw: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each entry of a list of objects with its path; absent reads as empty, and an
    entry that is not an object fails the whole list."""
    for i, entry in enumerate(json_list(raw, path)):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict):
            raise InvalidObject(where, "must be an object")
        yield where, entry


def json_int(raw: Any, path: str, default: int) -> int:
    """An integer (a JSON boolean is not one); `default` when absent."""
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidObject(path, f"must be an integer, got {raw!r}")
    return raw


def object_name(raw: Any, kind: str) -> tuple[Mapping[str, Any], str]:
    """An object's metadata and its name, which every record needs: without a readable
    name there is no record (InvalidObject)."""
    if not isinstance(raw, Mapping):
        raise InvalidObject("", f"{kind} must be an object")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise InvalidObject("metadata", "must be an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject("metadata.name", "must be a non-empty string")
    return meta, name


class Problems:
    """Collects what could not be read (each "path: detail"), so one bad field of an
    object costs only itself."""

    def __init__(self, found: list[str] | None = None) -> None:
        self.found: list[str] = found if found is not None else []

    def add(self, path: str, detail: str) -> None:
        self.found.append(str(InvalidObject(path, detail)))

    def read(self, fn: Callable[..., _R], *args: Any, default: _D) -> _R | _D:
        """fn(*args), or `default` with the problem recorded."""
        try:
            return fn(*args)
        except InvalidObject as e:
            self.found.append(str(e))
            return default

    def objects(self, raw: Any, path: str) -> list[dict[str, Any]]:
        """The entries of a list that are objects; an unreadable list is recorded and
        reads as empty, an entry that is not an object is passed over."""
        entries: list[Any] = self.read(json_list, raw, path, default=[])
        return [e for e in entries if isinstance(e, dict)]
