"""Pod groups: pods a label selector cannot tell apart, counted per node slot.

A `PodGroup` is one namespace, one label set, all terminating or none. The pod matcher
(cache/pod_matcher.py) keeps one per distinct (namespace, labels, terminating), so the
replicas of a Deployment are one group and a selector is matched once for all of them.

Pods that carry a label of their own (a StatefulSet's `statefulset.kubernetes.io/
pod-name`, a per-pod id) are one group each, and a selector would again be matched once
per pod, though it reads only its own keys. A `GroupProjection` merges the groups that
agree on the label keys some selectors read: its groups carry only those keys' values
(absent keys stay absent), so a selector reading no other key matches a projected group
exactly when it matches each of the pods merged into it.

Each group holds a memo of query answers (`memo`), which the matcher alone reads and
writes. The memo dict is handed in by the matcher, keyed by the group's content, so a
group that empties and comes back (or a projection rebuilt) finds what was learnt.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

# a projected group's key inside its projection: namespace, the keys' values, terminating
ProjectedKey = tuple[str, tuple[str | None, ...], bool]
# the memo of a group: query token -> whether the query admits the group's pods
Memo = dict[int, bool]


class PodGroup:
    """Pods a label selector cannot tell apart: one namespace, one label set, all
    terminating or none; `slots` counts them per node slot."""

    __slots__ = ("labels", "memo", "namespace", "slots", "terminating")

    def __init__(
        self, namespace: str, labels: Mapping[str, str], terminating: bool, memo: Memo
    ) -> None:
        self.namespace = namespace
        self.labels = labels
        self.terminating = terminating
        self.slots: dict[int, int] = {}
        # owned by the pod matcher: answers depend only on namespace, labels and
        # terminating, which never change (they are the group's key)
        self.memo = memo


class GroupProjection:
    """The pods merged by (namespace, the values of `keys`, terminating)."""

    __slots__ = ("groups", "keys", "memo_for")

    def __init__(self, keys: tuple[str, ...], memo_for: Callable[[Hashable], Memo]) -> None:
        self.keys = keys
        self.groups: dict[ProjectedKey, PodGroup] = {}
        # the matcher's memo for a projected group's content (keys and ProjectedKey)
        self.memo_for = memo_for

    def count(
        self,
        slot: int,
        namespace: str,
        labels: Mapping[str, str],
        terminating: bool,
        delta: int,
    ) -> None:
        """`delta` pods with these labels came to (or, negative, left) `slot`."""
        keys = self.keys
        values = tuple(labels.get(k) for k in keys)
        key = (namespace, values, terminating)
        group = self.groups.get(key)
        if group is None:
            if delta < 0:
                return
            projected = {k: v for k, v in zip(keys, values, strict=True) if v is not None}
            memo = self.memo_for((keys, key))
            group = self.groups[key] = PodGroup(namespace, projected, terminating, memo)
        n = group.slots.get(slot, 0) + delta
        if n:
            group.slots[slot] = n
            return
        group.slots.pop(slot, None)
        if not group.slots:
            del self.groups[key]
