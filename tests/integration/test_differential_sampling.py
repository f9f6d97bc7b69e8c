"""The CI slice of the sampling oracle: on clusters of more than 100 nodes, upstream
kube-scheduler v1.37.2 and this scheduler search the same nodes (zone by zone, from the
same rotating start) and find the same ones feasible; any difference fails.

The full run is `python -m tests.differential.sampling --scenarios 30`; docs/fidelity.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.differential.sampling import run_sampling_oracle
from tests.kube import ClusterHandle

pytestmark = pytest.mark.cluster

SEED = 20261203


def test_upstream_and_ours_search_the_same_nodes_of_a_large_cluster(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster(0)
    lines: list[str] = []
    run = run_sampling_oracle(
        cluster, tmp_path / "oracle", SEED, range(2), progress=lines.append, nodes=200
    )
    tally = run.tally
    assert not tally.errors, tally.errors
    assert not tally.refused, tally.refused
    assert tally.scenarios == 2 and min(run.nodes) > 100
    # every probe showed a run of the node order, and every pod between two probes
    # was compared on the nodes it processed
    assert tally.made["order"] >= 2 * 2 * 4
    assert tally.made["evaluated"] >= 2 * 3
    assert tally.made["feasibility"] > 0 and tally.made["score"] > 0
    assert not tally.differences, "\n".join([tally.table(), *lines])
