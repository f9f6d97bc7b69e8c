"""Pod groups: pods a label selector cannot tell apart, counted per node slot.

A `PodGroup` is one namespace, one label set, all terminating or none. The snapshot
keeps one per distinct (namespace, labels, terminating), so the replicas of a Deployment
are one group and a selector is matched once for all of them.

Pods that carry a label of their own (a StatefulSet's `statefulset.kubernetes.io/
pod-name`, a per-pod id) are one group each, and a selector would again be matched once
per pod, though it reads only its own keys. A `GroupProjection` merges the groups that
agree on the label keys some selectors read: its groups carry only those keys' values
(absent keys stay absent), so a selector reading no other key matches a projected group
exactly when it matches each of the pods merged into it. The snapshot keeps a few
projections, keyed by their key set, and moves them with every pod change.
"""

from __future__ import annotations

from collections.abc import Mapping

ProjectedKey = tuple[str, tuple[str | None, ...], bool]


class PodGroup:
    """Pods a label selector cannot tell apart: one namespace, one label set, all
    terminating or none; `slots` counts them per node slot."""

    __slots__ = ("labels", "matches", "namespace", "slots", "terminating")

    def __init__(self, namespace: str, labels: Mapping[str, str], terminating: bool) -> None:
        self.namespace = namespace
        self.labels = labels
        self.terminating = terminating
        self.slots: dict[int, int] = {}
        # a memo for the plugins: whether a selector or term matches this group, which
        # only its namespace and labels decide, and those never change (they are its
        # key). Keyed by id() of the matcher, which the value holds, so an id is not
        # reused while its entry lives (plugins.topology_counts.recalled_match)
        self.matches: dict[int, tuple[object, bool]] = {}


class GroupProjection:
    """The pods merged by (namespace, the values of `keys`, terminating)."""

    __slots__ = ("groups", "keys")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.groups: dict[ProjectedKey, PodGroup] = {}

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
            group = self.groups[key] = PodGroup(namespace, projected, terminating)
        n = group.slots.get(slot, 0) + delta
        if n:
            group.slots[slot] = n
            return
        group.slots.pop(slot, None)
        if not group.slots:
            del self.groups[key]
