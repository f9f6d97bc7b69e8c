"""Waiting at Permit as upstream v1.37.2 waits (pkg/scheduler/framework/runtime):
RunPermitPlugins caps each plugin's wait at 15 minutes, newWaitingPod arms one timer per
waiting plugin, and the first to fire rejects the pod in that plugin's name with
"rejected due to timeout after waiting <time.Duration> at plugin <name>"."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import MAX_PERMIT_WAIT
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting_pods import WaitingPod, permit_timeout_message
from scheduler.model import PodInfo
from tests.unit.helpers.builders import make_framework, make_pod


@dataclass
class Waits:
    name: str
    seconds: float

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return Status(Code.WAIT), self.seconds


@dataclass
class Allows:
    name: str = "Allows"

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return Status.success(), 0.0


def _permit(*plugins: object) -> tuple[Status, float]:
    fwk = make_framework()
    fwk.permit_plugins = list(plugins)
    return fwk.run_permit(CycleState(), make_pod("p").obj(), "n1")  # type: ignore[no-any-return]


def test_the_wait_that_ends_first_names_its_plugin() -> None:
    st, wait = _permit(Waits("Slow", 90), Allows(), Waits("Fast", 10), Waits("AlsoFast", 10))
    assert (st.code, st.plugin, wait) == (Code.WAIT, "Fast", 10)


def test_a_wait_is_capped_at_upstreams_fifteen_minutes() -> None:
    st, wait = _permit(Waits("Long", 3600))
    assert (st.code, st.plugin, wait) == (Code.WAIT, "Long", MAX_PERMIT_WAIT)
    assert permit_timeout_message(wait, "Long") == (
        "rejected due to timeout after waiting 15m0s at plugin Long"
    )


def test_a_rejection_stops_before_any_wait() -> None:
    def refuse(state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return Status.unschedulable("no room"), 0.0

    refusing = Allows("Refuses")
    refusing.permit = refuse  # type: ignore[method-assign]
    st, _ = _permit(Waits("W", 5), refusing)
    assert (st.code, st.plugin) == (Code.UNSCHEDULABLE, "Refuses")


def test_the_timeout_message_prints_the_wait_as_go_does() -> None:
    assert permit_timeout_message(10, "Gang") == (
        "rejected due to timeout after waiting 10s at plugin Gang"
    )
    assert permit_timeout_message(90, "Gang").endswith("waiting 1m30s at plugin Gang")
    assert permit_timeout_message(0.5, "Gang").endswith("waiting 500ms at plugin Gang")


async def test_the_waiting_pod_is_rejected_by_its_plugin_when_its_timer_fires() -> None:
    waiting = WaitingPod(make_pod("p").obj(), "n1", plugin="Gang", timeout=0.001)
    verdict = await asyncio.wait_for(waiting.verdict, 30)  # safety net only
    assert verdict == Status.unschedulable(
        "rejected due to timeout after waiting 1ms at plugin Gang", plugin="Gang"
    )


async def test_a_verdict_before_the_timeout_stops_the_timer() -> None:
    waiting = WaitingPod(make_pod("p").obj(), "n1", plugin="Gang", timeout=3600)
    waiting.allow()
    assert waiting.verdict.result() == Status.success()
    assert waiting._timer is not None and waiting._timer.cancelled()
