"""In-memory stand-ins for the preemption evaluator's inputs, for its unit tests.

`ResourceFit` is a FitCheck that only looks at resource requests and the pod count
(what NodeResourcesFit checks), and applies the nominated-pods two-pass rule: pods
nominated to the node with priority >= the pod's are added first and must fit; if any
were added, the pod must also fit without them. It never modifies the node.

`MemoryNominator` is the minimal nominator (add/remove/lookup by node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo
from scheduler.model.quantity import PODS
from scheduler.preemption.evaluator import NodeLike, NominatedPods

__all__ = ["MemoryNominator", "ResourceDryRun", "ResourceFit"]


def _fits(pod: PodInfo, allocatable: Mapping[str, int], on_node: Iterable[PodInfo]) -> Status:
    used: dict[str, int] = {}
    count = 0
    for p in on_node:
        count += 1
        for k, v in p.requests.items():
            used[k] = used.get(k, 0) + v
    reasons = []
    max_pods = allocatable.get(PODS)
    if max_pods is not None and count + 1 > max_pods:
        reasons.append("Too many pods")
    for k, v in sorted(pod.requests.items()):
        if v and used.get(k, 0) + v > allocatable.get(k, 0):
            reasons.append(f"Insufficient {k}")
    return Status.unschedulable(*reasons, plugin="NodeResourcesFit") if reasons else Status()


class ResourceFit:
    """FitCheck on requests vs allocatable. `allocatable` is read from the node
    (`node.allocatable`, as NodeView has) unless given per node name. Counts the dry
    runs opened and the filter calls made, for tests."""

    def __init__(
        self,
        nominator: NominatedPods | None = None,
        allocatable: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        self.nominator = nominator
        self._allocatable = allocatable or {}
        self.runs = 0
        self.filters = 0
        # (remove|add, pod, node) told of pods on other nodes (victim units), in order
        self.remote: list[tuple[str, str, str]] = []

    def __call__(self, pod: PodInfo, node: NodeLike, /) -> ResourceDryRun:
        self.runs += 1
        alloc = self._allocatable.get(node.name)
        if alloc is None:
            alloc = getattr(node, "allocatable", {})
        return ResourceDryRun(self, pod, node, alloc)


class ResourceDryRun:
    def __init__(
        self, owner: ResourceFit, pod: PodInfo, node: NodeLike, alloc: Mapping[str, int]
    ) -> None:
        self._owner = owner
        self.pod = pod
        self.node = node
        self._alloc = alloc
        self.pods: dict[str, PodInfo] = dict(node.pods)  # the copy; node is never touched

    def remove_pod(self, pod: PodInfo, /) -> Status:
        self.pods.pop(pod.uid, None)
        return Status.success()

    def remove_pods(self, pods: Sequence[PodInfo], /) -> Status:
        for pod in pods:
            self.pods.pop(pod.uid, None)
        return Status.success()

    def add_pod(self, pod: PodInfo, /) -> Status:
        self.pods[pod.uid] = pod
        return Status.success()

    def filter(self) -> Status:
        self._owner.filters += 1
        pod = self.pod
        remaining = [p for uid, p in self.pods.items() if uid != pod.uid]
        nominator = self._owner.nominator
        nominated: list[PodInfo] = []
        if nominator is not None:
            nominated = [
                p
                for p in nominator.nominated_pods_for_node(self.node.name)
                if p.priority >= pod.priority and p.uid != pod.uid and p.uid not in self.pods
            ]
        if nominated:
            status = _fits(pod, self._alloc, [*remaining, *nominated])
            if not status.ok:
                return status
        return _fits(pod, self._alloc, remaining)


    def still_fits(self) -> bool:
        return self.filter().ok

    def remove_remote_pod(self, pod: PodInfo, node: NodeLike, /) -> Status:
        self._owner.remote.append(("remove", pod.name, node.name))
        return Status.success()

    def add_remote_pod(self, pod: PodInfo, node: NodeLike, /) -> Status:
        self._owner.remote.append(("add", pod.name, node.name))
        return Status.success()


class MemoryNominator:
    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._pods: dict[str, PodInfo] = {}

    def add(self, pod: PodInfo, node_name: str | None = None) -> None:
        node = node_name if node_name is not None else pod.nominated_node_name
        self.remove(pod)
        if node:
            self._node_of[pod.uid] = node
            self._pods[pod.uid] = pod

    def remove(self, pod: PodInfo) -> None:
        self._node_of.pop(pod.uid, None)
        self._pods.pop(pod.uid, None)

    def nominated_node(self, pod: PodInfo) -> str | None:
        return self._node_of.get(pod.uid)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return [self._pods[uid] for uid, n in self._node_of.items() if n == node_name]
