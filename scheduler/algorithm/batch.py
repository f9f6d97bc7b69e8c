"""Opportunistic batching: consecutive pods with the same signature reuse the previous
cycle's scored node list (upstream KEP-5598, v1.37.2 framework/runtime/batch.go; the
OpportunisticBatching gate is Beta and on by default since 1.35).

How upstream uses it (schedule_one.go, as schedule.py here):
- After a successful scheduling algorithm, `store_schedule_results` keeps the feasible
  nodes other than the chosen one, with their raw per-plugin scores, when the pod could
  be signed; otherwise the state is dropped.
- The next cycle's `get_node_hint` hands out the best remaining node when the state is
  compatible: this pod's cycle directly follows the stored one (no other pod, of any
  profile, in between), the pod is not nominated, its signature equals the stored one
  and the state is younger than 500 ms. Before that, the node chosen last time is
  filtered again; if it still fits it is re-scored (PreScore over every candidate, raw
  Score on it, Normalize across all with the others' stored raw scores) and competes
  for the hint again; a rejected one simply stays out.
- The hint is filtered like a nominated node; when it passes it is the pod's node with
  no node search and no scoring (and the search rotation does not advance).

Reasons for dropping state and attempt results carry upstream's metric label values.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray
from scheduler.framework.signature import PodSignature
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.node_view import NodeView
    from scheduler.cache.snapshot import Snapshot
    from scheduler.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

MAX_BATCH_AGE = 0.5  # seconds (upstream maxBatchAge)

# scheduler_batch_attempts_total{result}
HINT_USED = "hint_used"
HINT_NOT_USED = "hint_not_used"
NO_HINT = "no_hint"
# scheduler_batch_cache_flushed_total{reason}
FLUSH_POD_FAILED = "pod_failed"
FLUSH_POD_SKIPPED = "pod_skipped"
FLUSH_POD_NOMINATED = "pod_nominated"
FLUSH_NODE_MISSING = "node_missing"
FLUSH_EMPTY_LIST = "empty_list"
FLUSH_EXPIRED = "expired"
FLUSH_POD_INCOMPATIBLE = "pod_incompatible"
FLUSH_POD_NOT_BATCHABLE = "pod_not_batchable"
FLUSH_FILTER_ERROR = "filter_error"
FLUSH_PRESCORE_ERROR = "prescore_error"
FLUSH_RESCORE_ERROR = "rescore_error"
FLUSH_NORMALIZE_ERROR = "normalize_error"


class BatchHandle(Protocol):
    """What batching needs of its profile's framework (upstream batchHandle)."""

    profile_name: str

    def run_filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status: ...
    def run_pre_score(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> Status: ...
    def run_raw_scores(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, slots: IntArray
    ) -> tuple[dict[str, IntArray], Status]: ...
    def normalize_scores(
        self, state: CycleState, pod: PodInfo, raw: Mapping[str, IntArray], slots: IntArray
    ) -> tuple[IntArray, dict[str, IntArray], Status]: ...


class ScoredNodes:
    """Candidate nodes best first (upstream SortedScoredNodes): names, raw Score output
    per plugin (for re-normalizing), weighted totals, and the tie-break key (ties go
    to the higher key; keys are drawn at random, as ties are broken here everywhere).

    Entries are only ever appended (a re-scored node comes back as a new entry) and
    popped ones masked out, so a cycle costs numpy work over the candidates and no
    Python loop. `slots` are the nodes' slots in the snapshot whose live-slot array is
    `live` (the NodeTable replaces that array whenever a node comes or goes): while it
    is the snapshot's current one the slots still name the same nodes, otherwise they
    are looked up by name again."""

    def __init__(
        self,
        names: list[str],
        slots: IntArray,
        live: IntArray,
        raw: dict[str, IntArray],
        total: IntArray,
        tiebreak: FloatArray,
    ) -> None:
        self.names = names
        self.slots = slots
        self.live = live
        self.raw = raw
        self.total = total
        self.tiebreak = tiebreak
        self.left = np.ones(len(names), dtype=np.bool_)
        self._count = len(names)

    def __len__(self) -> int:
        return self._count

    def pop(self) -> str:
        """Remove and return the best node."""
        total = np.where(self.left, self.total, -1)
        best = np.flatnonzero(total == total.max())
        i = int(best[np.argmax(self.tiebreak[best])]) if len(best) > 1 else int(best[0])
        self.left[i] = False
        self._count -= 1
        return self.names[i]

    def left_slots(self, snapshot: Snapshot) -> IntArray | None:
        """The slots of the nodes not popped, in `snapshot` (None when one is gone)."""
        if snapshot.live_slots() is self.live:
            return self.slots[self.left]
        index = snapshot.table.index
        looked_up = [index.get(n) for n, k in zip(self.names, self.left.tolist(), strict=True) if k]
        if any(s is None for s in looked_up):
            return None
        return np.asarray(looked_up, dtype=np.int64)

    def with_rescored(
        self,
        snapshot: Snapshot,
        slots_now: IntArray,
        name: str,
        raw: Mapping[str, IntArray],
        total: IntArray,
        tiebreak: float,
    ) -> ScoredNodes:
        """These candidates re-normalized, plus `name` as a new entry: `raw` holds the
        raw scores and `total` the new totals of the nodes left then `name`, aligned
        with `slots_now` (their slots in `snapshot`, `name`'s last)."""
        left = np.append(self.left, True)
        slots = np.append(self.slots, 0)
        slots[left] = slots_now
        full_raw: dict[str, IntArray] = {}
        for k, v in raw.items():
            col = np.zeros(len(left), dtype=np.int64)
            col[left] = v
            full_raw[k] = col
        full_total = np.zeros(len(left), dtype=np.int64)
        full_total[left] = total
        out = ScoredNodes(
            [*self.names, name],
            slots,
            snapshot.live_slots(),
            full_raw,
            full_total,
            np.append(self.tiebreak, tiebreak),
        )
        out.left = left
        out._count = self._count + 1
        return out


@dataclass
class _BatchState:
    signature: PodSignature
    nodes: ScoredNodes
    created: float


@dataclass
class _LastCycle:
    cycle: int = -1
    chosen_node: str = ""
    succeeded: bool = False


class OpportunisticBatch:
    """One profile's batch state (upstream OpportunisticBatch)."""

    def __init__(
        self,
        handle: BatchHandle,
        metrics: SchedulerMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._handle = handle
        self._metrics = metrics
        self._clock = clock
        self._state: _BatchState | None = None
        self._last = _LastCycle()
        self.batched_pods = 0  # pods placed on a hint (upstream batchedPods)

    @property
    def profile(self) -> str:
        return self._handle.profile_name

    def remaining(self) -> int:
        """How many cached candidates are left (0 without state)."""
        return len(self._state.nodes) if self._state is not None else 0

    # ------------------------------------------------------------------ hint
    def get_node_hint(
        self,
        pod: PodInfo,
        signature: PodSignature | None,
        state: CycleState,
        snapshot: Snapshot,
        cycle: int,
        rng: random.Random,
    ) -> str:
        """The node to try first, or "" (upstream GetNodeHint)."""
        start = time.perf_counter()
        hint = ""
        if self._compatible(pod, signature, cycle) and self._refresh(
            pod, state, snapshot, cycle, rng
        ):
            assert self._state is not None
            hint = self._state.nodes.pop()
        m = self._metrics
        if m is not None:
            if not hint:
                m.batch_attempts.labels(self.profile, NO_HINT).inc()
            m.get_node_hint_duration.labels("hint" if hint else "no_hint", self.profile).observe(
                time.perf_counter() - start
            )
        return hint

    def _flush(self, reason: str) -> None:
        """Record why the state cannot be used (upstream logUnusableState: the state
        itself is replaced at the next store)."""
        if self._metrics is not None:
            self._metrics.batch_cache_flushed.labels(self.profile, reason).inc()
        log.debug("batch state unusable profile=%s reason=%s", self.profile, reason)

    def _compatible(self, pod: PodInfo, signature: PodSignature | None, cycle: int) -> bool:
        """upstream batchStateCompatible (GenericWorkload, off by default, is not
        modelled: consecutive cycles only)."""
        st = self._state
        if st is None or len(st.nodes) == 0:
            return False
        if cycle != self._last.cycle + 1:
            # another pod (of any profile) was scheduled in between
            self._flush(FLUSH_POD_SKIPPED)
            return False
        if not self._last.succeeded:
            self._flush(FLUSH_POD_FAILED)
            return False
        if pod.nominated_node_name:
            self._flush(FLUSH_POD_NOMINATED)
            return False
        if signature is None or signature != st.signature:
            self._flush(FLUSH_POD_INCOMPATIBLE)
            return False
        if self._clock() > st.created + MAX_BATCH_AGE:
            self._flush(FLUSH_EXPIRED)
            return False
        return True

    def _refresh(
        self,
        pod: PodInfo,
        state: CycleState,
        snapshot: Snapshot,
        cycle: int,
        rng: random.Random,
    ) -> bool:
        """upstream refreshHintCandidates: the last chosen node, if it still passes
        Filter (the plain plugins, no nominated pods), is re-scored and competes again."""
        view = snapshot.get(self._last.chosen_node)
        if view is None:
            self._flush(FLUSH_NODE_MISSING)
            return False
        st = self._handle.run_filter(state, pod, view)
        if st.ok:
            return self._rescore(pod, state, snapshot, cycle, view, rng)
        if not st.is_rejected:
            self._flush(FLUSH_FILTER_ERROR)
            return False
        return True

    def _rescore(
        self,
        pod: PodInfo,
        state: CycleState,
        snapshot: Snapshot,
        cycle: int,
        view: NodeView,
        rng: random.Random,
    ) -> bool:
        """upstream rescoreHintedNode: PreScore over every cached candidate plus the
        last chosen node (on a copy of the cycle state), its raw scores, then Normalize
        across all of them with the candidates' stored raw scores."""
        start = time.perf_counter()
        m = self._metrics
        if m is not None:
            m.batch_rescore_attempts.labels(self.profile).inc()
        try:
            return self._rescore_timed(pod, state, snapshot, view, rng)
        finally:
            if m is not None:
                m.batch_rescore_duration.labels(self.profile).observe(time.perf_counter() - start)

    def _rescore_timed(
        self,
        pod: PodInfo,
        state: CycleState,
        snapshot: Snapshot,
        view: NodeView,
        rng: random.Random,
    ) -> bool:
        assert self._state is not None
        nodes = self._state.nodes
        cached = nodes.left_slots(snapshot)
        last_slot = snapshot.slot_of(view.name)
        if cached is None or last_slot is None:
            self._flush(FLUSH_NODE_MISSING)
            return False
        slots = np.append(cached, last_slot)
        rescore_state = state.clone()
        if not self._handle.run_pre_score(rescore_state, pod, snapshot, slots).ok:
            self._flush(FLUSH_PRESCORE_ERROR)
            return False
        fresh, st = self._handle.run_raw_scores(rescore_state, pod, snapshot, slots[-1:])
        if not st.ok:
            self._flush(FLUSH_RESCORE_ERROR)
            return False
        n = len(cached)
        left = nodes.left
        # a plugin that scored now but not when the list was stored contributes 0 for
        # the stored nodes (upstream leaves their NodeScore empty)
        raw = {
            k: np.concatenate(
                (nodes.raw[k][left] if k in nodes.raw else np.zeros(n, dtype=np.int64), v)
            )
            for k, v in fresh.items()
        }
        total, _, st = self._handle.normalize_scores(rescore_state, pod, raw, slots)
        if not st.ok:
            self._flush(FLUSH_NORMALIZE_ERROR)
            return False
        self._state.nodes = nodes.with_rescored(
            snapshot, slots, view.name, raw, total, rng.random()
        )
        return True

    # ------------------------------------------------------------------ store
    def store_schedule_results(
        self,
        signature: PodSignature | None,
        hinted: str,
        chosen: str,
        others: ScoredNodes | None,
        cycle: int,
        *,
        num_others: int | None = None,
    ) -> None:
        """After a successful scheduling algorithm (upstream StoreScheduleResults):
        remember the cycle; keep the other candidates when the pod was signed.
        `num_others` counts the other candidates when their list was not built (an
        unsigned pod's is never kept)."""
        start = time.perf_counter()
        if num_others is None:
            num_others = len(others) if others is not None else 0
        try:
            self._store(signature, hinted, chosen, others, num_others, cycle)
        finally:
            if self._metrics is not None:
                self._metrics.store_schedule_results_duration.labels(self.profile).observe(
                    time.perf_counter() - start
                )

    def _store(
        self,
        signature: PodSignature | None,
        hinted: str,
        chosen: str,
        others: ScoredNodes | None,
        num_others: int,
        cycle: int,
    ) -> None:
        self._last = _LastCycle(cycle, chosen, True)
        m = self._metrics
        if hinted == chosen:
            # the hint was used: the remaining list stays for the next pod
            if m is not None:
                m.batch_attempts.labels(self.profile, HINT_USED).inc()
            self.batched_pods += 1
            return
        if hinted and m is not None:
            m.batch_attempts.labels(self.profile, HINT_NOT_USED).inc()
        if signature is not None and others is not None and len(others) > 0:
            self._state = _BatchState(signature, others, self._clock())
            return
        self._flush(FLUSH_EMPTY_LIST if num_others == 0 else FLUSH_POD_NOT_BATCHABLE)
        self._state = None
