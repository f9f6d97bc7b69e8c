"""The scheduling algorithm as the loop runs it, one per profile: schedule_pod over the
profile's framework with the profile's opportunistic batching, which lives across the
loop's cycles (upstream keeps it on the framework; here the algorithm owns its own state,
so the framework below it never calls back up).

Explain and preemption never use this: explain runs schedule_pod without batching (a
question must not feed the next cycle's hint), and a dry run is not a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from scheduler.algorithm.batch import OpportunisticBatch
from scheduler.algorithm.schedule_one import schedule_pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import FitError, ScheduleResult
from scheduler.framework.handle import NominatedPods
from scheduler.framework.runtime import Framework
from scheduler.framework.search import SearchState
from scheduler.model.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.snapshot import Snapshot
    from scheduler.metrics import SchedulerMetrics


class SchedulePod(Protocol):
    """What the loop calls for a pod of one profile (upstream Scheduler.SchedulePod, a
    function field so that tests can stand in for it)."""

    def __call__(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        nominator: NominatedPods,
        search: SearchState,
        /,
    ) -> ScheduleResult | FitError:
        """A node or a FitError; raises SchedulingError when a plugin errs."""
        ...


class ProfileAlgorithm:
    """schedule_pod for one profile, with that profile's opportunistic batching."""

    __slots__ = ("batch", "framework")

    def __init__(self, framework: Framework, metrics: SchedulerMetrics | None = None) -> None:
        self.framework = framework
        self.batch = OpportunisticBatch(framework, metrics)

    def __call__(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        nominator: NominatedPods,
        search: SearchState,
        /,
    ) -> ScheduleResult | FitError:
        return schedule_pod(
            self.framework, state, pod, snapshot, nominator, search=search, batch=self.batch
        )
