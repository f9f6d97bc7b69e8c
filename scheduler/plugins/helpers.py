"""Shared pieces of the in-tree plugins: score normalization, event shorthands."""

from __future__ import annotations

from scheduler.framework.cluster_event import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
    QueueingHintFn,
)
from scheduler.framework.interfaces import MAX_NODE_SCORE, IntArray
from scheduler.framework.status import Status

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.SKIP


def default_normalize(scores: IntArray, reverse: bool = False) -> Status:
    """upstream helper.DefaultNormalizeScore: scale to 0..100 by the max; `reverse`
    subtracts from 100 (a max of 0 gives 100 everywhere when reversed)."""
    if len(scores) == 0:
        return Status.success()
    top = int(scores.max())
    if top == 0:
        if reverse:
            scores[:] = MAX_NODE_SCORE
        return Status.success()
    scaled = MAX_NODE_SCORE * scores // top
    scores[:] = MAX_NODE_SCORE - scaled if reverse else scaled
    return Status.success()


def event(
    resource: EventResource, action: ActionType, hint: QueueingHintFn | None = None
) -> ClusterEventWithHint:
    return ClusterEventWithHint(ClusterEvent(resource, action), hint)
