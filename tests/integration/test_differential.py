"""The CI slice of the differential oracle: upstream kube-scheduler v1.37.2 and this
scheduler decide the same seeded scenarios on one real cluster; any difference fails.

The full run (150+ scenarios) is `python -m tests.differential`; docs/fidelity.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.differential import scenario as sc
from tests.differential.run import run_oracle
from tests.kube import ClusterHandle

pytestmark = pytest.mark.cluster

SEED = 20261201
SCENARIOS = range(12)
# preemptions whose victims tie on priority and start time (issue 23): about 10 s each
TIE_SCENARIOS = range(6)


def test_upstream_and_ours_decide_alike_on_seeded_scenarios(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster(0)
    lines: list[str] = []
    result = run_oracle(cluster, tmp_path / "oracle", SEED, SCENARIOS, progress=lines.append)
    tally = result.tally
    # the run compared something of every kind it claims to compare
    assert tally.pods >= len(SCENARIOS) * 3
    assert tally.made["outcome"] == tally.pods
    assert tally.made["feasibility"] >= tally.pods * 3
    assert tally.made["message"] > 0 and tally.made["score"] > 0 and tally.made["node"] > 0
    assert not tally.errors, tally.errors
    assert not tally.refused, tally.refused  # the generator writes only valid pods
    assert not tally.differences, "\n".join([tally.table(), *lines])


def test_upstream_and_ours_preempt_alike_when_victims_tie(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster(0)
    lines: list[str] = []
    result = run_oracle(
        cluster,
        tmp_path / "oracle",
        SEED,
        TIE_SCENARIOS,
        progress=lines.append,
        generate=sc.generate_ties,
    )
    tally = result.tally
    assert not tally.errors, tally.errors
    assert not tally.refused, tally.refused
    # it compared candidates' victims name by name, and exact picks where upstream's
    # pick was determined
    assert tally.made["preemption"] >= len(TIE_SCENARIOS)
    assert tally.made["victims"] >= len(TIE_SCENARIOS)
    assert tally.made["determined"] > 0
    assert not tally.differences, "\n".join([tally.table(), *lines])
