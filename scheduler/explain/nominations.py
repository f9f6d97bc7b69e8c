"""A copy-on-write view of the scheduler's nominator for explain's group dry run.

The pod-group simulation (group_algorithm.py) drops a member's nomination while the member
is assumed and puts it back after; on the scheduler's nominator that would be a write
(and, between explain's steps, one the loop could see). This view keeps those changes to
itself and reads the nominator for everything else, as it is at each read.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.framework.nominated_pods import NominatedPods
from scheduler.model.pod import PodInfo

__all__ = ["NominationOverlay"]


class NominationOverlay:
    def __init__(self, base: NominatedPods) -> None:
        self._base = base
        self._over: dict[str, tuple[str | None, PodInfo]] = {}  # uid -> (node or None, pod)

    def add(self, pod: PodInfo, node_name: str | None = None) -> None:
        """As Nominator.add: the pod's own nominatedNodeName by default; none when bound."""
        node = node_name if node_name is not None else pod.nominated_node_name
        self._over[pod.uid] = (None if pod.node_name or not node else node, pod)

    def remove(self, pod: PodInfo) -> None:
        self._over[pod.uid] = (None, pod)

    def nominated_node(self, pod: PodInfo) -> str | None:
        if pod.uid in self._over:
            return self._over[pod.uid][0]
        return self._base.nominated_node(pod)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self.nodes_with_nominations().get(node_name, {}).values())

    def nodes_with_nominations(self) -> Mapping[str, Mapping[str, PodInfo]]:
        base = self._base.nodes_with_nominations()
        if not self._over:
            return base
        out: dict[str, dict[str, PodInfo]] = {}
        for node, pods in base.items():
            kept = {uid: p for uid, p in pods.items() if uid not in self._over}
            if kept:
                out[node] = kept
        for uid, (over, pod) in self._over.items():
            if over:
                out.setdefault(over, {})[uid] = pod
        return out
