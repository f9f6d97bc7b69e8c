"""Node/pod cache, assumed pods, incremental snapshot with its node table, nominator."""

from scheduler.cache.cache import DEFAULT_ASSUMED_POD_TTL, Cache, CacheError
from scheduler.cache.node_table import NodeTable
from scheduler.cache.node_view import NodeView
from scheduler.cache.nominator import Nominator
from scheduler.cache.snapshot import Snapshot

__all__ = [
    "DEFAULT_ASSUMED_POD_TTL",
    "Cache",
    "CacheError",
    "NodeTable",
    "NodeView",
    "Nominator",
    "Snapshot",
]
