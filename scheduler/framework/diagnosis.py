"""Diagnosis and FitError: why a pod fits no node, in upstream's words.

Batch filters record rejections as (slots, reason codes, statuses) groups, so a cycle
that finds feasible nodes never builds per-node Status objects; `node_to_status()` builds
the node -> Status map on demand (PostFilter, events).

FitError.message() is upstream's FitError.Error() (pkg/scheduler/framework/types.go):
"0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu." - one
"<count> <reason>" per distinct reason (a node failing two resources counts in both),
sorted as strings, as upstream's sort.Strings does. The PostFilter message follows after
one space, with no period added (upstream's own messages end in "." where they want one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from scheduler.framework.node_arrays import Int32Array, IntArray
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.snapshot import Snapshot

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


class Diagnosis:
    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._groups: list[tuple[IntArray, Int32Array | None, Sequence[Status]]] = []
        self._single: dict[int, Status] = {}
        self._all: Status | None = None
        self._cache: dict[str, Status] | None = None
        self._histogram: Counter[str] | None = None
        self.unschedulable_plugins: set[str] = set()
        self.pre_filter_msg = ""
        self.post_filter_msg = ""

    # -- recording (runtime)
    def add_batch(
        self, slots: IntArray, reasons: Int32Array | None, statuses: Sequence[Status]
    ) -> None:
        if len(slots) == 0:
            return
        self._groups.append((slots, reasons, statuses))
        self._cache = None
        self._histogram = None
        used = range(len(statuses)) if reasons is None else np.unique(reasons).tolist()
        for i in used:
            self._note(statuses[i])

    def add(self, slot: int, status: Status) -> None:
        self._single[slot] = status
        self._cache = None
        self._histogram = None
        self._note(status)

    def set_all(self, status: Status) -> None:
        """Every node has this status (PreFilter rejected the pod)."""
        self._all = status
        self._cache = None
        self._histogram = None
        self._note(status)

    def _note(self, status: Status) -> None:
        if status.plugin:
            self.unschedulable_plugins.add(status.plugin)

    # -- reading
    def node_to_status(self) -> dict[str, Status]:
        if self._cache is not None:
            return self._cache
        names = self._snapshot.table.names
        out: dict[str, Status] = {}
        if self._all is not None:
            for n in names:
                if n is not None:
                    out[n] = self._all
        for slots, reasons, statuses in self._groups:
            if reasons is None:
                st = statuses[0]
                for s in slots.tolist():
                    n = names[s]
                    if n is not None:
                        out[n] = st
            else:
                for s, r in zip(slots.tolist(), reasons.tolist(), strict=True):
                    n = names[s]
                    if n is not None:
                        out[n] = statuses[r]
        for s, st in self._single.items():
            n = names[s]
            if n is not None:
                out[n] = st
        self._cache = out
        return out

    def reason_histogram(self) -> Counter[str]:
        """Reason -> node count (read-only: cached with the node map, as the event, the
        status condition and explain all ask for the same message)."""
        if self._histogram is not None and self._cache is not None:
            return self._histogram
        hist: Counter[str] = Counter()
        # count nodes per distinct Status first: many nodes share one Status object
        statuses = self.node_to_status().values()
        per_status = Counter(map(id, statuses))
        by_id = {id(st): st for st in statuses}
        for key, count in per_status.items():
            for reason in by_id[key].reasons:
                hist[reason] += count
        self._histogram = hist
        return hist


def fit_error_message(
    num_all_nodes: int,
    histogram: Mapping[str, int],
    pre_filter_msg: str = "",
    post_filter_msg: str = "",
) -> str:
    """upstream FitError.Error(): "0/N nodes are available:" then the PreFilter message
    or the sorted reason histogram, each closed by ".", then the PostFilter message as is."""
    msg = f"0/{num_all_nodes} nodes are available:"
    if pre_filter_msg:
        msg += f" {pre_filter_msg}."
    else:
        parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
        if parts:
            msg += f" {', '.join(parts)}."
    if post_filter_msg:
        msg += f" {post_filter_msg}"
    return msg


def status_histogram(
    num_all_nodes: int, statuses: Mapping[str, Status], absent: Status | None = None
) -> Counter[str]:
    """Reason -> node count over explicit statuses, plus `absent`'s reasons for every
    node without one (upstream NodeToStatus with its absent-nodes status)."""
    hist: Counter[str] = Counter()
    for st in statuses.values():
        for reason in st.reasons:
            hist[reason] += 1
    missing = num_all_nodes - len(statuses)
    if absent is not None and missing > 0:
        for reason in absent.reasons:
            hist[reason] += missing
    return hist


@dataclass
class FitError(Exception):
    """The pod fits no node. Returned by schedule_pod (and raisable)."""

    pod: PodInfo
    num_all_nodes: int
    diagnosis: Diagnosis = field(repr=False)

    def message(self) -> str:
        if self.num_all_nodes == 0 and not self.diagnosis.pre_filter_msg:
            return NO_NODES_AVAILABLE
        d = self.diagnosis
        histogram = Counter[str]() if d.pre_filter_msg else d.reason_histogram()
        return fit_error_message(self.num_all_nodes, histogram, d.pre_filter_msg, d.post_filter_msg)

    def __str__(self) -> str:
        return self.message()


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    node: str
    evaluated: int  # nodes examined
    feasible: int  # nodes found feasible
