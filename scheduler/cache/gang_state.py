"""What the cache knows of each PodGroup's members (upstream's podGroupState,
k8s.io/kubernetes v1.37.2 pkg/scheduler/backend/cache/podgroupstate.go).

A group's state exists while its PodGroup object or any member pod is known: members may
arrive before their PodGroup. Every member is in exactly one of
- unscheduled: pending, of this scheduler (the pod handler reports it),
- assumed: placed by a cycle, its bind not yet confirmed,
- assigned: bound (any scheduler's pod with spec.nodeName).
GangScheduling reads the counts: `all_count` against minCount before a member may enter
the active queue, `scheduled_count` (assumed + assigned) at Permit and in the pod-group
cycle's placement check.

The word "gang" keeps these apart from cache/pod_groups.py, whose "pod groups" are the
label-equivalence classes of InterPodAffinity and PodTopologySpread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo

__all__ = ["GangState", "GangStates", "gang_key"]


def gang_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclass(slots=True)
class GangState:
    pod_group: PodGroupInfo | None = None
    members: dict[str, PodInfo] = field(default_factory=dict)  # uid -> the pod
    unscheduled: set[str] = field(default_factory=set)
    assumed: set[str] = field(default_factory=set)
    assigned: set[str] = field(default_factory=set)

    @property
    def all_count(self) -> int:
        """Every member the scheduler knows (upstream AllPodsCount)."""
        return len(self.members)

    @property
    def scheduled_count(self) -> int:
        """Members assumed or bound (upstream ScheduledPodsCount)."""
        return len(self.assumed) + len(self.assigned)

    def unscheduled_pods(self) -> list[PodInfo]:
        return [self.members[uid] for uid in self.unscheduled]

    def scheduled_pods(self) -> list[PodInfo]:
        return [self.members[uid] for uid in (*self.assigned, *self.assumed)]

    def empty(self) -> bool:
        return not self.members and self.pod_group is None


class GangStates:
    """Every group's state, keyed "namespace/name"."""

    def __init__(self) -> None:
        self._states: dict[str, GangState] = {}

    def get(self, namespace: str, name: str) -> GangState | None:
        return self._states.get(gang_key(namespace, name))

    def __len__(self) -> int:
        return len(self._states)

    def _state(self, pod: PodInfo) -> GangState:
        key = gang_key(pod.namespace, pod.pod_group)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = GangState()
        return state

    def _drop_if_empty(self, key: str) -> None:
        state = self._states.get(key)
        if state is not None and state.empty():
            del self._states[key]

    # ------------------------------------------------------------ pods
    def add_pod(self, pod: PodInfo) -> None:
        """A member seen by an informer: assigned if it has a node, else unscheduled."""
        if not pod.pod_group:
            return
        state = self._state(pod)
        state.members[pod.uid] = pod
        if pod.node_name:
            # a previously queued member bound by someone else leaves the other sets
            state.assigned.add(pod.uid)
            state.unscheduled.discard(pod.uid)
            state.assumed.discard(pod.uid)
        elif pod.uid not in state.assumed and pod.uid not in state.assigned:
            state.unscheduled.add(pod.uid)

    def delete_pod(self, pod: PodInfo) -> None:
        if not pod.pod_group:
            return
        key = gang_key(pod.namespace, pod.pod_group)
        state = self._states.get(key)
        if state is None:
            return
        state.members.pop(pod.uid, None)
        state.unscheduled.discard(pod.uid)
        state.assumed.discard(pod.uid)
        state.assigned.discard(pod.uid)
        self._drop_if_empty(key)

    def assume_pod(self, pod: PodInfo) -> None:
        state = self._states.get(gang_key(pod.namespace, pod.pod_group)) if pod.pod_group else None
        if state is None or pod.uid not in state.members:
            return  # a member deleted meanwhile is not brought back
        stored = state.members[pod.uid]
        if stored.node_name:
            state.assigned.add(pod.uid)
        else:
            state.assumed.add(pod.uid)
        state.unscheduled.discard(pod.uid)

    def forget_pod(self, pod: PodInfo) -> None:
        state = self._states.get(gang_key(pod.namespace, pod.pod_group)) if pod.pod_group else None
        if state is None or pod.uid not in state.members:
            return
        state.assumed.discard(pod.uid)
        if state.members[pod.uid].node_name:
            state.assigned.add(pod.uid)
        else:
            state.unscheduled.add(pod.uid)

    # ------------------------------------------------------------ PodGroup objects
    def set_pod_group(self, pod_group: PodGroupInfo) -> None:
        key = gang_key(pod_group.namespace, pod_group.name)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = GangState()
        state.pod_group = pod_group

    def remove_pod_group(self, pod_group: PodGroupInfo) -> None:
        key = gang_key(pod_group.namespace, pod_group.name)
        state = self._states.get(key)
        if state is None:
            return
        state.pod_group = None
        self._drop_if_empty(key)
