"""The CI slice of the gang oracle (tests/differential/gangs.py): upstream kube-scheduler
v1.37.2 and this scheduler, both with GenericWorkload, decide the same seeded PodGroups
on one real cluster; any difference fails.

The full run is `python -m tests.differential --gangs --scenarios 100`; docs/fidelity.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.differential.gangs import run_gang_oracle
from tests.kube import ClusterHandle

pytestmark = pytest.mark.cluster

SEED = 20261205
SCENARIOS = range(8)


def test_upstream_and_ours_place_the_same_gangs(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster(0, generic_workload=True)
    lines: list[str] = []
    tally = run_gang_oracle(cluster, tmp_path / "oracle", SEED, SCENARIOS, progress=lines.append)
    assert not tally.errors, tally.errors
    # it compared gangs of both outcomes, and upstream's queue race stayed rare
    assert tally.gangs >= len(SCENARIOS)
    assert tally.placed_gangs > 0 and tally.pending_gangs > 0
    assert tally.excluded * 4 <= tally.gangs + tally.excluded
    assert not tally.differences, "\n".join([tally.table(), *lines])
