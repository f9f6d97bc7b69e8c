"""A DRA driver on a real node: hack/dra-test-driver run beside the node's kubelet.

The kubelet starts a pod with ResourceClaims only once every driver named in their
allocations has prepared them (NodePrepareResources), so a claim pod on a real node
needs a driver registered with that node's kubelet. This one publishes a ResourceSlice
of a few devices for the node and prepares claims without giving the runtime anything;
it logs each prepare and unprepare (`prepared_claims`, `unprepared_claims`).

Where it connects: the kubelet of a real node has a --root-dir of its own
(RealNode.kubelet_root_dir, upstream's /var/lib/kubelet), so the registration socket
goes in <root dir>/plugins_registry, where the kubelet's plugin watcher looks; the DRA
socket the kubelet then calls goes in a folder of the driver's own in the node's folder.

Credentials: the kubelet's own (system:node:<name>). The Node authorizer and the
NodeRestriction admission plugin let a node get the ResourceClaims of its pods and
write the ResourceSlices of its own node name, which is all a node-local driver does,
so no RBAC is needed. (A driver deployed as a DaemonSet would use a ServiceAccount
allowed the same, ideally held to its node by a ValidatingAdmissionPolicy.)

Started per node by `start`, tracked like the node's other processes: `stop`, or the
cluster's teardown (realnode.teardown) ends it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kas_dev.cluster import process, realnode
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.go_build import build_cached
from kas_dev.cluster.realnode_config import RealNode

if TYPE_CHECKING:
    from kas_dev.cluster.local import LocalCluster

SOURCE = Path(__file__).resolve().parents[2] / "hack" / "dra-test-driver"
DRIVER = "dra.kas.local"
# the driver's log lines the harness reads (hack/dra-test-driver/main.go)
REGISTERED = "registered with the kubelet"
REFUSED = "the kubelet refused the registration"
_PREPARED = re.compile(r'"prepared claim ([^"/]+/[^"]+)"')
_UNPREPARED = re.compile(r'"unprepared claim ([^"/]+/[^"]+)"')
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


@dataclass(frozen=True, slots=True)
class DriverOnNode:
    node: str
    driver: str
    devices: tuple[str, ...]
    log: Path

    def _log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def prepared_claims(self) -> list[str]:
        """ "namespace/name" of each claim the kubelet had it prepare, in order."""
        return _PREPARED.findall(self._log_text())

    def unprepared_claims(self) -> list[str]:
        return _UNPREPARED.findall(self._log_text())


def _node(cluster: LocalCluster, name: str | None) -> RealNode:
    nodes = realnode.nodes_of(cluster.dir)
    for node in nodes:
        if name is None or node.name == name:
            return node
    wanted = f"real node {name}" if name else "real node"
    raise ClusterError(f"no {wanted} in {cluster.dir}")


def start(cluster: LocalCluster, node_name: str | None = None, devices: int = 4) -> DriverOnNode:
    """Start the driver beside the kubelet of `node_name` (the first real node if None);
    return once the kubelet has accepted it and its ResourceSlice is in the API."""
    node = _node(cluster, node_name)
    registry = node.kubelet_root_dir / "plugins_registry"
    socket = registry / f"{DRIVER}-reg.sock"
    if len(str(socket)) > realnode.MAX_SOCKET_PATH:
        raise ClusterError(
            f"the cluster directory path is too long for the driver's socket ({socket}); "
            "choose a shorter --dir"
        )
    binary = str(build_cached(SOURCE, "dra-test-driver"))
    argv = [
        binary,
        f"--driver-name={DRIVER}",
        f"--node-name={node.name}",
        f"--kubeconfig={node.kubelet_kubeconfig}",
        f"--registry-dir={registry}",
        f"--plugin-dir={Path(node.dir) / 'dra'}",
        f"--devices={devices}",
        "-v=2",
    ]
    name = node.dra_driver_name
    log = cluster.log_dir / f"{name}.log"
    pid = process.start(name, argv, cluster.log_dir)
    realnode.track(cluster, name, pid, binary)

    def registered() -> bool:
        text = log.read_text(errors="replace") if log.is_file() else ""
        if REFUSED in text:
            raise ClusterError(f"{process.last_log_line(cluster.log_dir, name)} (log: {log})")
        return REGISTERED in text

    realnode.wait_started(name, registered, pid, binary, log, 60.0)
    published = _wait_for_slice(cluster, node.name, devices, 60.0)
    return DriverOnNode(node.name, DRIVER, published, log)


def _wait_for_slice(
    cluster: LocalCluster, node: str, devices: int, timeout: float
) -> tuple[str, ...]:
    """The names of the devices the driver published for `node`, once all are there."""
    admin = cluster.admin()
    query = f"{SLICES}?fieldSelector=spec.driver={DRIVER},spec.nodeName={node}"
    deadline = time.monotonic() + timeout
    names: list[str] = []
    while time.monotonic() < deadline:
        status, body = admin.request("GET", query)
        if status == 200:
            names = [d["name"] for s in body["items"] for d in s["spec"].get("devices") or []]
            if len(names) == devices:
                return tuple(names)
        time.sleep(0.2)
    raise ClusterError(f"no ResourceSlice of {devices} devices for {node} after {timeout:.0f}s")


def stop(cluster: LocalCluster, node_name: str | None = None) -> None:
    """Stop the driver of `node_name` (SIGTERM: it closes its sockets and the kubelet
    forgets it). Its ResourceSlice stays until the kubelet removes it or the node goes."""
    st = cluster.state
    name = _node(cluster, node_name).dra_driver_name
    if st is not None and (pid := st.pids.get(name)):
        process.stop(pid, st.binaries.get(name), timeout=20.0)
