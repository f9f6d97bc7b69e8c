"""PreemptionPolicies fail closed: no victim before the first complete listing or while
the watch is broken or the CRD is not served; the watcher re-lists after any failure,
is restarted when its informer dies, and tells an operator's deletion of a policy from
the CRD's (policies lost with their CRD are held in force).

A scripted connection stands in for the API server (the real one:
tests/integration/test_preemption_policy_fail_closed.py).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import pytest

from scheduler.client.backoff import Backoff
from scheduler.client.errors import NotFound, ServerError
from scheduler.policy.store import LOST_POLICY_HOLD, PolicyStore
from scheduler.policy.sync import NOT_LISTED, PolicySync
from scheduler.policy.watcher import CRD_PATH, POLICIES, PolicyWatcher
from scheduler.preemption.victim_policy import recording_nothing
from tests.unit.policy.test_rules import NOW, evaluate, policy, victim

Raw = dict[str, Any]


def pol(name: str, rv: str, **spec: Any) -> Raw:
    return {"metadata": {"name": name, "generation": 1, "resourceVersion": rv}, "spec": spec}


def listing(*items: Raw, rv: str = "10") -> Raw:
    return {"metadata": {"resourceVersion": rv}, "items": list(items)}


def crd(uid: str = "u1", *, deleting: bool = False, established: bool = True) -> Raw:
    meta: Raw = {"name": "preemptionpolicies.scheduling.kas.io", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cond = {"type": "Established", "status": "True" if established else "False"}
    return {"metadata": meta, "status": {"conditions": [cond]}}


class FakeApi:
    """LISTs answered in order (the last one repeats); a watch plays its script (an
    asyncio.Event in it is waited for), then blocks until cancelled; GET of the CRD
    answers `self.crd` (a dict or an exception)."""

    def __init__(self) -> None:
        self.lists: deque[Raw | Exception] = deque()
        self.watches: deque[list[Raw | Exception | asyncio.Event]] = deque()
        self.crd: Raw | Exception = crd()
        self.calls: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> Raw:
        assert method == "GET"
        if path == CRD_PATH:
            self.calls.append("crd")
            if isinstance(self.crd, Exception):
                raise self.crd
            return self.crd
        assert path == POLICIES.path
        self.calls.append("list")
        answer = self.lists.popleft() if len(self.lists) > 1 else self.lists[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def watch(self, path: str, **_: Any) -> AsyncGenerator[Raw, None]:
        self.calls.append("watch")
        script = self.watches.popleft() if self.watches else []
        for item in script:
            if isinstance(item, asyncio.Event):
                await item.wait()
                continue
            if isinstance(item, Exception):
                raise item
            yield item
        await asyncio.Event().wait()


class Harness:
    def __init__(self) -> None:
        self.api = FakeApi()
        self.now = NOW
        self.requeues = 0
        self.sync = PolicySync()
        self.store = PolicyStore(
            {"batch": {}, "prod": {}}.get,
            wall=lambda: self.now,
            sync=self.sync,
            on_spec_change=self._requeue,
        )
        self.delays: list[float] = []
        self.cue = asyncio.Event()  # a scenario's own signal

        async def sleep(delay: float) -> None:
            self.delays.append(delay)
            await asyncio.sleep(0)

        self.watcher = PolicyWatcher(
            self.api,  # type: ignore[arg-type]
            self.store,
            self.sync,
            restart_backoff=Backoff(initial=0.5, maximum=10.0, rand=lambda: 0.0),
            check_backoff=Backoff(initial=0.5, maximum=10.0, rand=lambda: 0.0),
            list_backoff=lambda: Backoff(initial=0.25, maximum=5.0, rand=lambda: 0.0),
            sleep=sleep,
        )

        def became_current() -> None:
            self.watcher.became_current()
            self._requeue()

        self.sync.on_current = became_current

    def _requeue(self) -> None:
        self.requeues += 1

    def may_preempt(self) -> bool:
        return self.store.refuse_all(victim("pre")) is None

    async def run(self, scenario: Callable[[Harness], Awaitable[None]]) -> None:
        task = asyncio.create_task(self.watcher.run())
        try:
            await scenario(self)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


async def until(cond: Callable[[], bool], what: str = "condition") -> None:
    for _ in range(2000):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{what} not reached")


# ---------------------------------------------------------------- the evaluator's gate


def test_no_victim_before_the_first_listing_the_message_says_why() -> None:
    sync = PolicySync()
    s = PolicyStore({"batch": {}}.get, wall=lambda: NOW, sync=sync)
    result = evaluate(s, [victim("a", cpu="4")])  # no policy protects it: still refused
    assert result.decision is None and not result.clear_nomination
    assert NOT_LISTED in result.status.message()
    assert s.metrics.unsynced_refusals._value.get() == 1
    sync.listed()
    assert evaluate(s, [victim("a", cpu="4")]).decision is not None


def test_explain_sees_the_same_refusal_and_counts_nothing() -> None:
    sync = PolicySync()
    s = PolicyStore({"batch": {}}.get, wall=lambda: NOW, sync=sync)
    dry = recording_nothing(s)
    assert NOT_LISTED in (dry.refuse_all(victim("pre")) or "")
    assert s.metrics.unsynced_refusals._value.get() == 0
    sync.listed()
    assert dry.refuse_all(victim("pre")) is None


def test_a_failure_closes_a_listed_view_until_the_next_listing() -> None:
    became: list[bool] = []
    sync = PolicySync(on_current=lambda: became.append(True))
    sync.listed()
    assert sync.current and became == [True]
    sync.failed("watch broke")
    assert sync.reason() == "watch broke"
    sync.crd_checked("CRD gone")
    sync.listed()
    assert sync.reason() == "CRD gone"  # a listing alone does not clear the CRD's finding
    sync.crd_checked(None)
    assert sync.current and became == [True, True]


def test_a_policy_lost_with_its_crd_is_held_until_listed_again_or_its_time_is_up() -> None:
    now = [NOW]
    s = PolicyStore({"prod": {}}.get, wall=lambda: now[0])
    s.apply(policy("guard", protectedNamespaces=["batch"]))
    s.delete("guard")
    s.hold_deletions()
    assert s.held == {"guard"} and "guard" in s.in_force() and s.state("guard") is None
    assert evaluate(s, [victim("a", cpu="4")]).decision is None  # still protected
    assert s.start_hold_clock() == LOST_POLICY_HOLD
    now[0] += LOST_POLICY_HOLD - 1
    assert s.expire_held() == 1.0  # early: the seconds left
    assert s.held == {"guard"}
    now[0] += 1
    assert s.expire_held() is None
    assert s.held == frozenset() and s.in_force() == {}
    # listed again before its time: the listed version replaces the held one
    s.apply(policy("guard", protectedNamespaces=["batch"]))
    s.delete("guard")
    s.hold_deletions()
    s.apply(policy("guard", 2, protectedNamespaces=["prod"]))
    assert s.held == frozenset() and s.in_force()["guard"].generation == 2


# ---------------------------------------------------------------- the watcher


def test_the_first_listing_opens_preemption_and_requeues_the_waiting_pods() -> None:
    async def scenario(h: Harness) -> None:
        assert not h.may_preempt()
        await until(lambda: h.sync.current, "in sync")
        assert h.may_preempt() and h.requeues >= 1
        assert "guard" in h.store.in_force()
        await until(lambda: "crd" in h.api.calls, "the CRD checked after the listing")

    h = Harness()
    h.api.lists.append(listing(pol("guard", "5", protectedNamespaces=["prod"])))
    asyncio.run(h.run(scenario))


def test_a_broken_watch_closes_preemption_until_a_fresh_listing() -> None:
    async def scenario(h: Harness) -> None:
        await until(lambda: h.sync.current and "watch" in h.api.calls)
        assert h.sync.reason() is None
        broken.set()
        await until(lambda: h.watcher.metrics.watch_failures._value.get() == 1, "the failure")
        assert "list/watch failed" in (h.sync.reason() or "") and not h.may_preempt()
        await until(lambda: h.sync.current, "in sync again")
        # not resumed from the old resourceVersion: listed afresh before watching again
        second_watch = [i for i, c in enumerate(h.api.calls) if c == "watch"][1]
        assert h.api.calls[:second_watch].count("list") == 2

    h = Harness()
    broken = asyncio.Event()
    h.api.lists.extend([listing(rv="10"), listing(rv="20")])
    h.api.watches.append([broken, ServerError(500, "InternalError", "etcd leader changed")])
    asyncio.run(h.run(scenario))


def test_a_killed_watcher_is_restarted_with_backoff_and_closed_meanwhile() -> None:
    async def scenario(h: Harness) -> None:
        await until(lambda: h.sync.current and "watch" in h.api.calls)
        first = h.watcher.informer
        assert first is not None and first._worker is not None
        first._worker.cancel()  # kill it
        await until(lambda: h.watcher.restarts == 1, "a restart")
        assert not h.may_preempt()
        assert "restarting" in (h.sync.reason() or "")
        await until(lambda: h.watcher.informer is not first and h.sync.current, "back")
        assert h.delays[0] == 0.5  # the restart backoff
        assert h.watcher.metrics.watcher_restarts._value.get() == 1
        assert h.may_preempt()

    h = Harness()
    h.api.lists.append(listing())
    asyncio.run(h.run(scenario))


def guard_deleted_on_cue() -> Harness:
    """The policy "guard" listed; its DELETED event comes when `h.cue` is set."""
    h = Harness()
    h.api.lists.append(listing(pol("guard", "5", protectedNamespaces=["prod"])))
    h.api.watches.append([h.cue, {"type": "DELETED", "object": pol("guard", "11")}])
    return h


def test_an_operators_deletion_frees_after_the_crd_check() -> None:
    async def scenario(h: Harness) -> None:
        await until(lambda: h.sync.current and h.api.calls.count("crd") == 1)
        before = h.requeues
        h.cue.set()
        await until(lambda: h.store.pending_deletions == {"guard"} or not h.store.in_force())
        await until(lambda: h.store.in_force() == {}, "the deletion applied")
        assert h.requeues > before and h.sync.current and h.api.calls.count("crd") == 2

    asyncio.run(guard_deleted_on_cue().run(scenario))


def test_policies_deleted_with_their_crd_stay_in_force_and_preemption_waits() -> None:
    async def scenario(h: Harness) -> None:
        await until(lambda: h.sync.current and h.api.calls.count("crd") == 1)
        # the cascade: the CRD is being deleted when its policies' DELETED events arrive
        h.api.crd = crd(deleting=True)
        h.cue.set()
        await until(lambda: h.store.held == {"guard"}, "held")
        assert not h.may_preempt()
        assert "being deleted" in (h.sync.reason() or "")
        # the CRD goes (checked again with backoff), then comes back under a new uid
        h.api.crd = NotFound(404, "NotFound", "not found")
        await until(lambda: "not found" in (h.sync.reason() or ""))
        h.api.crd = crd("u2")
        await until(lambda: h.sync.current, "in sync under the new CRD")
        assert "guard" in h.store.in_force() and h.store.held == {"guard"}
        assert h.store.start_hold_clock() == LOST_POLICY_HOLD
        assert evaluate(h.store, [victim("a", ns="prod", cpu="4")]).decision is None

    asyncio.run(guard_deleted_on_cue().run(scenario))


def test_a_crd_replaced_while_unwatched_holds_the_policies_that_vanished() -> None:
    async def scenario(h: Harness) -> None:
        await until(lambda: h.sync.current and h.api.calls.count("crd") == 1)
        h.api.crd = crd("u2")  # replaced; the re-list finds it empty
        h.watcher.informer._worker.cancel()  # type: ignore[union-attr]
        await until(lambda: h.store.held == {"guard"}, "held")
        await until(lambda: h.sync.current)
        assert "guard" in h.store.in_force()

    h = Harness()
    h.api.lists.extend([listing(pol("guard", "5", protectedNamespaces=["prod"])), listing()])
    asyncio.run(h.run(scenario))


def test_the_watchers_timer_ends_the_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import scheduler.policy.store as store_module

    monkeypatch.setattr(store_module, "LOST_POLICY_HOLD", 0.05)

    async def scenario() -> None:
        h = Harness()
        h.store._wall = time.time
        h.store.apply(policy("guard", protectedNamespaces=["batch"]))
        h.store.delete("guard")
        h.store.hold_deletions()
        requeues = h.requeues
        h.watcher.became_current()
        await asyncio.sleep(0.01)
        assert h.store.held == {"guard"}
        for _ in range(100):
            await asyncio.sleep(0.01)
            if not h.store.held:
                break
        assert h.store.held == frozenset() and h.requeues == requeues + 1

    asyncio.run(scenario())
