"""NodeView: one node with the pods on it and their aggregates (upstream's NodeInfo).

The cache keeps one mutable NodeView per node; the snapshot holds clones, so a cycle
never sees the cache change under it. Requests of every pod on the node count: pods of
other schedulers, assumed pods, and terminating pods until their delete arrives.

`pods` iterates in the order of upstream's NodeInfo.Pods under the same history of adds
and removes: an added pod goes last (AddPodInfo appends), and a removed pod's place is
taken by the last pod (removeFromSlice in pkg/scheduler/framework/types.go, v1.37.2);
an update is a remove and an add (cache.updatePod), so the updated pod goes last. The
preemption dry run lists its possible victims in this order, and upstream's unstable
sort leaves pods that tie on priority and start time according to it.
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
        """Remove by uid, subtracting the aggregates of the stored record; the last pod
        takes the removed pod's place, as in upstream's NodeInfo (see the module)."""
        pods = self.pods
        uid = pod.uid
        if uid not in pods:
            return False
        last = next(reversed(pods))
        if last == uid:
            old = pods.pop(uid)
        else:
            # a dict cannot move an entry into a hole: rebuild it in upstream's order
            old = pods[uid]
            moved = pods.pop(last)
            self.pods = {
                (last if k == uid else k): (moved if k == uid else v) for k, v in pods.items()
            }
        self._subtract(old)
        return True

    def _discard_pod(self, uid: str) -> None:
        """Remove without keeping upstream's order (a dry run's private copy, whose
        order nothing reads)."""
        old = self.pods.pop(uid, None)
        if old is not None:
            self._subtract(old)

    def _subtract(self, old: PodInfo) -> None:
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

    def clone_without(self, uids: Collection[str]) -> NodeView:
        """A clone without the pods of `uids` (uids not here are ignored): the same
        pods and the same aggregates as a clone after remove_pod of each (the kept
        pods in their order here, not upstream's order after those removals: a dry
        run's copy is never listed in order). When fewer pods stay than go (a
        preemption dry run removes every lower-priority pod), the kept pods'
        aggregates are summed anew instead of
        subtracting the others'. (The two ways may differ only in the order of
        `used_ports` and in `requested` keys whose amount is 0: readers treat the
        ports as a set of conflicts and a missing resource as 0.)"""
        kept = [p for uid, p in self.pods.items() if uid not in uids]
        if len(kept) * 2 >= len(self.pods):
            c = self.clone()
            for uid in uids:
                c._discard_pod(uid)
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
