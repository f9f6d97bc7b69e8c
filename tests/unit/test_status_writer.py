"""scheduler.status_writer: upstream's "unchanged condition" skip, a bound on writes in
flight, and per-pod coalescing (only the latest wanted status is written)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from scheduler.client.errors import Forbidden, LeaseNotHeld, NotFound
from scheduler.metrics import SchedulerMetrics
from scheduler.model.pod import PodCondition, PodInfo
from scheduler.status_writer import StatusWriter, WantedStatus, needs_update

T0 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
MSG = "0/20 nodes are available: 20 Insufficient cpu."


def pod(
    name: str,
    *,
    condition: PodCondition | None = None,
    nominated: str = "",
) -> PodInfo:
    return PodInfo(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        nominated_node_name=nominated,
        conditions=(condition,) if condition else (),
    )


def unschedulable(reason: str = "Unschedulable", message: str = MSG) -> PodCondition:
    return PodCondition("PodScheduled", "False", reason, message)


class GatedPatch:
    """A patch call that waits until released, recording what was sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.peak = 0
        self.gate = asyncio.Event()
        self.errors: dict[str, Exception] = {}

    async def __call__(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.gate.wait()
            self.sent.append((name, patch))
            if name in self.errors:
                raise self.errors[name]
            return {}
        finally:
            self.in_flight -= 1


def counts(m: SchedulerMetrics) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in m.registry.collect():
        if family.name == "scheduler_pod_status_patches":
            for s in family.samples:
                if s.name.endswith("_total"):
                    out[s.labels["result"]] = s.value
    return out


def writer(patch: GatedPatch, **kw: Any) -> tuple[StatusWriter, SchedulerMetrics]:
    m = SchedulerMetrics()
    return StatusWriter(patch, metrics=m, wall=lambda: T0, **kw), m


# ---- the upstream rule -------------------------------------------------------------


def test_the_same_status_reason_and_message_needs_no_write() -> None:
    wanted = WantedStatus("Unschedulable", MSG, None)
    assert not needs_update(pod("a", condition=unschedulable()), wanted)
    assert needs_update(pod("a"), wanted)  # no condition yet
    assert needs_update(pod("a", condition=unschedulable(message="other")), wanted)
    assert needs_update(pod("a", condition=unschedulable(reason="SchedulerError")), wanted)
    scheduled = PodCondition("PodScheduled", "True", "", "")
    assert needs_update(pod("a", condition=scheduled), wanted)


def test_a_nomination_change_alone_needs_a_write() -> None:
    same = pod("a", condition=unschedulable(), nominated="n1")
    assert not needs_update(same, WantedStatus("Unschedulable", MSG, "n1"))
    assert needs_update(same, WantedStatus("Unschedulable", MSG, "n2"))
    assert needs_update(same, WantedStatus("Unschedulable", MSG, ""))  # clear it
    assert not needs_update(same, WantedStatus("Unschedulable", MSG, None))  # leave it


async def test_an_unchanged_pod_gets_no_write_and_is_counted() -> None:
    patch = GatedPatch()
    w, m = writer(patch)
    w.unschedulable(pod("a", condition=unschedulable()), "Unschedulable", MSG, None)
    assert w.in_flight == 0 and patch.sent == []
    assert counts(m) == {"unchanged": 1.0}


async def test_the_body_stamps_lastTransitionTime_only_on_a_transition() -> None:
    patch = GatedPatch()
    patch.gate.set()
    w, _ = writer(patch)
    w.unschedulable(pod("new"), "Unschedulable", MSG, "n1")
    w.unschedulable(pod("old", condition=unschedulable(message="before")), "Unschedulable", MSG, "")
    await w.wait_idle()
    bodies = dict(patch.sent)
    new = bodies["new"]["status"]
    assert new["conditions"][0]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    assert new["nominatedNodeName"] == "n1"
    old = bodies["old"]["status"]
    assert "lastTransitionTime" not in old["conditions"][0]  # the server keeps the old one
    assert "nominatedNodeName" not in old  # "" wanted and "" shown: nothing to clear


# ---- bounded and coalesced -----------------------------------------------------------


async def test_writes_in_flight_are_bounded_and_every_pod_is_written_once() -> None:
    patch = GatedPatch()
    w, m = writer(patch, max_in_flight=3)
    for i in range(40):
        w.unschedulable(pod(f"p{i}"), "Unschedulable", MSG, None)
    assert w.in_flight == 3 and w.waiting == 37
    await asyncio.sleep(0)
    assert patch.in_flight == 3
    patch.gate.set()
    await w.wait_idle()
    assert patch.peak == 3
    assert sorted(name for name, _ in patch.sent) == sorted(f"p{i}" for i in range(40))
    assert [name for name, _ in patch.sent][:3] == ["p0", "p1", "p2"]  # arrival order
    assert counts(m) == {"written": 40.0}


async def test_a_waiting_pod_keeps_only_its_latest_wanted_status() -> None:
    patch = GatedPatch()
    w, m = writer(patch, max_in_flight=1)
    w.unschedulable(pod("busy"), "Unschedulable", MSG, None)  # takes the only slot
    for i in range(5):
        w.unschedulable(pod("a"), "Unschedulable", f"attempt {i}", None)
    assert w.waiting == 1
    patch.gate.set()
    await w.wait_idle()
    written = [p["status"]["conditions"][0]["message"] for n, p in patch.sent if n == "a"]
    assert written == ["attempt 4"]
    assert counts(m) == {"written": 2.0, "coalesced": 4.0}


async def test_a_new_status_for_a_pod_being_written_follows_that_write() -> None:
    patch = GatedPatch()
    w, _ = writer(patch, max_in_flight=4)
    w.unschedulable(pod("a"), "Unschedulable", "first", None)
    w.unschedulable(pod("a"), "Unschedulable", "first", None)  # that very write is on its way
    w.unschedulable(pod("a"), "SchedulerError", "second", None)
    assert w.in_flight == 1 and w.waiting == 1  # never two writes of one pod at once
    patch.gate.set()
    await w.wait_idle()
    assert [p["status"]["conditions"][0]["message"] for _, p in patch.sent] == [
        "first",
        "second",
    ]


async def test_forget_drops_what_waits_for_a_pod_someone_else_writes() -> None:
    patch = GatedPatch()
    w, _ = writer(patch, max_in_flight=1)
    w.unschedulable(pod("busy"), "Unschedulable", MSG, None)
    w.unschedulable(pod("preemptor"), "Unschedulable", MSG, None)
    w.forget("uid-preemptor")
    patch.gate.set()
    await w.wait_idle()
    assert [name for name, _ in patch.sent] == ["busy"]


@pytest.mark.parametrize(
    ("error", "result"),
    [
        (NotFound(404, "NotFound"), "gone"),
        (Forbidden(403, "Forbidden"), "failed"),
        (LeaseNotHeld("patch pods/status"), "fenced"),  # not sent: not the leader
    ],
)
async def test_failures_are_counted_not_raised(error: Exception, result: str) -> None:
    patch = GatedPatch()
    patch.errors["a"] = error
    patch.gate.set()
    w, m = writer(patch)
    w.unschedulable(pod("a"), "Unschedulable", MSG, None)
    w.unschedulable(pod("b"), "Unschedulable", MSG, None)
    await w.wait_idle()
    assert counts(m) == {result: 1.0, "written": 1.0}


async def test_drain_gives_up_on_what_waits_and_counts_it() -> None:
    patch = GatedPatch()
    w, m = writer(patch, max_in_flight=1)
    for i in range(3):
        w.unschedulable(pod(f"p{i}"), "Unschedulable", MSG, None)
    given_up = await w.drain(grace=0.01)
    assert given_up == 3  # two waiting, one cancelled in flight
    assert counts(m)["failed"] == 3.0


async def test_a_pod_bound_or_deleted_while_waiting_is_not_written() -> None:
    patch = GatedPatch()
    pending = {"uid-busy", "uid-a"}
    m = SchedulerMetrics()
    w = StatusWriter(
        patch, metrics=m, wall=lambda: T0, max_in_flight=1, is_pending=lambda p: p.uid in pending
    )
    w.unschedulable(pod("busy"), "Unschedulable", MSG, None)
    w.unschedulable(pod("a"), "Unschedulable", MSG, "n1")
    pending.discard("uid-a")  # bound meanwhile (the informer says so)
    patch.gate.set()
    await w.wait_idle()
    assert [name for name, _ in patch.sent] == ["busy"]
    assert counts(m) == {"written": 1.0, "gone": 1.0}
