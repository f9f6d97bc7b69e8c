"""A bounded cache of answers that expire: the delegated authenticator's and authorizer's
memory of recent TokenReviews and SubjectAccessReviews.

Upstream keeps them in a cache keyed by the request (k8s.io/apiserver@v0.37.2
pkg/authentication/token/cache, and the webhook authorizer's LRU in
plugin/pkg/authorizer/webhook): an entry lives its TTL (chosen per entry: allowed and
denied answers have their own), and a full cache forgets its least recently used entry
first, so a stream of distinct callers cannot grow it without bound."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["TTLCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    def __init__(self, max_entries: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The live value for `key` (now the most recently used), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def set(self, key: K, value: V, ttl: float) -> None:
        """Keep `value` for `ttl` seconds (0 or less: not kept, as upstream's zero TTL)."""
        if ttl <= 0:
            self._entries.pop(key, None)
            return
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
