"""One shared copy of the record parts that many pods repeat.

The pods of one ReplicaSet, Job or StatefulSet carry the same labels, owner reference
and status conditions, and every pod of a namespace or node the same namespace or node
name; each decoded pod brings its own copies of them. At 150,000 pods those copies are
most of a record's memory (docs/performance.md, "Start-up at scale"), so the pod reader
hands every record the copy already held by an earlier pod, when there is one.

Only immutable values are shared (strings, tuples of frozen records) and mappings that
nothing writes to (a record's labels are read-only by contract: PodInfo.labels is a
Mapping). The tables are bounded: when one is full its oldest entry goes first, so a
cluster of unique values costs one lookup per value and nothing more. A LIST returns a
namespace's pods sorted by name, so the replicas of one owner arrive one after another
and find their shared copy even when the cluster has more owners than a table holds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

__all__ = ["Canonical", "shared_labels", "shared_string"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# entries per table: enough for the distinct label sets, owners and condition lists of a
# large cluster's recently read pods; each entry is a few hundred bytes
TABLE_LIMIT = 8192


class Canonical(Generic[K, V]):
    """key -> the one shared value built for it (bounded, oldest entry dropped first)."""

    def __init__(self, limit: int = TABLE_LIMIT) -> None:
        self._limit = limit
        self._values: dict[K, V] = {}

    def get(self, key: K, build: Callable[[], V]) -> V:
        value = self._values.get(key)
        if value is None:
            value = build()
            if len(self._values) >= self._limit:
                del self._values[next(iter(self._values))]
            self._values[key] = value
        return value

    def __len__(self) -> int:
        return len(self._values)


_labels: Canonical[tuple[tuple[str, str], ...], Mapping[str, str]] = Canonical()
_EMPTY: Mapping[str, str] = {}


def shared_labels(labels: dict[str, str]) -> Mapping[str, str]:
    """The shared copy of a label map (validated strings); equal maps with their keys in
    the same order share one."""
    if not labels:
        return _EMPTY
    return _labels.get(tuple(labels.items()), lambda: labels)


def shared_string(value: str) -> str:
    """The interned copy of a string that many records repeat (namespace, node name,
    phase). CPython frees an interned string with its last reference."""
    return sys.intern(value)
