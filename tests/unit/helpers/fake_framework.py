"""A scriptable stand-in for the SchedulingFramework Protocol, and a harness that runs the
REAL SchedulingLoop, Cache, SchedulingQueue, Nominator, StatusWriter and SchedulerMetrics
around it (tests/unit/test_loop.py).

Each extension point is a plain callable attribute the test replaces: it returns what
the point should answer, raises to play a crashing plugin, or (the async ones) awaits
whatever the test wants. Every call is recorded in order as (point, pod name).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.algorithm import SchedulePod
from scheduler.cache import Cache, Nominator, Snapshot
from scheduler.client.events import ObjectRef
from scheduler.framework.cluster_event import ClusterEventWithHint
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import Diagnosis, FitError, ScheduleResult
from scheduler.framework.handle import NominatedPods
from scheduler.framework.interfaces import PostFilterPlugin, PostFilterResult
from scheduler.framework.scheduling_framework import SchedulingFramework
from scheduler.framework.search import SearchState
from scheduler.framework.status import Status
from scheduler.framework.waiting_pods import WaitingPods
from scheduler.loop import SchedulingLoop
from scheduler.metrics import SchedulerMetrics
from scheduler.model import PodInfo
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.scheduling_failure import RESULT_ERROR
from scheduler.status_writer import StatusWriter
from scheduler.supervisor import TaskSet
from tests.unit.helpers.builders import make_node
from tests.unit.helpers.fake_clock import FakeClock

PROFILE = "default-scheduler"
NODE = "n1"

Call = tuple[str, str]  # (extension point, pod name)


class DeclaredPostFilter(PostFilterPlugin):
    """Makes `post_filter_plugins` non-empty; the loop only calls run_post_filter."""

    name = "FakePostFilter"

    def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        raise AssertionError("the loop goes through run_post_filter")


def fits(pod: PodInfo, snapshot: Snapshot) -> ScheduleResult | FitError:
    return ScheduleResult(NODE, 1, 1)


def does_not_fit(reason: str = "Insufficient cpu", plugin: str = "NodeResourcesFit") -> Any:
    """A schedule_pod script: every node rejects the pod with `reason` from `plugin`."""

    def schedule(pod: PodInfo, snapshot: Snapshot) -> ScheduleResult | FitError:
        diagnosis = Diagnosis(snapshot)
        diagnosis.set_all(Status.unschedulable(reason, plugin=plugin))
        return FitError(pod, snapshot.num_nodes, diagnosis)

    return schedule


def raising(exc: BaseException) -> Callable[..., Any]:
    def crash(*args: Any) -> Any:
        raise exc

    return crash


def async_raising(exc: BaseException) -> Callable[..., Awaitable[Status]]:
    async def crash(*args: Any) -> Status:
        raise exc

    return crash


async def _ok(pod: PodInfo, node: str) -> Status:
    return Status.success()


def _not_eligible(pod: PodInfo) -> tuple[PostFilterResult | None, Status]:
    return None, Status.unschedulable("preemption: not eligible")


class FakeFramework:
    """Implements scheduler.framework.scheduling_framework.SchedulingFramework."""

    profile_name: str = PROFILE

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.waiting_pods = WaitingPods()
        self.post_filter_plugins: Sequence[PostFilterPlugin] = ()
        # the scripts: (pod, ...) -> answer
        self.schedule: Callable[[PodInfo, Snapshot], ScheduleResult | FitError] = fits
        self.post_filter: Callable[[PodInfo], tuple[PostFilterResult | None, Status]] = (
            _not_eligible
        )
        self.reserve: Callable[[PodInfo, str], Status] = lambda pod, node: Status.success()
        self.permit: Callable[[PodInfo, str], tuple[Status, float]] = lambda pod, node: (
            Status.success(),
            0.0,
        )
        self.pre_bind: Callable[[PodInfo, str], Awaitable[Status]] = _ok
        self.bind: Callable[[PodInfo, str], Awaitable[Status]] = _ok

    def called(self, point: str) -> list[str]:
        """The pods `point` was called for, in order."""
        return [pod for p, pod in self.calls if p == point]

    def schedule_pod(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        nominator: NominatedPods,
        search: SearchState,
    ) -> ScheduleResult | FitError:
        self.calls.append(("schedule_pod", pod.name))
        return self.schedule(pod, snapshot)

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        self.calls.append(("run_post_filter", pod.name))
        return self.post_filter(pod)

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.calls.append(("run_reserve", pod.name))
        return self.reserve(pod, node_name)

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.calls.append(("run_unreserve", pod.name))

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        self.calls.append(("run_permit", pod.name))
        return self.permit(pod, node_name)

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.calls.append(("run_pre_bind", pod.name))
        return await self.pre_bind(pod, node_name)

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.calls.append(("run_bind", pod.name))
        return await self.bind(pod, node_name)

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.calls.append(("run_post_bind", pod.name))


def _conforms(fake: FakeFramework) -> SchedulingFramework:
    return fake  # strict mypy checks the fake against the Protocol here


def _schedules(fake: FakeFramework) -> SchedulePod:
    return fake.schedule_pod  # and its script against the loop's algorithm


class CountingQueue(SchedulingQueue[PodInfo]):
    """The real queue, counting done(uid): each pop must end in exactly one done, or the
    pod stays in flight forever."""

    def __init__(
        self,
        clock: FakeClock,
        metrics: SchedulerMetrics,
        events_to_register: Mapping[str, Sequence[ClusterEventWithHint]] | None = None,
    ) -> None:
        super().__init__(clock=clock, metrics=metrics, events_to_register=events_to_register)
        self.done_calls: Counter[str] = Counter()

    def done(self, uid: str) -> None:
        self.done_calls[uid] += 1
        super().done(uid)


@dataclass(frozen=True, slots=True)
class SentEvent:
    pod: str
    type: str
    reason: str
    note: str


class RecordingEvents:
    """The EventRecorder's one method the loop uses."""

    def __init__(self) -> None:
        self.sent: list[SentEvent] = []

    def event(
        self, regarding: ObjectRef, type: str, reason: str, action: str, note: str, **kw: Any
    ) -> None:
        self.sent.append(SentEvent(regarding.name, type, reason, note))

    def failed_scheduling(self) -> list[tuple[str, str]]:
        return [(e.pod, e.note) for e in self.sent if e.reason == "FailedScheduling"]


@dataclass
class Harness:
    fwk: FakeFramework
    loop: SchedulingLoop
    queue: CountingQueue
    cache: Cache
    nominator: Nominator
    events: RecordingEvents
    status_writer: StatusWriter
    metrics: SchedulerMetrics
    clock: FakeClock
    binds: TaskSet
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fence_open: bool = True
    fence_asked: list[str] = field(default_factory=list)

    async def pop(self, pod: PodInfo) -> QueuedPodInfo[PodInfo]:
        """Queue `pod` and pop it, as the loop would."""
        self.queue.add(pod)
        info = await self.queue.pop()
        assert info is not None and info.pod.uid == pod.uid
        return info

    async def attempt(self, pod: PodInfo, *, binds_grace: float = 30.0) -> None:
        """One scheduling cycle of `pod`, then its binding cycle (if any) to its end, then
        the status writes. The grace is a safety net; nothing here waits for time."""
        self.loop.schedule_one(await self.pop(pod))
        await self.loop.drain_binds(binds_grace)
        await self.status_writer.wait_idle()

    def attempts(self, result: str = RESULT_ERROR) -> float:
        value = self.metrics.registry.get_sample_value(
            "scheduler_schedule_attempts_total", {"result": result, "profile": PROFILE}
        )
        return value or 0.0

    def cache_clean(self, pod: PodInfo) -> bool:
        """No assumption and no room held for `pod`."""
        return not self.cache.is_assumed(pod) and self.cache.get_pod(pod.uid) is None


def harness(
    events_to_register: Mapping[str, Sequence[ClusterEventWithHint]] | None = None,
) -> Harness:
    """`events_to_register`: the queueing hints of the queue (plugin -> events); none
    by default, so a pod a plugin rejected stays unschedulable whatever happens."""
    clock = FakeClock()
    metrics = SchedulerMetrics()
    cache = Cache(clock=clock)
    cache.add_node(make_node(NODE).obj())
    queue = CountingQueue(clock, metrics, events_to_register)
    nominator = Nominator()
    fwk = FakeFramework()
    events = RecordingEvents()
    patches: list[tuple[str, dict[str, Any]]] = []

    async def patch(namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        patches.append((name, body))
        return {}

    status_writer = StatusWriter(patch, metrics=metrics)
    binds = TaskSet("binds")
    h = Harness(
        fwk=fwk,
        loop=None,  # type: ignore[arg-type]  # set right below: the fence reads the harness
        queue=queue,
        cache=cache,
        nominator=nominator,
        events=events,
        status_writer=status_writer,
        metrics=metrics,
        clock=clock,
        binds=binds,
        patches=patches,
    )

    def fence(operation: str) -> bool:
        h.fence_asked.append(operation)
        return h.fence_open

    h.loop = SchedulingLoop(
        cache=cache,
        queue=queue,
        nominator=nominator,
        frameworks={PROFILE: fwk},
        # the loop's algorithm for the profile is the fake's script (upstream's tests
        # replace Scheduler.SchedulePod the same way)
        algorithms={PROFILE: fwk.schedule_pod},
        events=events,  # type: ignore[arg-type]  # records the one method the loop calls
        status_writer=status_writer,
        metrics=metrics,
        clock=clock,
        fence=fence,
        binds=binds,
    )
    return h
