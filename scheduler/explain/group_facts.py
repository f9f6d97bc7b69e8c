"""What explain says of a gang member's PodGroup before any dry run (GenericWorkload):
the PodGroup's spec as the scheduler reads it, the members the cache knows and where each
one is, and whether GangScheduling's PreEnqueue holds the members back.

The PreEnqueue verdict is the profile's own GangScheduling plugin asked for the pod
(plugins/gang_scheduling.py, upstream's framework/plugins/gangscheduling/
gangscheduling.go PreEnqueue): the same words the queue's gating shows. It reads the
cache's gang state and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler.cache.gang_state import GangState
from scheduler.config import names
from scheduler.framework.runtime import Framework
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.plugins.gang_scheduling import min_count

__all__ = ["ASSUMED", "BOUND", "GroupFacts", "MemberState", "group_facts"]

# where a member that is not queued is
ASSUMED = "assumed"
BOUND = "bound"


@dataclass(frozen=True, slots=True)
class MemberState:
    pod: str  # namespace/name
    uid: str
    queue: str | None  # the queue's word (active, backoff, ...), assumed, bound or None


@dataclass(frozen=True, slots=True)
class GroupFacts:
    name: str
    pod_group: PodGroupInfo | None  # None: the PodGroup object is not known (yet)
    min_count: int  # the effective one: 1 for a basic group
    known: int  # members the scheduler knows (upstream AllPodsCount)
    scheduled: int  # assumed or bound (upstream ScheduledPodsCount)
    held: bool  # GangScheduling's PreEnqueue keeps the members out of the active queue
    held_message: str
    members: tuple[MemberState, ...]


def group_facts(
    pod: PodInfo,
    gang: GangState | None,
    fwk: Framework,
    queue_of: Callable[[str], str | None],
) -> GroupFacts:
    group = gang.pod_group if gang is not None else None
    held, message = False, ""
    # the profile's GangScheduling among its PreEnqueue plugins (none: nothing holds)
    gate = next((p for p in fwk.pre_enqueue_plugins if p.name == names.GANG_SCHEDULING), None)
    if gate is not None:
        st = gate.pre_enqueue(pod)
        held, message = not st.ok, st.message()
    members: list[MemberState] = []
    if gang is not None:
        for uid, member in sorted(gang.members.items(), key=lambda kv: kv[1].name):
            if uid in gang.assigned:
                where: str | None = BOUND
            elif uid in gang.assumed:
                where = ASSUMED
            else:
                where = queue_of(uid)
            members.append(MemberState(member.key, uid, where))
    return GroupFacts(
        name=pod.pod_group,
        pod_group=group,
        min_count=min_count(group) if group is not None else 0,
        known=gang.all_count if gang is not None else 0,
        scheduled=gang.scheduled_count if gang is not None else 0,
        held=held,
        held_message=message,
        members=tuple(members),
    )
