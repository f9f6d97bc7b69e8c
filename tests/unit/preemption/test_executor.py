"""The preemption executor with an in-memory API: step order, failures, victims that need
no call, no double delete across preemptors, metrics with real values, shutdown.

Interleavings are forced with per-call gates (asyncio.Event), never by sleeping."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler.client.errors import ApiError, Conflict, NotFound, ServerError
from scheduler.client.events import ObjectRef
from scheduler.metrics import SchedulerMetrics
from scheduler.model.pod import PodInfo
from scheduler.preemption.evaluator import Decision
from scheduler.preemption.executor import ExecutorSettings, PreemptionExecutor
from tests.unit.helpers.builders import make_pod
from tests.unit.helpers.fake_clock import FakeClock


@dataclass
class FakeApi:
    """Records every call; `fail[(verb, key)]` raises, `hold[(verb, key)]` blocks the call
    until the event is set, `cost` advances the fake clock per call."""

    clock: FakeClock
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    fail: dict[tuple[str, str], ApiError] = field(default_factory=dict)
    hold: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    entered: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    cost: float = 0.0
    active: int = 0
    max_active: int = 0
    on_call: Any = None

    async def _call(self, verb: str, key: str, body: Any) -> dict[str, Any]:
        self.calls.append((verb, key, body))
        if self.on_call is not None:
            self.on_call(verb, key)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            self.entered.setdefault((verb, key), asyncio.Event()).set()
            gate = self.hold.get((verb, key))
            if gate is not None:
                await gate.wait()
            else:
                await asyncio.sleep(0)
            self.clock.advance(self.cost)
            err = self.fail.get((verb, key))
            if err is not None:
                raise err
            return {}
        finally:
            self.active -= 1

    async def patch_pod_status(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._call("patch", f"{namespace}/{name}", patch)

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> dict[str, Any]:
        return await self._call("delete", f"{namespace}/{name}", uid)

    def called(self, verb: str | None = None) -> list[tuple[str, str]]:
        return [(v, k) for v, k, _ in self.calls if verb is None or v == verb]


@dataclass
class FakeEvents:
    events: list[tuple[str, str, str, str]] = field(default_factory=list)
    options: list[dict[str, Any]] = field(default_factory=list)

    def event(
        self, regarding: ObjectRef, type: str, reason: str, action: str, note: str, **kw: Any
    ) -> None:
        self.options.append(kw)
        self.events.append((regarding.name, type, reason, note))


@dataclass
class Harness:
    api: FakeApi
    events: FakeEvents
    metrics: SchedulerMetrics
    executor: PreemptionExecutor
    activated: list[list[str]]
    waiting: set[str]
    clock: FakeClock
    activation: asyncio.Event  # set at each activation
    handle: Any = None  # the preemptor's framework handle, as DefaultPreemption passes it
    # the cache as the executor's gate sees it (uid -> pod), unless the test gave its own
    # lookup: a started decision's victims show there as the informer had them
    cache: dict[str, PodInfo] = field(default_factory=dict)

    def start(self, d: Decision, message: str = "") -> asyncio.Task[bool]:
        for victim in d.victims:
            self.cache.setdefault(victim.uid, victim)
        return self.executor.start(d, message, self.handle)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)


def harness(
    max_parallel: int = 16,
    retry_initial: float = 1.0,
    retry_max: float = 10.0,
    pod_lookup: Any = None,
) -> Harness:
    clock = FakeClock()
    api = FakeApi(clock)
    events = FakeEvents()
    metrics = SchedulerMetrics()
    activated: list[list[str]] = []
    waiting: set[str] = set()
    activation = asyncio.Event()

    class WaitingVictims:
        """The framework's waiting pods, as the executor uses them (reject by uid)."""

        def reject(self, uid: str, plugin: str, message: str) -> bool:
            if uid in waiting:
                waiting.discard(uid)
                return True
            return False

    class FrameworkHandle:
        waiting_pods = WaitingVictims()

        def activate(self, pods: Iterable[PodInfo]) -> None:
            activated.append([p.name for p in pods])
            activation.set()

    cache: dict[str, PodInfo] = {}
    ex = PreemptionExecutor(
        api,
        events,
        pod_lookup=pod_lookup if pod_lookup is not None else cache.get,
        metrics=metrics,
        settings=ExecutorSettings(
            max_parallel_victims=max_parallel, retry_initial=retry_initial, retry_max=retry_max
        ),
        clock=clock,
    )
    return Harness(
        api, events, metrics, ex, activated, waiting, clock, activation, FrameworkHandle(), cache
    )


def pod(name: str, prio: int = 1, **kw: Any) -> PodInfo:
    b = make_pod(name).priority(prio).node("n1")
    if kw.get("terminating"):
        b = b.terminating()
    if kw.get("marked"):
        b = b.condition("DisruptionTarget", "True", "PreemptionByScheduler")
    return b.obj()


PREEMPTOR = make_pod("hi").priority(100).scheduler("kas").obj()


def decision(
    victims: Sequence[PodInfo], lower: Sequence[PodInfo] = (), preemptor: PodInfo = PREEMPTOR
) -> Decision:
    return Decision(preemptor, "n1", tuple(victims), 0, tuple(lower))


# ---------------------------------------------------------------- step order


async def test_steps_run_in_the_contract_order() -> None:
    h = harness()
    lower = make_pod("lower").priority(5).nominated("n1").obj()
    v1, v2, last = pod("v1", 3), pod("v2", 2), pod("last", 1)
    ok = await h.start(decision([v1, v2, last], [lower]), "0/3 nodes are available")
    assert ok
    keys = h.api.called()
    assert keys[0] == ("patch", "default/lower")
    assert h.api.calls[0][2] == {"status": {"nominatedNodeName": None}}
    assert keys[1] == ("patch", "default/hi")
    status = h.api.calls[1][2]["status"]
    assert status["nominatedNodeName"] == "n1"
    cond = status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
        "0/3 nodes are available",
    )
    # the first victims (in parallel), each condition before its delete; the last at the end
    middle = keys[2:6]
    assert sorted(middle) == sorted(
        [("patch", "default/v1"), ("delete", "default/v1"),
         ("patch", "default/v2"), ("delete", "default/v2")]
    )  # fmt: skip
    for name in ("v1", "v2"):
        assert middle.index(("patch", f"default/{name}")) < middle.index(
            ("delete", f"default/{name}")
        )
    assert keys[6:] == [("patch", "default/last"), ("delete", "default/last")]
    disruption = h.api.calls[6][2]["status"]["conditions"][0]
    assert disruption["type"] == "DisruptionTarget"
    assert disruption["reason"] == "PreemptionByScheduler"
    assert disruption["message"] == "kas: preempting to accommodate a higher priority pod"
    assert h.api.calls[7][2] == last.uid  # DELETE carries the uid precondition
    # Preempted on each victim, naming the preemptor
    assert sorted(e[0] for e in h.events.events) == ["last", "v1", "v2"]
    for _, type_, reason, note in h.events.events:
        assert (type_, reason) == ("Normal", "Preempted")
        # upstream's words: the preemptor's kind and UID (framework/preemption/executor.go)
        assert note == f"Preempted by pod {PREEMPTOR.uid} on node n1"
    # sent as the preemptor's profile, the preemptor related
    assert {o["controller"] for o in h.events.options} == {"kas"}
    assert {o["related"].name for o in h.events.options} == {"hi"}
    # the cleared pod is activated, and the preemptor when the task ends
    assert h.activated == [["lower"], ["hi"]]
    assert not h.executor.is_running(PREEMPTOR.uid)


async def test_the_last_victim_is_recorded_before_it_is_preempted() -> None:
    h = harness()
    seen: list[tuple[PodInfo | None, bool]] = []

    def on_call(verb: str, key: str) -> None:
        if key in ("default/v1", "default/last"):
            seen.append((h.executor.last_victim(PREEMPTOR.uid), h.executor.is_gated(PREEMPTOR.uid)))

    h.api.on_call = on_call
    v1, last = pod("v1", 2), pod("last", 1)
    await h.start(decision([v1, last]))
    assert seen[0] == (None, True)  # while the others run, nothing is recorded
    assert seen[-1] == (last, True)
    # after a success the preemptor stays gated until the cache shows every victim it
    # preempted leaving (the informer lags behind the DELETEs); the gate watches the
    # first one still showing
    assert not h.executor.is_running(PREEMPTOR.uid)
    assert h.executor.last_victim(PREEMPTOR.uid) == v1
    assert h.executor.is_gated(PREEMPTOR.uid)
    h.cache[v1.uid] = replace(v1, deletion_timestamp=1.0)  # the informer's update
    assert h.executor.last_victim(PREEMPTOR.uid) == last
    assert h.executor.is_gated(PREEMPTOR.uid)
    del h.cache[last.uid]  # the informer's delete
    assert h.executor.last_victim(PREEMPTOR.uid) is None
    assert not h.executor.is_gated(PREEMPTOR.uid)


async def test_a_failed_task_does_not_keep_its_preemptor_gated() -> None:
    h = harness()
    h.api.fail[("delete", "default/last")] = ServerError(500, "InternalError", "boom")
    await h.start(decision([pod("v1", 2), pod("last", 1)]))
    assert not h.executor.is_gated(PREEMPTOR.uid)
    assert h.executor.last_victim(PREEMPTOR.uid) is None


async def test_a_preemptor_whose_tasks_keep_failing_is_reactivated_later_each_time() -> None:
    # a refusal that persists (a webhook, RBAC) must not become a hot retry loop: the
    # first failure re-activates at once, further ones after retry_initial * 2^(n-2)
    h = harness(retry_initial=0.05, retry_max=0.1)
    h.api.fail[("delete", "default/v")] = ServerError(403, "Forbidden", "refused")
    loop = asyncio.get_running_loop()
    waits = []
    for expected in (0.0, 0.05, 0.1, 0.1):
        h.activation.clear()
        t0 = loop.time()
        await h.start(decision([pod("v")]))
        await asyncio.wait_for(h.activation.wait(), 2)
        waits.append(loop.time() - t0)
        assert expected <= waits[-1] < expected + 0.5, (expected, waits)
    assert h.sample("scheduler_preemption_goroutines_execution_total", result="error") == 4
    # a success resets the count: the next failure re-activates at once again
    del h.api.fail[("delete", "default/v")]
    before = len(h.activated)
    await h.start(decision([pod("v2")]))
    h.api.fail[("delete", "default/v3")] = ServerError(403, "Forbidden", "refused")
    await h.start(decision([pod("v3")]))
    assert len(h.activated) == before + 2  # the success's, then the failure's, at once


async def test_shutdown_cancels_a_delayed_reactivation() -> None:
    h = harness(retry_initial=0.05)
    h.api.fail[("delete", "default/v")] = ServerError(403, "Forbidden", "refused")
    await h.start(decision([pod("v")]))
    await h.start(decision([pod("v")]))
    before = len(h.activated)
    await h.executor.shutdown(1.0)
    await asyncio.sleep(0.1)
    assert len(h.activated) == before


async def test_an_awaited_last_victim_is_forgotten_after_the_ttl() -> None:
    h = harness()
    await h.start(decision([pod("last", 1)]))
    assert h.executor.is_gated(PREEMPTOR.uid)
    h.clock.advance(h.executor.settings.issued_delete_ttl + 1)
    assert not h.executor.is_gated(PREEMPTOR.uid)


async def test_a_single_victim_is_the_last_one() -> None:
    h = harness()
    only = pod("only")
    assert await h.start(decision([only]))
    assert h.api.called()[1:] == [("patch", "default/only"), ("delete", "default/only")]


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("case", "fail", "ok", "calls_for_last"),
    [
        ("a failed delete leaves the last victim alone",
         {("delete", "default/v1"): ServerError(500, "InternalError", "boom")}, False, []),
        ("a failed condition patch leaves the last victim alone",
         {("patch", "default/v1"): ServerError(500, "InternalError", "boom")}, False, []),
        ("NotFound on the condition patch is success, with no delete",
         {("patch", "default/v1"): NotFound(404, "NotFound", "gone")}, True,
         [("patch", "default/last"), ("delete", "default/last")]),
        ("NotFound on delete is success",
         {("delete", "default/v1"): NotFound(404, "NotFound", "gone")}, True,
         [("patch", "default/last"), ("delete", "default/last")]),
        ("a uid precondition conflict means the victim is gone",
         {("delete", "default/v1"): Conflict(409, "Conflict", "Precondition failed")}, True,
         [("patch", "default/last"), ("delete", "default/last")]),
        ("a failing last victim fails the task",
         {("delete", "default/last"): ServerError(500, "InternalError", "boom")}, False,
         [("patch", "default/last"), ("delete", "default/last")]),
    ],
)  # fmt: skip
async def test_victim_failures(
    case: str, fail: dict[tuple[str, str], ApiError], ok: bool, calls_for_last: list[Any]
) -> None:
    h = harness()
    h.api.fail.update(fail)
    assert await h.start(decision([pod("v1", 2), pod("last", 1)])) is ok, case
    assert [k for k in h.api.called() if k[1] == "default/last"] == calls_for_last, case
    if ("patch", "default/v1") in fail and isinstance(fail[("patch", "default/v1")], NotFound):
        assert ("delete", "default/v1") not in h.api.called(), case
    result = "success" if ok else "error"
    assert h.sample("scheduler_preemption_goroutines_execution_total", result=result) == 1, case
    # requeued at once / re-activated either way, nomination untouched by the executor
    assert h.activated[-1] == ["hi"], case
    assert not h.executor.is_running(PREEMPTOR.uid)


async def test_after_a_failure_no_further_victims_are_started() -> None:
    h = harness(max_parallel=1)
    h.api.fail[("delete", "default/v1")] = ServerError(500, "InternalError", "boom")
    victims = [pod("v1", 5), pod("v2", 4), pod("v3", 3), pod("last", 1)]
    assert not await h.start(decision(victims))
    touched = {k for _, k in h.api.called()}
    assert "default/v1" in touched
    assert not touched & {"default/v2", "default/v3", "default/last"}


async def test_clearing_a_nomination_fails_but_the_task_goes_on() -> None:
    h = harness()
    lower = make_pod("lower").priority(5).nominated("n1").obj()
    h.api.fail[("patch", "default/lower")] = ServerError(500, "InternalError", "boom")
    assert not await h.start(decision([pod("v1")], [lower]))
    assert ("delete", "default/v1") in h.api.called()
    assert h.sample("scheduler_preemption_goroutines_execution_total", result="error") == 1
    assert h.activated == [["hi"]]  # nothing cleared, so only the preemptor


async def test_a_deleted_preemptor_preempts_nobody() -> None:
    h = harness()
    h.api.fail[("patch", "default/hi")] = NotFound(404, "NotFound", "gone")
    assert not await h.start(decision([pod("v1")]))
    assert h.api.called() == [("patch", "default/hi")]
    assert h.activated == [["hi"]]


async def test_a_failed_preemptor_status_patch_does_not_stop_the_victims() -> None:
    h = harness()
    h.api.fail[("patch", "default/hi")] = ServerError(503, "ServiceUnavailable", "later")
    assert not await h.start(decision([pod("v1")]))
    assert ("delete", "default/v1") in h.api.called()


# ---------------------------------------------------------------- victims needing no call


async def test_terminating_victims_get_no_call_and_gate_only_the_status_patch() -> None:
    h = harness()
    h.api.hold[("patch", "default/hi")] = written = asyncio.Event()
    d = decision([pod("t1", 2, terminating=True), pod("t2", 1, terminating=True)])
    task = h.start(d)
    assert h.executor.is_running(PREEMPTOR.uid)
    # its own status patch is on its way: a retry that bound it first would make that
    # nominatedNodeName patch a 422 on a bound pod
    assert h.executor.is_gated(PREEMPTOR.uid)
    await h.api.entered.setdefault(("patch", "default/hi"), asyncio.Event()).wait()
    assert h.executor.is_gated(PREEMPTOR.uid)
    written.set()
    assert await task
    assert not h.executor.is_gated(PREEMPTOR.uid)
    assert h.api.called() == [("patch", "default/hi")]  # only the preemptor's status
    assert h.events.events == []


async def test_a_victim_with_the_condition_already_is_only_deleted() -> None:
    h = harness()
    assert await h.start(decision([pod("v1", marked=True)]))
    assert h.api.called()[1:] == [("delete", "default/v1")]


async def test_a_victim_waiting_at_permit_is_rejected_in_memory() -> None:
    h = harness()
    waiting = pod("waiting", 2)
    h.waiting.add(waiting.uid)
    assert await h.start(decision([waiting, pod("last", 1)]))
    assert [k for _, k in h.api.called()] == ["default/hi", "default/last", "default/last"]
    assert not h.waiting  # rejected
    assert sorted(e[0] for e in h.events.events) == ["last", "waiting"]


# ---------------------------------------------------------------- no double delete


async def test_two_preemptors_never_delete_the_same_victim_twice() -> None:
    h = harness()
    shared = pod("shared", 1)
    gate = asyncio.Event()
    h.api.hold[("delete", "default/shared")] = gate
    first_pre = make_pod("p1").priority(100).obj()
    second_pre = make_pod("p2").priority(100).obj()
    t1 = h.start(decision([shared], preemptor=first_pre))
    h.api.entered[("delete", "default/shared")] = entered = asyncio.Event()
    await entered.wait()  # the first DELETE is on the wire
    t2 = h.start(decision([pod("other", 1), shared], preemptor=second_pre))
    assert h.executor.is_gated(second_pre.uid)  # it waits for a call in flight
    for _ in range(5):
        await asyncio.sleep(0)
    assert h.api.called("delete").count(("delete", "default/shared")) == 1
    gate.set()
    assert await t1 and await t2
    assert h.api.called("delete").count(("delete", "default/shared")) == 1
    assert h.api.called("patch").count(("patch", "default/shared")) == 1
    # a third preemptor deciding before the informer shows the deletionTimestamp
    third = make_pod("p3").priority(100).obj()
    assert not h.executor.needs_call(shared)
    assert await h.start(decision([shared], preemptor=third))
    assert h.api.called("delete").count(("delete", "default/shared")) == 1


async def test_a_failed_shared_delete_fails_both_preemptors_and_can_be_retried() -> None:
    h = harness()
    shared = pod("shared", 1)
    gate = asyncio.Event()
    h.api.hold[("delete", "default/shared")] = gate
    h.api.fail[("delete", "default/shared")] = ServerError(500, "InternalError", "boom")
    t1 = h.start(decision([shared], preemptor=make_pod("p1").priority(9).obj()))
    h.api.entered[("delete", "default/shared")] = entered = asyncio.Event()
    await entered.wait()
    t2 = h.start(decision([shared], preemptor=make_pod("p2").priority(9).obj()))
    gate.set()
    assert not await t1 and not await t2
    assert h.executor.needs_call(shared) and not h.executor.delete_issued(shared.uid)


async def test_a_remembered_delete_is_forgotten_after_the_ttl() -> None:
    h = harness()
    v = pod("v")
    await h.start(decision([v]))
    assert h.executor.delete_issued(v.uid)
    h.clock.advance(ExecutorSettings().issued_delete_ttl + 1)
    assert not h.executor.delete_issued(v.uid)


# ---------------------------------------------------------------- bounds, metrics


async def test_victims_are_preempted_with_bounded_concurrency() -> None:
    h = harness(max_parallel=2)
    victims = [pod(f"v{i}", 10 - i) for i in range(7)]
    assert await h.start(decision(victims))
    assert h.api.max_active == 2
    assert h.api.called("delete")[-1] == ("delete", "default/v6")


async def test_metrics_record_the_real_result_and_duration() -> None:
    h = harness()
    h.api.cost = 0.25  # every call takes 250 ms of (fake) time
    gate = asyncio.Event()
    h.api.hold[("delete", "default/last")] = gate
    task = h.start(decision([pod("v1", 2), pod("last", 1)]))
    h.api.entered[("delete", "default/last")] = entered = asyncio.Event()
    await entered.wait()
    assert h.sample("scheduler_goroutines", operation="preemption") == 1
    gate.set()
    assert await task
    assert h.sample("scheduler_goroutines", operation="preemption") == 0
    assert h.sample("scheduler_preemption_goroutines_execution_total", result="success") == 1
    assert h.sample("scheduler_preemption_goroutines_execution_total", result="error") is None
    # preemptor patch, then v1 (patch+delete), then last (patch+delete): 5 calls, sequential
    assert h.sample(
        "scheduler_preemption_goroutines_duration_seconds_sum", result="success"
    ) == pytest.approx(1.25)
    assert h.sample("scheduler_preemption_goroutines_duration_seconds_count", result="success") == 1


async def test_starting_twice_for_one_preemptor_is_refused() -> None:
    h = harness()
    gate = asyncio.Event()
    h.api.hold[("patch", "default/hi")] = gate
    task = h.start(decision([pod("v1")]))
    with pytest.raises(RuntimeError, match="already running"):
        h.start(decision([pod("v2")]))
    gate.set()
    await task


# ---------------------------------------------------------------- shutdown


async def test_shutdown_cancels_a_stuck_task_which_still_finishes_cleanly() -> None:
    h = harness()
    h.api.hold[("delete", "default/v1")] = asyncio.Event()  # never set
    task = h.start(decision([pod("v1")]))
    h.api.entered[("delete", "default/v1")] = entered = asyncio.Event()
    await entered.wait()
    assert await h.executor.shutdown(grace=0.01) == 1
    assert task.cancelled()
    assert not h.executor.is_running(PREEMPTOR.uid)
    assert h.activated == [["hi"]]
    assert h.sample("scheduler_preemption_goroutines_execution_total", result="error") == 1
    assert h.sample("scheduler_goroutines", operation="preemption") == 0
    assert not h.executor.delete_issued(pod("v1").uid)
    with pytest.raises(RuntimeError, match="shut down"):
        h.start(decision([pod("v2")]))


async def test_shutdown_lets_running_tasks_finish_within_the_grace() -> None:
    h = harness()
    task = h.start(decision([pod("v1")]))
    assert await h.executor.shutdown(grace=5) == 0
    assert task.result() is True


# ---------------------------------------------------------------- no second preemption
# issue 10: a second preemption was decided for a preemptor 16 ms after its first task
# succeeded. The gate watched one "last" victim whose deletion says nothing about the
# others: an already-terminating victim (no call; its deletion was written long before),
# or one whose DELETE another preemptor issued earlier. The retry then met a cache still
# showing a victim this task had just deleted, and preempted again.


async def test_an_already_terminating_victim_is_never_the_one_the_gate_watches() -> None:
    h = harness()
    running, terminating = pod("v1", 2), pod("old", 1, terminating=True)
    assert await h.start(decision([running, terminating]))
    assert h.api.called()[1:] == [("patch", "default/v1"), ("delete", "default/v1")]
    # the cache has not shown v1 leaving yet: no retry, whatever "old" does
    assert h.executor.is_gated(PREEMPTOR.uid)
    assert h.executor.last_victim(PREEMPTOR.uid) == running


async def test_after_success_every_preempted_victim_must_be_seen_leaving() -> None:
    cache: dict[str, PodInfo] = {}
    h = harness(pod_lookup=cache.get)
    v1, shared = pod("v1", 2), pod("shared", 1)
    cache.update({v1.uid: v1, shared.uid: shared})
    other = make_pod("other").priority(100).scheduler("kas").obj()
    # another preemptor deleted "shared" first: this task skips its call
    assert await h.start(decision([shared], preemptor=other))
    assert await h.start(decision([v1, shared]))
    assert [k for _, k in h.api.called()].count("default/shared") == 2  # one patch, one DELETE
    assert h.executor.is_gated(PREEMPTOR.uid)
    # the informer shows the earlier deletion first (it was written first)
    cache[shared.uid] = replace(shared, deletion_timestamp=1.0)
    assert h.executor.is_gated(PREEMPTOR.uid)  # v1, deleted by this task, still shows
    assert h.executor.last_victim(PREEMPTOR.uid) == v1
    del cache[v1.uid]  # v1 gone
    assert not h.executor.is_gated(PREEMPTOR.uid)
    assert h.executor.last_victim(PREEMPTOR.uid) is None
