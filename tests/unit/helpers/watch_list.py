"""What an API server answers a watch list with (client/informer.py `_watch_list_once`):
an ADDED event per object, then the BOOKMARK that ends the initial events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Raw = dict[str, Any]


def is_watch_list(query: Any) -> bool:
    return ("sendInitialEvents", "true") in list(query or ())


def initial_events(items: Iterable[Raw], resource_version: str = "10") -> list[Raw]:
    end = {
        "kind": "Pod",
        "metadata": {
            "resourceVersion": resource_version,
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }
    return [*({"type": "ADDED", "object": i} for i in items), {"type": "BOOKMARK", "object": end}]
