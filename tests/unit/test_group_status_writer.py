"""PodGroupInitiallyScheduled writes: upstream's SetStatusCondition rule, never True back
to False, coalesced per group, every outcome counted."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from scheduler.group_status_writer import GroupStatusWriter, WantedCondition, condition_patch
from scheduler.metrics import PodGroupMetrics, SchedulerMetrics
from scheduler.model.pod_group import GroupCondition, PodGroupInfo

NOW = dt.datetime(2026, 12, 5, 8, 0, 0, tzinfo=dt.UTC)
LATER = "2026-12-05T08:00:00Z"
EARLIER = "2026-12-01T00:00:00Z"


def _group(cond: GroupCondition | None = None, generation: int = 1) -> PodGroupInfo:
    return PodGroupInfo(
        namespace="ns", name="g", policy="gang", min_count=2, generation=generation,
        initially_scheduled=cond,
    )  # fmt: skip


def test_the_condition_follows_set_status_condition() -> None:
    wanted = WantedCondition("False", "Unschedulable", "minCount (2) cannot be satisfied")
    body = condition_patch(_group(), wanted, NOW)
    assert body == {
        "status": {
            "conditions": [
                {
                    "type": "PodGroupInitiallyScheduled", "status": "False",
                    "reason": "Unschedulable", "message": "minCount (2) cannot be satisfied",
                    "observedGeneration": 1, "lastTransitionTime": LATER,
                }
            ]
        }
    }  # fmt: skip
    same = GroupCondition("False", "Unschedulable", wanted.message, EARLIER, 1)
    assert condition_patch(_group(same), wanted, NOW) is None
    # a new message keeps the transition time; a new generation is written
    other = WantedCondition("False", "Unschedulable", "something else")
    cond = condition_patch(_group(same), other, NOW)["status"]["conditions"][0]  # type: ignore[index]
    assert cond["lastTransitionTime"] == EARLIER
    assert condition_patch(_group(same, generation=2), wanted, NOW) is not None
    # placed once: never set back to False
    placed = GroupCondition("True", "Scheduled", "", EARLIER, 1)
    assert condition_patch(_group(placed), wanted, NOW) is None


async def test_writes_are_coalesced_and_counted() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    gate = asyncio.Event()

    async def patch(namespace: str, name: str, body: dict[str, Any]) -> None:
        await gate.wait()
        sent.append((name, body))

    metrics = PodGroupMetrics(SchedulerMetrics().registry)
    writer = GroupStatusWriter(patch, metrics=metrics, max_in_flight=1, now=lambda: NOW)
    first = WantedCondition("False", "Unschedulable", "one")
    writer.want(_group(), first)  # in flight
    writer.want(PodGroupInfo(namespace="ns", name="h"), first)  # waits
    writer.want(PodGroupInfo(namespace="ns", name="h"), WantedCondition("True", "Scheduled", ""))
    gate.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert [n for n, _ in sent] == ["g", "h"]
    assert sent[1][1]["status"]["conditions"][0]["status"] == "True"
    counts = {
        r: metrics.status_patches.labels(result=r)._value.get()
        for r in ("written", "coalesced")
    }
    assert counts == {"written": 2, "coalesced": 1}


async def test_false_never_follows_true_even_before_the_true_lands() -> None:
    # the next cycle of a placed group (its leftover members) may end before the
    # informer shows the True: the writer itself remembers it
    sent: list[str] = []

    async def patch(namespace: str, name: str, body: dict[str, Any]) -> None:
        sent.append(body["status"]["conditions"][0]["status"])

    metrics = PodGroupMetrics(SchedulerMetrics().registry)
    writer = GroupStatusWriter(patch, metrics=metrics, now=lambda: NOW)
    group = PodGroupInfo(namespace="ns", name="g", uid="u1")
    writer.want(group, WantedCondition("True", "Scheduled", ""))
    writer.want(group, WantedCondition("False", "Unschedulable", "pod group is unschedulable"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert sent == ["True"]
    assert metrics.status_patches.labels(result="unchanged")._value.get() == 1
