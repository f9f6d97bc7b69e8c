"""What the scheduling loop uses of a profile's framework (upstream's Framework
interface, seen from schedule_one.go) after the algorithm (scheduler/algorithm) has
picked a node or failed: PostFilter, Reserve, Permit and the binding points.

`runtime.Framework` is the one implementation; the loop is written against this
Protocol, so its failure paths are tested against a fake framework
(tests/unit/test_loop.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PostFilterPlugin, PostFilterResult
from scheduler.framework.status import Status
from scheduler.framework.waiting_pods import WaitingPods
from scheduler.model.pod import PodInfo

if TYPE_CHECKING:
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.diagnosis import Diagnosis
    from scheduler.framework.filter_runner import FilterRunner


class SchedulingFramework(Protocol):
    profile_name: str

    @property
    def waiting_pods(self) -> WaitingPods: ...
    @property
    def post_filter_plugins(self) -> Sequence[PostFilterPlugin]: ...

    def has_plugin(self, name: str) -> bool: ...
    def plugin(self, name: str) -> Any: ...
    @property
    def filter_runner(self) -> FilterRunner: ...
    def run_post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]: ...
    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...
    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...
    def run_permit(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[Status, float]: ...
    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...
    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...
    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...
