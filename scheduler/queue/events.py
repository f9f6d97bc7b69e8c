"""Queue-internal events and the translation of pod updates into ClusterEvents.

A pod update is only an event when a field the scheduler looks at changed; a status-only
update (our own PodScheduled=False patch, a new resourceVersion) must not requeue pods,
as upstream's ``isPodUpdated`` which ignores status and resourceVersion.
"""

from __future__ import annotations

from typing import Any

from scheduler.framework.cluster_event import ActionType, ClusterEvent, EventResource

# queue-internal reasons to move pods (labels as upstream's framework events)
UNSCHEDULABLE_TIMEOUT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "ForceActivate")

# reason labels for scheduler_queue_incoming_pods_total that are not cluster events
POD_ADD = "PodAdd"
POD_UPDATE = "PodUpdate"
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
# the events of the caches' first fill, acted on at once (SchedulingQueue.resume_moves)
CACHES_SYNCED = "CachesSynced"

ASSIGNED_POD_ADD = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd")
ASSIGNED_POD_DELETE = ClusterEvent(
    EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"
)
# with GenericWorkload: a pending pod arrived (a gang may now have minCount members), and
# the PodGroup informer's events (upstream eventhandlers.go)
UNSCHEDULED_POD_ADD = ClusterEvent(
    EventResource.UNSCHEDULED_POD, ActionType.ADD, "UnscheduledPodAdd"
)
POD_GROUP_ADD = ClusterEvent(EventResource.POD_GROUP, ActionType.ADD, "PodGroupAdd")
POD_GROUP_UPDATE = ClusterEvent(EventResource.POD_GROUP, ActionType.UPDATE, "PodGroupUpdate")
POD_GROUP_DELETE = ClusterEvent(EventResource.POD_GROUP, ActionType.DELETE, "PodGroupDelete")

# fields whose change can alter a scheduling verdict (read with getattr: records may lack some)
_SPEC_FIELDS = (
    "priority",
    "preemption_policy",
    "requests",
    "labels",
    "scheduling_gates",
    "tolerations",
    "node_selector",
    "required_node_affinity",
    "preferred_node_affinity",
    "required_affinity",
    "required_anti_affinity",
    "preferred_affinity",
    "preferred_anti_affinity",
    "spread_constraints",
    "host_ports",
    "pvc_names",
    "images",
    "node_name",
    "deletion_timestamp",
    "resource_claim_statuses",
)
# deliberately absent: status fields (phase, conditions, nominated_node_name) and
# resource_version, which change on our own status patches


def event_label(event: ClusterEvent) -> str:
    """A bounded label for metrics and logs."""
    if event.label:
        return event.label
    if event.action == ActionType.ADD:
        verb = "Add"
    elif event.action == ActionType.DELETE:
        verb = "Delete"
    else:
        verb = "Update"
    return f"{event.resource.value}{verb}"


def same(a: Any, b: Any) -> bool:
    """Equality that also works for array-valued fields (numpy resource vectors)."""
    if a is b:
        return True
    try:
        result = a == b
    except Exception:  # incomparable values: treat as changed
        return False
    if isinstance(result, bool):
        return result
    try:
        return bool(result.all())
    except Exception:
        return False


def _scaled_down(old: Any, new: Any) -> bool:
    """True when some request shrank (and none grew)."""
    if old is None or new is None:
        return False
    try:
        if isinstance(old, dict) and isinstance(new, dict):
            keys = set(old) | set(new)
            less = any(new.get(k, 0) < old.get(k, 0) for k in keys)
            more = any(new.get(k, 0) > old.get(k, 0) for k in keys)
            return less and not more
        diff_less = new < old
        diff_more = new > old
        return bool(diff_less.any()) and not bool(diff_more.any())
    except Exception:
        return False


# the action bit of each field's change; "scheduling_gates" and "requests" depend on the
# direction of the change (see pod_update_actions). Plain ints: IntFlag arithmetic costs
# microseconds per operation, and this runs for every pod update.
_FIELD_ACTIONS = {
    "labels": int(ActionType.UPDATE_POD_LABEL),
    "tolerations": int(ActionType.UPDATE_POD_TOLERATION),
    "resource_claim_statuses": int(ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
}
_GENERATED = int(ActionType.UPDATE_POD_GENERATED)
_GATES_ELIMINATED = int(ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
_SCALE_DOWN = int(ActionType.UPDATE_POD_SCALE_DOWN)
_NO_ACTION = ActionType(0)


def pod_update_actions(old: Any, new: Any) -> ActionType:
    """The ActionType of an update from old to new; 0 when nothing relevant changed."""
    # the identity test inline: an update that reused the parsed spec shares its objects
    changed = [
        f
        for f in _SPEC_FIELDS
        if (a := getattr(old, f, None)) is not (b := getattr(new, f, None)) and not same(a, b)
    ]
    if not changed:
        return _NO_ACTION
    bits = 0
    for f in changed:
        if f == "scheduling_gates":
            if getattr(old, f, None) and not getattr(new, f, None):
                bits |= _GATES_ELIMINATED
            else:
                bits |= _GENERATED
        elif f == "requests":
            if _scaled_down(getattr(old, f, None), getattr(new, f, None)):
                bits |= _SCALE_DOWN
            else:
                bits |= _GENERATED
        else:
            bits |= _FIELD_ACTIONS.get(f, _GENERATED)
    return ActionType(bits)


def pod_update_event(resource: EventResource, old: Any, new: Any) -> ClusterEvent | None:
    """The ClusterEvent for an update of an assigned or unscheduled pod, or None."""
    actions = pod_update_actions(old, new)
    if not actions:
        return None
    prefix = "AssignedPod" if resource == EventResource.ASSIGNED_POD else "UnscheduledPod"
    return ClusterEvent(resource, actions, f"{prefix}Update")
