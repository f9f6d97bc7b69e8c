"""The scheduler cache: nodes, the pods on them, and assumed pods.

Invariants:
- every pod with a node name counts on that node, whoever scheduled it (pods of other
  schedulers, static pods, terminating pods until their delete event arrives);
- an assumed pod (`assume_pod` before bind) counts on its node at once; the informer's
  add/update of that pod confirms it; `forget_pod` undoes it when bind fails; an assumed
  pod whose binding finished but whose confirmation never came expires after `ttl`
  seconds (`cleanup_assumed_pods`, driven by the injectable clock);
- pods may arrive before their node: the node entry exists with node=None and is kept
  out of snapshots until the node arrives;
- each change stamps the node entry with a new generation and moves it to the end of
  `_order`, so `update_snapshot` walks only entries changed since the snapshot's
  generation (upstream's headNode list, as an OrderedDict).

One Snapshot per Cache is updated by `update_snapshot` (upstream has one per scheduler):
removed nodes are tombstoned until that snapshot's next update. Any other snapshot (the
explain dry run's) is kept by `refresh_snapshot`, which writes nothing of the cache.

The node tree (node_tree.py) keeps upstream's node order, zones interleaved; it moves on
node add/update/delete as upstream's AddNode/UpdateNode/RemoveNode move it, and the
snapshot's node order is rebuilt from it when upstream rebuilds its nodeInfoList.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from dataclasses import dataclass

from scheduler.cache.gang_state import GangState, GangStates
from scheduler.cache.node_tree import NodeTree, zone_key
from scheduler.cache.node_view import NodeView
from scheduler.cache.snapshot import Snapshot
from scheduler.clock import SYSTEM_CLOCK, Clock
from scheduler.model.node import NodeInfo
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo

log = logging.getLogger(__name__)

# upstream durationToExpireAssumedPod
DEFAULT_ASSUMED_POD_TTL = 15 * 60.0

_TERMINAL_PHASES = ("Succeeded", "Failed")


# dataclasses.replace(pod, node_name=...) builds a kwargs dict of PodInfo's 40 fields and
# runs __init__ (7 us, per assumed pod: issue 12); copying the slots through their
# descriptors gives the equal record in half that. Valid while PodInfo's __init__ only
# stores its fields (no __post_init__, every field init=True): checked here.
if hasattr(PodInfo, "__post_init__") or not all(f.init for f in dataclasses.fields(PodInfo)):
    raise TypeError("PodInfo's __init__ does more than store fields: use dataclasses.replace")
_POD_SLOTS = tuple(
    (vars(PodInfo)[f.name].__get__, vars(PodInfo)[f.name].__set__)
    for f in dataclasses.fields(PodInfo)
)
_set_node_name = vars(PodInfo)["node_name"].__set__


def _with_node_name(pod: PodInfo, node_name: str) -> PodInfo:
    """``dataclasses.replace(pod, node_name=node_name)``, faster (see above)."""
    if type(pod) is not PodInfo:  # a subclass may have slots of its own
        return dataclasses.replace(pod, node_name=node_name)
    out = object.__new__(PodInfo)
    for get, put in _POD_SLOTS:
        put(out, get(pod))
    _set_node_name(out, node_name)
    return out


class CacheError(RuntimeError):
    """Misuse of the cache (assuming a pod twice, forgetting one never assumed)."""


@dataclass(slots=True)
class _PodState:
    pod: PodInfo
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


class Cache:
    def __init__(self, clock: Clock = SYSTEM_CLOCK, ttl: float = DEFAULT_ASSUMED_POD_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._nodes: dict[str, NodeView] = {}
        self._order: OrderedDict[str, None] = OrderedDict()
        self._pods: dict[str, _PodState] = {}
        self._assumed: set[str] = set()
        self._generation = 0
        self._tombstones: set[str] = set()
        # tombstones dropped so far (refresh_snapshot notices a purge by this count)
        self._purges = 0
        self._tree = NodeTree()
        # the members of every PodGroup, as GangScheduling counts them (gang_state.py)
        self._gangs = GangStates()
        # assumed members whose pod was deleted: when their assumption is undone they
        # leave the gang state instead of going back to unscheduled, so a deleted member
        # never counts toward minCount again
        self._gang_members_deleted_while_assumed: set[str] = set()

    # ------------------------------------------------------------ internals
    def _touch(self, name: str) -> NodeView:
        view = self._nodes.get(name)
        if view is None:
            view = NodeView(None)
            self._nodes[name] = view
        self._generation += 1
        view.generation = self._generation
        self._order[name] = None
        self._order.move_to_end(name)
        return view

    def _add_to_node(self, pod: PodInfo) -> None:
        self._touch(pod.node_name).add_pod(pod)

    def _remove_from_node(self, pod: PodInfo) -> None:
        view = self._nodes.get(pod.node_name)
        if view is None:
            return
        self._touch(pod.node_name).remove_pod(pod)
        if view.node is None and not view.pods:
            # a tombstone: keeps its place in _order until the next snapshot update
            self._tombstones.add(pod.node_name)

    # ------------------------------------------------------------ nodes
    # The node tree moves as upstream's (v1.37.2 pkg/scheduler/backend/cache/cache.go
    # AddNode, UpdateNode, RemoveNode).
    def add_node(self, node: NodeInfo) -> None:
        self._tree.add_node(node.name, zone_key(node.labels))
        self._touch(node.name).node = node

    def update_node(self, old: NodeInfo | None, new: NodeInfo) -> None:
        new_zone = zone_key(new.labels)
        if new.name not in self._nodes:
            self._tree.add_node(new.name, new_zone)
        self._tree.update_node(
            zone_key(old.labels) if old is not None else None, new.name, new_zone
        )
        self._touch(new.name).node = new

    def remove_node(self, node: NodeInfo) -> None:
        """The node goes; its pods stay accounted until their own deletes arrive (as
        upstream), but the node leaves every snapshot."""
        if node.name not in self._nodes:
            return
        self._tree.remove_node(node.name, zone_key(node.labels))
        self._touch(node.name).node = None
        self._tombstones.add(node.name)

    # ------------------------------------------------------------ pods (informer)
    def add_pod(self, pod: PodInfo) -> None:
        if not pod.node_name or pod.phase in _TERMINAL_PHASES:
            return
        state = self._pods.get(pod.uid)
        if state is not None and state.assumed:
            # confirmation of an assumed pod (it may have landed elsewhere)
            self._remove_from_node(state.pod)
            self._assumed.discard(pod.uid)
        elif state is not None:
            self._remove_from_node(state.pod)
        self._pods[pod.uid] = _PodState(pod)
        self._add_to_node(pod)
        self._gangs.add_pod(pod)

    def update_pod(self, old: PodInfo | None, new: PodInfo) -> None:
        if new.phase in _TERMINAL_PHASES or not new.node_name:
            if new.uid in self._pods and not self._pods[new.uid].assumed:
                self.remove_pod(new)
            return
        self.add_pod(new)

    def remove_pod(self, pod: PodInfo) -> None:
        state = self._pods.pop(pod.uid, None)
        if state is None:
            return
        self._assumed.discard(pod.uid)
        self._gang_members_deleted_while_assumed.discard(pod.uid)
        self._remove_from_node(state.pod)
        self._gangs.delete_pod(state.pod)

    # ------------------------------------------------------------ pod groups (gangs)
    def add_gang_member(self, pod: PodInfo) -> None:
        """A pending member of a PodGroup entered the queue (upstream's cache learns of
        unscheduled members from the queue's pod handler, eventhandlers.go)."""
        if pod.pod_group and not pod.node_name:
            self._gangs.add_pod(pod)

    def remove_gang_member(self, pod: PodInfo) -> None:
        """A pending member left (deleted, or no longer ours); bound ones leave through
        remove_pod. One that a cycle holds assumed leaves when its assumption is undone
        (upstream RemoveAssumedPod, backend/cache/cache.go; beyond upstream also when a
        rejected Permit wait forgets it, which upstream returns to unscheduled)."""
        if not pod.pod_group:
            return
        if pod.uid in self._assumed:
            self._gang_members_deleted_while_assumed.add(pod.uid)
        elif pod.uid not in self._pods:
            self._gangs.delete_pod(pod)

    def _gang_forget(self, pod: PodInfo) -> None:
        if pod.uid in self._gang_members_deleted_while_assumed:
            self._gang_members_deleted_while_assumed.discard(pod.uid)
            self._gangs.delete_pod(pod)
        else:
            self._gangs.forget_pod(pod)

    def set_pod_group(self, pod_group: PodGroupInfo) -> None:
        self._gangs.set_pod_group(pod_group)

    def remove_pod_group(self, pod_group: PodGroupInfo) -> None:
        self._gangs.remove_pod_group(pod_group)

    def gang(self, namespace: str, name: str) -> GangState | None:
        """The live state of a PodGroup's members (read-only for callers)."""
        return self._gangs.get(namespace, name)

    # ------------------------------------------------------------ assume / forget
    def assume_pod(self, pod: PodInfo, node_name: str) -> PodInfo:
        """Count `pod` on `node_name` before its bind is confirmed. Returns the
        assumed record (the pod with node_name set)."""
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} is already in the cache")
        assumed = _with_node_name(pod, node_name)
        self._pods[pod.uid] = _PodState(assumed, assumed=True)
        self._assumed.add(pod.uid)
        self._add_to_node(assumed)
        self._gangs.assume_pod(pod)
        log.debug("assumed pod=%s node=%s", pod.key, node_name)
        return assumed

    def finish_binding(self, pod: PodInfo) -> None:
        """The bind call returned; start the expiry clock of the assumption."""
        state = self._pods.get(pod.uid)
        if state is None or not state.assumed:
            return
        state.binding_finished = True
        state.deadline = self._clock.now() + self._ttl

    def forget_pod(self, pod: PodInfo) -> None:
        """Undo an assumption (bind failed)."""
        state = self._pods.get(pod.uid)
        if state is None:
            return
        if not state.assumed:
            raise CacheError(f"pod {pod.key} is not assumed; it cannot be forgotten")
        del self._pods[pod.uid]
        self._assumed.discard(pod.uid)
        self._remove_from_node(state.pod)
        self._gang_forget(state.pod)
        log.debug("forgot pod=%s node=%s", pod.key, state.pod.node_name)

    def cleanup_assumed_pods(self) -> list[PodInfo]:
        """Expire assumed pods whose bind finished more than `ttl` ago and was never
        confirmed. Returns the expired records."""
        now = self._clock.now()
        expired = []
        for uid in list(self._assumed):
            state = self._pods[uid]
            if state.binding_finished and state.deadline is not None and now >= state.deadline:
                expired.append(state.pod)
                del self._pods[uid]
                self._assumed.discard(uid)
                self._remove_from_node(state.pod)
                self._gang_forget(state.pod)
                log.warning(
                    "assumed pod expired pod=%s node=%s", state.pod.key, state.pod.node_name
                )
        return expired

    # ------------------------------------------------------------ reads
    def is_assumed(self, pod: PodInfo) -> bool:
        return pod.uid in self._assumed

    def get_pod(self, uid: str) -> PodInfo | None:
        state = self._pods.get(uid)
        return state.pod if state is not None else None

    def any_pod_below(self, priority: int) -> bool:
        """Whether any pod on a node (assumed ones included) has a priority below this:
        a pod group's preemption has no victim otherwise."""
        return any(s.pod.priority < priority for s in self._pods.values())

    def node(self, name: str) -> NodeInfo | None:
        view = self._nodes.get(name)
        return view.node if view is not None else None

    def node_count(self) -> int:
        return sum(1 for v in self._nodes.values() if v.node is not None)

    def pod_count(self) -> int:
        return len(self._pods)

    def statistics(self) -> dict[str, int]:
        return {
            "nodes": self.node_count(),
            "pods": len(self._pods),
            "assumed_pods": len(self._assumed),
        }

    # ------------------------------------------------------------ snapshot
    def update_snapshot(self, snapshot: Snapshot) -> int:
        """Bring the scheduling loop's `snapshot` up to date; returns the number of node
        entries copied. Also drops the tombstones (entries with neither a node nor pods):
        only the one snapshot that the loop owns may be updated this way (upstream has
        one snapshot per scheduler). Any other reader uses `refresh_snapshot`."""
        if snapshot.mutated:
            # a simulation left without undoing itself (a crash): the cache's view wins
            log.warning("snapshot still held simulated changes; restored before the update")
            snapshot.restore_mutations()
        changed = self._copy_changes(snapshot, None)
        for name in self._tombstones:
            entry = self._nodes.get(name)
            if entry is not None and entry.node is None and not entry.pods:
                del self._nodes[name]
                del self._order[name]
                self._purges += 1
        self._tombstones.clear()
        return changed

    def refresh_snapshot(self, snapshot: Snapshot, max_entries: int | None = None) -> int:
        """Bring a snapshot other than the loop's (explain's), or the loop's own while the
        loop does not run (a standby's, SchedulingLoop.keep_snapshot_current), up to
        date, writing nothing of the cache: the tombstones stay for the loop's update to
        see and purge. Copies at most
        `max_entries` changed entries, oldest change first, so a caller may build a large
        snapshot in steps and give the event loop back between them; returns how many
        changed entries are still to copy (0: up to date).

        A node whose tombstone the loop purged since this snapshot's last refresh is
        gone from the cache without a newer generation: it is found by name (a pass over
        the snapshot's names, only when a purge happened since)."""
        if snapshot.purges_seen != self._purges:
            for name in [n for n in snapshot.table.index if n not in self._nodes]:
                snapshot.order_stale |= snapshot._remove(name)
            snapshot.purges_seen = self._purges
        self._copy_changes(snapshot, max_entries)
        remaining = 0
        for name in reversed(self._order):
            if self._nodes[name].generation <= snapshot.generation:
                break
            remaining += 1
        return remaining

    def _copy_changes(self, snapshot: Snapshot, max_entries: int | None) -> int:
        """Copy the entries changed since `snapshot.generation` (at most `max_entries`,
        oldest change first) into it. Reads the cache only.

        Once the snapshot is up to date its node order is rebuilt from the tree as upstream
        rebuilds nodeInfoList (cache.go UpdateSnapshot: updateAllLists when a node came
        into or left the snapshot, or the list's length is not the tree's): a zone change
        alone leaves the order as it was. A copy made in steps (explain) carries "a node
        came or went" over to the step that completes it."""
        names: list[str] = []
        for name in reversed(self._order):
            if self._nodes[name].generation <= snapshot.generation:
                break
            names.append(name)
        names.reverse()
        if max_entries is not None and len(names) > max_entries:
            names = names[:max_entries]
            # _order is in generation order: every entry up to the last one copied is in
            last = self._nodes[names[-1]].generation
        else:
            last = self._generation
        # apply oldest change first, so a fresh snapshot's slots follow arrival order
        for name in names:
            view = self._nodes[name]
            if view.node is None:
                snapshot.order_stale |= snapshot._remove(name)
            else:
                snapshot.order_stale |= snapshot._set(name, view)
        snapshot.generation = last
        if last == self._generation and (
            snapshot.order_stale or len(snapshot.node_order()) != self._tree.num_nodes
        ):
            snapshot._set_node_order(self._tree.list())
            snapshot.order_stale = False
        return len(names)

    def new_snapshot(self) -> Snapshot:
        snap = Snapshot()
        self.update_snapshot(snap)
        return snap
