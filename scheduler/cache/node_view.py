"""NodeView: one node with the pods on it and their aggregates (upstream's NodeInfo).

The cache keeps one mutable NodeView per node; the snapshot holds clones, so a cycle
never sees the cache change under it. Requests of every pod on the node count: pods of
other schedulers, assumed pods, and terminating pods until their delete arrives.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from scheduler.model.node import NodeInfo
from scheduler.model.pod import HostPort, PodInfo
from scheduler.model.taints import Taint

_EMPTY_NODE_LABELS: Mapping[str, str] = {}


class NodeView:
    __slots__ = (
        "generation",
        "node",
        "non_zero_cpu",
        "non_zero_memory",
        "pods",
        "requested",
        "used_ports",
        "with_affinity",
        "with_required_anti_affinity",
    )

    def __init__(self, node: NodeInfo | None = None) -> None:
        self.node = node
        self.pods: dict[str, PodInfo] = {}
        self.requested: dict[str, int] = {}
        self.non_zero_cpu = 0
        self.non_zero_memory = 0
        self.used_ports: list[HostPort] = []
        self.with_affinity = 0
        self.with_required_anti_affinity = 0
        self.generation = 0

    # -- convenience accessors (a view in a snapshot always has a node)
    @property
    def name(self) -> str:
        return self.node.name if self.node is not None else ""

    @property
    def labels(self) -> Mapping[str, str]:
        return self.node.labels if self.node is not None else _EMPTY_NODE_LABELS

    @property
    def taints(self) -> tuple[Taint, ...]:
        return self.node.taints if self.node is not None else ()

    @property
    def allocatable(self) -> Mapping[str, int]:
        return self.node.allocatable if self.node is not None else {}

    @property
    def pod_count(self) -> int:
        return len(self.pods)

    def add_pod(self, pod: PodInfo) -> None:
        self.pods[pod.uid] = pod
        req = self.requested
        for k, v in pod.requests.items():
            req[k] = req.get(k, 0) + v
        self.non_zero_cpu += pod.non_zero_cpu
        self.non_zero_memory += pod.non_zero_memory
        if pod.host_ports:
            self.used_ports.extend(pod.host_ports)
        if pod.has_pod_affinity:
            self.with_affinity += 1
            if pod.required_anti_affinity:  # one of the pod's affinity terms
                self.with_required_anti_affinity += 1

    def remove_pod(self, pod: PodInfo) -> bool:
        """Remove by uid, subtracting the aggregates of the stored record."""
        old = self.pods.pop(pod.uid, None)
        if old is None:
            return False
        req = self.requested
        for k, v in old.requests.items():
            left = req.get(k, 0) - v
            if left:
                req[k] = left
            else:
                req.pop(k, None)
        self.non_zero_cpu -= old.non_zero_cpu
        self.non_zero_memory -= old.non_zero_memory
        for hp in old.host_ports:
            self.used_ports.remove(hp)
        if old.has_pod_affinity:
            self.with_affinity -= 1
            if old.required_anti_affinity:  # one of the pod's affinity terms
                self.with_required_anti_affinity -= 1
        return True

    def clone_without(self, uids: Collection[str]) -> NodeView:
        """A clone without the pods of `uids` (uids not here are ignored): the same
        pods, in the same order, and the same aggregates as a clone after remove_pod
        of each. When fewer pods stay than go (a preemption dry run removes every
        lower-priority pod), the kept pods' aggregates are summed anew instead of
        subtracting the others'. (The two ways may differ only in the order of
        `used_ports` and in `requested` keys whose amount is 0: readers treat the
        ports as a set of conflicts and a missing resource as 0.)"""
        kept = [p for uid, p in self.pods.items() if uid not in uids]
        if len(kept) * 2 >= len(self.pods):
            c = self.clone()
            for uid in uids:
                old = c.pods.get(uid)
                if old is not None:
                    c.remove_pod(old)
            return c
        c = NodeView(self.node)
        c.generation = self.generation
        for p in kept:
            c.add_pod(p)
        return c

    def clone(self) -> NodeView:
        c = NodeView.__new__(NodeView)
        c.node = self.node
        c.pods = dict(self.pods)
        c.requested = dict(self.requested)
        c.non_zero_cpu = self.non_zero_cpu
        c.non_zero_memory = self.non_zero_memory
        c.used_ports = list(self.used_ports)
        c.with_affinity = self.with_affinity
        c.with_required_anti_affinity = self.with_required_anti_affinity
        c.generation = self.generation
        return c

    def __repr__(self) -> str:
        return f"NodeView({self.name!r}, pods={len(self.pods)})"
