"""End-to-end: the chart's own pod on a real node (containerd + kubelet), the image built
from the Dockerfile, a real Prometheus. Marked `e2e`; they need root, the real-node
binaries (`hack/install-binaries.sh realnode`) and the Debian packages
(`hack/install-system-packages.sh`), which hack/test.sh installs. Outside CI a missing
piece skips them with the reason; in CI (CI=true) it fails them, so they cannot silently
stop running."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kas_dev.cluster import prometheus, realnode
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.e2e.prerequisites import missing_for_real_node, require
from tests.kube import ClusterHandle

ROOT = Path(__file__).resolve().parents[2]
KWOK_LABEL = "kas.local/kwok"
# two small kwok nodes for the workload (the real node runs only the scheduler's pods)
KWOK_NODES = [
    NodeGroup(count=2, name_prefix="kwok", cpu="2", memory="8Gi", labels={KWOK_LABEL: "true"})
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: the chart on a real node (root, containerd, kubelet, image build)"
    )


@dataclass
class RealCluster:
    handle: ClusterHandle
    local: LocalCluster
    real_node: str


@pytest.fixture(scope="session")
def real_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """The cluster with its real node (containerd, kubelet) and the kwok nodes, without
    the scheduler's image: what tests that run only the pause image need."""
    require(missing_for_real_node())
    # a short path: containerd's socket lives in it (unix sockets allow 108 bytes)
    local = LocalCluster(tmp_path_factory.mktemp("e2e") / "c")
    local.up(KWOK_NODES, real_nodes=1)
    try:
        (node,) = realnode.nodes_of(local.dir)
        yield RealCluster(ClusterHandle(local), local, node.name)
    finally:
        prometheus.stop(local)
        local.down()


@pytest.fixture(scope="session")
def real_cluster(real_node_cluster: RealCluster) -> RealCluster:
    """The same cluster with the image built from the Dockerfile in the real node's
    containerd (hack/build-image.sh, cached by source content)."""
    proc = subprocess.run(
        [
            "bash",
            str(ROOT / "hack" / "build-image.sh"),
            "--import",
            str(real_node_cluster.local.dir),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, f"hack/build-image.sh failed:\n{proc.stderr[-3000:]}"
    return real_node_cluster
