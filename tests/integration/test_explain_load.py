"""explain under a burst, CI-sized (the full size is `python -m bench.explain_load`): a
leader-elected scheduler on 200 nodes schedules pods while waves of 50 concurrent
explain calls arrive. The leader must not change, its renewals must not stall, every
call must be answered (200) or refused at once (429), and the pods must all be bound.
Throughput is reported, not asserted: two shared cores make it too noisy for a test."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.explain_load import Bench

pytestmark = pytest.mark.cluster


def test_a_burst_of_explain_calls_neither_moves_the_leader_nor_stalls_its_renewals(
    tmp_path: Path,
) -> None:
    bench = Bench(nodes=200, pods=400, schedule=600, calls=50, targets=50, rounds=1,
                  base=tmp_path)  # fmt: skip
    figures = asyncio.run(bench.run())
    print(figures.table())
    assert figures.leader_changes == 0 and not figures.scheduler_exited
    assert figures.longest_gap < 5.0, figures.longest_gap  # renewDeadline / 2
    loaded = [p for p in figures.phases if p.label == "explain"]
    answers = sum((p.answers for p in loaded), start=type(loaded[0].answers)())
    assert set(answers) <= {200, 429}, answers
    assert answers[200] >= 1 and figures.evaluations >= 1
    assert all(p.pods == 600 and p.seconds > 0 for p in figures.phases)
