"""Shared fixtures. Integration and end-to-end tests get a REAL local control plane
(etcd, kube-apiserver, kube-controller-manager, kwok) started here; the binaries come from
hack/install-binaries.sh (KAS_BIN_DIR overrides where they are)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pytest

from kas_dev.cluster.binaries import find_binaries
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.kube import ClusterHandle

_counter = itertools.count()
# every control plane a test starts dies with the test process, even if pytest is killed
# before its teardown runs (`cluster up` run as a command drops the setting: its
# processes must outlive it)
os.environ["KAS_CLUSTER_DIE_WITH_PARENT"] = "1"


def _start(
    tmp_path_factory: pytest.TempPathFactory,
    nodes: list[NodeGroup] | int,
    *,
    generic_workload: bool = False,
) -> ClusterHandle:
    try:
        find_binaries()
    except ClusterError as exc:
        pytest.fail(f"the control-plane binaries are missing: {exc}", pytrace=False)
    local = LocalCluster(tmp_path_factory.mktemp(f"cluster{next(_counter)}"))
    local.up(nodes, generic_workload=generic_workload)
    return ClusterHandle(local)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    """One control plane for the whole session, with 4 default kwok nodes. Tests that need
    a node set of their own should use `make_cluster` instead of sharing this one."""
    handle = _start(tmp_path_factory, 4)
    yield handle
    handle.local.down()


@pytest.fixture
def make_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ClusterHandle]]:
    """A factory for fresh clusters (about 3 s each); all are stopped after the test.
    `generic_workload=True` serves the Workload/PodGroup API (LocalCluster.up)."""
    made: list[ClusterHandle] = []

    def make(nodes: list[NodeGroup] | int = 0, *, generic_workload: bool = False) -> ClusterHandle:
        handle = _start(tmp_path_factory, nodes, generic_workload=generic_workload)
        made.append(handle)
        return handle

    yield make
    for h in made:
        h.local.down()
