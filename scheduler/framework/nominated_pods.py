"""NominatedPods: the nominator as everything but the loop sees it, read only (the loop is
its only writer in the scheduling path; cache.Nominator is the one implementation).

A module of its own so that the handle (what plugins reach), the Filter rule's
nominated-pods part and preemption's evaluator name one Protocol without importing each
other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from scheduler.model.pod import PodInfo


class NominatedPods(Protocol):
    def nominated_pods_for_node(self, node_name: str, /) -> Iterable[PodInfo]: ...
    def nominated_node(self, pod: PodInfo, /) -> str | None: ...
    def nodes_with_nominations(self) -> Mapping[str, Mapping[str, PodInfo]]: ...
