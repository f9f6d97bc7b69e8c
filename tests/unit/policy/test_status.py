"""The PreemptionPolicy status writer (leader only, coalesced, NotFound dropped, failures
counted and retried) and the counters a new replica continues. The watcher's effect on
the store is in test_fail_closed.py."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.policy.status import PolicyStatusWriter
from scheduler.policy.store import PolicyStore


class Gone(Exception):
    pass


def obj(name: str, generation: int, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "generation": generation}, "spec": spec}


class Recorder:
    def __init__(self, fail: type[Exception] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail

    async def __call__(self, path: str, body: dict[str, Any]) -> None:
        self.calls.append((path, body))
        if self.fail is not None:
            raise self.fail("refused")


async def _run_until(writer: PolicyStatusWriter, done: Any) -> None:
    task = asyncio.create_task(writer.run())
    try:
        for _ in range(200):
            await asyncio.sleep(0.005)
            if done():
                return
        raise AssertionError("condition not reached")
    finally:
        task.cancel()


def _writer(store: PolicyStore, patch: Recorder, leader: list[bool]) -> PolicyStatusWriter:
    w = PolicyStatusWriter(store, patch, lambda: leader[0], lambda e: isinstance(e, Gone), interval=0)
    store.on_change = w.mark
    return w


def test_only_the_leader_writes_and_a_new_leader_writes_every_policy() -> None:
    async def scenario() -> None:
        store, patch, leader = PolicyStore(lambda ns: {}), Recorder(), [False]
        writer = _writer(store, patch, leader)
        store.apply(obj("a", 1, maxVictimsPerPreemption=1))
        store.apply(obj("b", 1, maxVictimsPerPreemption=0))  # invalid
        task = asyncio.create_task(writer.run())
        await asyncio.sleep(0.05)
        assert patch.calls == []  # a follower writes nothing
        leader[0] = True
        writer.mark_all()
        await asyncio.sleep(0.05)
        task.cancel()
        written = {path.split("/")[-2]: body["status"] for path, body in patch.calls}
        assert written["a"]["conditions"][0]["status"] == "True"
        assert written["a"]["observedGeneration"] == 1
        assert written["b"]["conditions"][0]["status"] == "False"
        assert "not in force" in written["b"]["conditions"][0]["message"]
        assert "inForceGeneration" not in written["b"]

    asyncio.run(scenario())


def test_an_unchanged_status_is_not_written_again_and_not_found_is_dropped() -> None:
    async def scenario() -> None:
        store, patch = PolicyStore(lambda ns: {}), Recorder()
        writer = _writer(store, patch, [True])
        store.apply(obj("a", 1))
        await _run_until(writer, lambda: len(patch.calls) == 1)
        store.apply(obj("a", 1))  # the event of our own write
        await _run_until(writer, lambda: True)
        assert len(patch.calls) == 1
        patch.fail = Gone
        store.apply(obj("a", 2, tolerationSeconds=5))
        await _run_until(writer, lambda: len(patch.calls) == 2)
        assert writer.writes.labels(result="not_found")._value.get() == 1

    asyncio.run(scenario())


def test_a_failed_write_is_counted_and_retried() -> None:
    async def scenario() -> None:
        store, patch = PolicyStore(lambda ns: {}), Recorder(fail=RuntimeError)
        writer = _writer(store, patch, [True])
        store.apply(obj("a", 1))
        await _run_until(writer, lambda: len(patch.calls) >= 2)
        assert writer.writes.labels(result="error")._value.get() >= 2

    asyncio.run(scenario())


def test_a_new_replica_continues_the_counters_in_status() -> None:
    store = PolicyStore(lambda ns: {})
    o = obj("a", 3) | {"status": {"victimsChosen": 7, "preemptionsRefused": 2}}
    state = store.apply(o)
    assert (state.victims_chosen, state.preemptions_refused) == (7, 2)
