"""The nominator: pods nominated to nodes (by preemption, or nominatedNodeName in status).

Driven by two sources: the preemption evaluator (`add(pod, node)`) and informer records
of pending pods (`on_pod_update` / `on_pod_delete`). A nomination disappears when its pod
is bound (node_name set), deleted, or re-nominated elsewhere; an API update that clears
nominatedNodeName (non-empty -> empty) clears it too. An update that never carried a
nomination keeps the in-memory one (upstream keeps it: the status patch may lag).
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.model.pod import PodInfo


class Nominator:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def add(self, pod: PodInfo, node_name: str | None = None) -> None:
        """Nominate `pod` to `node_name` (default: the pod's status nominatedNodeName)."""
        node = node_name if node_name is not None else pod.nominated_node_name
        self.remove(pod)
        if not node or pod.node_name:
            return
        self._by_node.setdefault(node, {})[pod.uid] = pod
        self._node_of[pod.uid] = node

    def remove(self, pod: PodInfo) -> None:
        node = self._node_of.pop(pod.uid, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(pod.uid, None)
            if not pods:
                del self._by_node[node]

    # informer-driven
    def on_pod_add(self, pod: PodInfo) -> None:
        if pod.node_name:
            self.remove(pod)
        elif pod.nominated_node_name:
            self.add(pod)

    def on_pod_update(self, old: PodInfo | None, new: PodInfo) -> None:
        if new.node_name:
            self.remove(new)
            return
        current = self._node_of.get(new.uid)
        if new.nominated_node_name:
            self.add(new)
        elif old is not None and old.nominated_node_name:
            self.remove(new)  # the API cleared it
        elif current is not None:
            self.add(new, current)  # keep the in-memory nomination, refresh the record

    def on_pod_delete(self, pod: PodInfo) -> None:
        self.remove(pod)

    # reads
    def nominated_node(self, pod: PodInfo) -> str | None:
        return self._node_of.get(pod.uid)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def nodes_with_nominations(self) -> Mapping[str, Mapping[str, PodInfo]]:
        return self._by_node

    def __len__(self) -> int:
        return len(self._node_of)
