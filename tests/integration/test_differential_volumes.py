"""The volume slice of the differential oracle: upstream kube-scheduler v1.37.2 and this
scheduler decide pods with volumes (WaitForFirstConsumer static volumes, bound claims and
zones, ReadWriteOncePod and inline disks with a preemption, CSI attach limits,
provisioning with allowedTopologies and CSIStorageCapacity) on one real cluster; any
difference fails. Scenarios: tests/differential/volumes.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.differential.volumes import run_volume_oracle
from tests.kube import ClusterHandle

pytestmark = pytest.mark.cluster


def test_upstream_and_ours_place_pods_with_volumes_alike(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster(0)
    lines: list[str] = []
    tally = run_volume_oracle(cluster, tmp_path / "oracle", progress=lines.append)
    report = "\n".join([tally.table(), *lines])
    assert not tally.errors, tally.errors
    assert not tally.refused, tally.refused
    # every kind of comparison was made, including preemptions for volumes
    assert tally.pods >= 25 and tally.made["outcome"] == tally.pods
    assert tally.made["message"] >= 8 and tally.made["node"] >= 5, report
    assert tally.made["score"] >= 40 and tally.made["preemption"] >= 2, report
    assert not tally.differences, report
    # the refusals carry the volume plugins' own words
    for words in (
        "didn't find available persistent volumes to bind",
        "didn't match PersistentVolume's node affinity",
        "had no available volume zone",
        "ReadWriteOncePod access mode already in-use by another pod",
        "exceed max volume count",
        "did not have enough free storage",
        "pod has unbound immediate PersistentVolumeClaims",
    ):
        assert any(words in line for line in lines), (words, report)
