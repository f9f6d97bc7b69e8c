"""explain's EvaluationGate: one evaluation at a time, a bounded wait queue with 429 and
Retry-After beyond it, one evaluation per question (joined while running, kept for the
ttl), and the pause that keeps explain within its share of the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from scheduler.explain.gate import Busy, EvaluationGate, Timed
from tests.unit.helpers.fake_clock import FakeClock


class Evaluations:
    """Evaluations that run until the test releases them, counting the overlap."""

    def __init__(self, busy: float = 0.0) -> None:
        self.busy = busy
        self.running = 0
        self.most_at_once = 0
        self.started: list[str] = []
        self.release: dict[str, asyncio.Event] = {}
        # loop times at which each evaluation started and ended
        self.started_at: dict[str, float] = {}
        self.ended_at: dict[str, float] = {}

    def __call__(self, key: str) -> Callable[[], Awaitable[Timed[str]]]:
        async def evaluate() -> Timed[str]:
            loop = asyncio.get_running_loop()
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.started.append(key)
            self.started_at[key] = loop.time()
            try:
                await self.release.setdefault(key, asyncio.Event()).wait()
            finally:
                self.running -= 1
                self.ended_at[key] = loop.time()
            return Timed(f"answer {key}", self.busy)

        return evaluate

    def done(self, key: str) -> None:
        self.release.setdefault(key, asyncio.Event()).set()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_one_evaluation_at_a_time_in_arrival_order() -> None:
    gate: EvaluationGate[str] = EvaluationGate(queue_size=4, share=1.0)
    ev = Evaluations()
    calls = [asyncio.create_task(gate.run(k, ev(k))) for k in ("a", "b", "c")]
    await _settle()
    assert ev.started == ["a"] and gate.waiting == 2
    for k in ("a", "b", "c"):
        ev.done(k)
        await _settle()
    assert await asyncio.gather(*calls) == ["answer a", "answer b", "answer c"]
    assert ev.started == ["a", "b", "c"] and ev.most_at_once == 1


async def test_beyond_the_queue_a_request_is_refused_with_a_retry_after() -> None:
    gate: EvaluationGate[str] = EvaluationGate(queue_size=2, share=1.0)
    ev = Evaluations()
    running = [asyncio.create_task(gate.run(k, ev(k))) for k in ("a", "b", "c")]
    await _settle()
    assert gate.waiting == 2
    with pytest.raises(Busy) as refused:
        await gate.run("d", ev("d"))
    assert refused.value.retry_after >= 1
    assert "d" not in ev.started
    # the same question as a waiting one joins it: no place taken, no refusal
    joined = asyncio.create_task(gate.run("c", ev("c")))
    for k in ("a", "b", "c"):
        ev.done(k)
        await _settle()
    assert await joined == "answer c"
    await asyncio.gather(*running)
    assert ev.started == ["a", "b", "c"]


async def test_a_burst_of_the_same_question_costs_one_evaluation_and_is_kept_for_the_ttl() -> None:
    clock = FakeClock()
    gate: EvaluationGate[str] = EvaluationGate(queue_size=0, ttl=3.0, share=1.0, clock=clock.now)
    ev = Evaluations()
    burst = [asyncio.create_task(gate.run("a", ev("a"))) for _ in range(50)]
    await _settle()
    ev.done("a")
    assert set(await asyncio.gather(*burst)) == {"answer a"}
    assert ev.started == ["a"] and gate.evaluations == 1
    clock.advance(2.9)
    assert await gate.run("a", ev("a")) == "answer a"
    assert gate.evaluations == 1
    clock.advance(0.2)  # the answer expired: evaluated anew
    again = asyncio.create_task(gate.run("a", ev("a")))
    await _settle()
    assert await again == "answer a" and gate.evaluations == 2


async def test_the_next_evaluation_waits_so_explain_keeps_to_its_share() -> None:
    # each evaluation held the loop 20 ms; a share of 0.5 means 20 ms of pause after it
    gate: EvaluationGate[str] = EvaluationGate(queue_size=4, share=0.5)
    ev = Evaluations(busy=0.02)
    ev.done("a")
    ev.done("b")
    first = await gate.run("a", ev("a"))
    assert first == "answer a"
    second = await gate.run("b", ev("b"))
    assert second == "answer b"
    # the pause came between a's end and b's start (measured from a's end, which is no
    # later than the moment the pause was scheduled: a busy machine that stalls the
    # process after that moment cannot make the gap look shorter)
    assert ev.started_at["b"] - ev.ended_at["a"] >= 0.0199


async def test_a_failed_evaluation_reaches_its_joiners_and_frees_the_turn() -> None:
    gate: EvaluationGate[str] = EvaluationGate(queue_size=2, share=1.0)
    started = asyncio.Event()

    async def broken() -> Timed[str]:
        started.set()
        await asyncio.sleep(0)
        raise RuntimeError("plugin broke")

    owner = asyncio.create_task(gate.run("a", broken))
    await started.wait()
    joiner = asyncio.create_task(gate.run("a", broken))
    with pytest.raises(RuntimeError):
        await owner
    with pytest.raises(RuntimeError):
        await joiner
    ev = Evaluations()
    ev.done("b")
    assert await gate.run("b", ev("b")) == "answer b"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        EvaluationGate(share=0)
    with pytest.raises(ValueError):
        EvaluationGate(queue_size=-1)
