"""Real nodes for the local cluster: containerd + runc + a kubelet, on loopback.

`cluster up --real-node` adds, beside the kwok nodes, one (or `--real-nodes N`) node that
really runs containers, so the Helm chart's pod can be started, probed and stopped by a
kubelet, as in kind, without Docker. Each real node has, under <cluster>/nodes/<name>/:
- its own containerd (Debian's package; root, state, socket and runc state all in that
  folder), with the CRI's `restrict_oom_score_adj = true` (root here lacks
  CAP_SYS_RESOURCE, and without it every sandbox fails with "can't get final child's PID
  from pipe") and a CNI configuration with the loopback plugin only: the runtime reports
  NetworkReady, pods use host networking (there is no pod network);
- the pause image built locally (kas_dev/cluster/pause_image.py), imported with ctr;
- a kubelet v1.37.2 (cgroupfs driver under a cgroup root of its own, failCgroupV1 and
  failSwapOn off, serving on 127.0.0.1). The kubelet refuses a loopback --node-ip, so the
  node is named after a host name that resolves to 127.0.0.1 (the machine's own name, then
  `localhost`) and the API server reaches it through that Hostname address.
The kubelet runs with a PATH without iptables, so it cannot add its firewall chains to the
machine; what it does change (sysctls, cgroups, mounts, /var/log/containers) is recorded
before and undone by teardown (kas_dev/cluster/host_footprint.py).

Upstream kube-scheduler runs as the cluster's default scheduler (as in kind), so the
chart's own pods are placed by it; pods naming our scheduler wait for the chart.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kas_dev.cluster import host_footprint, process
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.pause_image import pause_archive
from kas_dev.cluster.ports import LOOPBACK, free_port, port_in_use
from kas_dev.cluster.realnode_config import (
    LOOPBACK_CNI,
    RealNode,
    containerd_config,
    issue_node_cert,
    kubelet_config,
    node_kubeconfig,
)

if TYPE_CHECKING:
    from kas_dev.cluster.local import LocalCluster

STATE_FILE = "real-nodes.json"
NODES_DIR = "nodes"
REAL_NODE_LABEL = "kas.local/real-node"
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
# the tools the kubelet may exec (mount utilities for volumes); iptables is left out on
# purpose: without it the kubelet skips its KUBE-FIREWALL chains and leaves the
# machine's firewall untouched
KUBELET_TOOLS = ("mount", "umount", "losetup", "nsenter", "du", "find", "nice", "ionice")
# unix socket paths are limited to 108 bytes
MAX_SOCKET_PATH = 100
# API server flags of a real-node cluster. ServiceAccount admission on (only the
# node-taint one stays off): a pod's token is then projected into it, as on any real
# cluster. The apiserver reaches kubelets by their Hostname address only (it resolves to
# loopback; InternalIP is the machine's other address, which nothing may use).
DISABLED_ADMISSION = "TaintNodesByCondition"
APISERVER_ARGS = ("--kubelet-preferred-address-types=Hostname",)


def loopback_names(count: int) -> list[str]:
    """Node names that resolve to a loopback address on this machine."""
    names = []
    for candidate in (socket.gethostname().split(".")[0].lower(), "localhost"):
        if candidate in names:
            continue
        try:
            addrs = {ai[4][0] for ai in socket.getaddrinfo(candidate, None, socket.AF_INET)}
        except OSError:
            continue
        if addrs and all(ipaddress.ip_address(a).is_loopback for a in addrs):
            names.append(candidate)
    if len(names) < count:
        raise ClusterError(
            f"{count} real node(s) need {count} host names resolving to 127.0.0.1 (the API "
            f"server reaches a kubelet through its node name); found {names or 'none'}: add "
            "the machine's hostname to /etc/hosts, or ask for fewer real nodes"
        )
    return names[:count]


def _which(name: str, hint: str) -> str:
    found = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None
    )
    if not found:
        raise ClusterError(f"{name} not found ({hint})")
    return found


def _cni_bin_dir() -> str:
    for d in CNI_BIN_DIRS:
        if os.access(os.path.join(d, "loopback"), os.X_OK):
            return d
    raise ClusterError(
        "the CNI loopback plugin is missing (run hack/install-system-packages.sh: "
        "containernetworking-plugins)"
    )


# ----- state ---------------------------------------------------------------------------
def _load(cluster_dir: Path) -> list[RealNode]:
    path = cluster_dir / STATE_FILE
    if not path.is_file():
        return []
    return [RealNode(**n) for n in json.loads(path.read_text())]


def _save(cluster_dir: Path, nodes: list[RealNode]) -> None:
    (cluster_dir / STATE_FILE).write_text(json.dumps([asdict(n) for n in nodes], indent=2))


def nodes_of(cluster_dir: Path) -> list[RealNode]:
    return _load(cluster_dir)


def is_real_node_cluster(cluster_dir: Path) -> bool:
    return (cluster_dir / STATE_FILE).is_file()


def track(cluster: LocalCluster, name: str, pid: int, binary: str) -> None:
    """Record a process started for this cluster, so that `down` stops it."""
    st = cluster.state
    assert st is not None
    st.pids[name] = pid
    st.binaries[name] = binary
    st.started.append((name, pid))
    cluster._save_state()


def wait_started(what: str, ready: Any, pid: int, binary: str, log: Path, timeout: float) -> None:
    """Until `ready()`; fails as soon as the process is gone, naming its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.is_running(pid, binary):
            raise ClusterError(f"{what} exited during start (log: {log})")
        if ready():
            return
        time.sleep(0.2)
    raise ClusterError(f"{what} not ready after {timeout:.0f}s (log: {log})")


# ----- up ------------------------------------------------------------------------------
def start(cluster: LocalCluster, count: int, progress: Any) -> list[RealNode]:
    """Start upstream kube-scheduler and `count` real nodes; wait until they are Ready."""
    assert cluster.state is not None
    bin_dir = Path(cluster.state.bin_dir)
    kubelet = bin_dir / "kubelet"
    if not os.access(kubelet, os.X_OK):
        raise ClusterError(
            f"kubelet not found in {bin_dir} (run 'hack/install-binaries.sh realnode')"
        )
    containerd = _which("containerd", "run hack/install-system-packages.sh")
    runc = _which("runc", "run hack/install-system-packages.sh")
    ctr = _which("ctr", "run hack/install-system-packages.sh")
    cni_bin = _cni_bin_dir()
    if os.geteuid() != 0:
        raise ClusterError("a real node needs root (containerd, cgroups and mounts)")

    _start_kube_scheduler(cluster, bin_dir)
    progress("building the pause image (cached after the first time)")
    archive = pause_archive()

    key = hashlib.sha256(str(cluster.dir).encode()).hexdigest()[:8]
    nodes = []
    for name in loopback_names(count):
        d = cluster.dir / NODES_DIR / name
        sock = str(d / "containerd.sock")
        if len(sock) > MAX_SOCKET_PATH:
            raise ClusterError(
                f"the cluster directory path is too long for a unix socket ({sock}); "
                "choose a shorter --dir"
            )
        nodes.append(
            RealNode(
                name=name,
                dir=str(d),
                socket=sock,
                cgroup_root=f"/kas-{key}-{name}",
                kubelet_port=free_port(),
                healthz_port=free_port(),
            )
        )
    _save(cluster.dir, nodes)
    host_footprint.record(cluster.dir, [n.cgroup_root for n in nodes])
    for node in nodes:
        progress(f"starting containerd and the kubelet of real node {node.name}")
        _start_containerd(cluster, node, containerd, runc, ctr, cni_bin, archive)
        _start_kubelet(cluster, node, kubelet)
    progress("waiting for the real node(s) to be Ready")
    cluster.wait_nodes_ready({n.name for n in nodes}, timeout=180.0)
    return nodes


def _start_kube_scheduler(cluster: LocalCluster, bin_dir: Path) -> None:
    assert cluster.state is not None
    binary = bin_dir / "kube-scheduler"
    if not os.access(binary, os.X_OK):
        raise ClusterError(f"kube-scheduler not found in {bin_dir} (run hack/install-binaries.sh)")
    port = free_port()
    cluster.state.ports["kube-scheduler"] = port
    argv = [
        str(binary),
        f"--kubeconfig={cluster.kubeconfig}",
        f"--authentication-kubeconfig={cluster.kubeconfig}",
        f"--authorization-kubeconfig={cluster.kubeconfig}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        "--leader-elect=false",
        "-v=1",
        *cluster.feature_gate_args(),
    ]
    pid = process.start("kube-scheduler", argv, cluster.log_dir)
    track(cluster, "kube-scheduler", pid, str(binary))
    wait_started(
        "kube-scheduler",
        lambda: port_in_use(port),
        pid,
        str(binary),
        cluster.log_dir / "kube-scheduler.log",
        90.0,
    )


def _start_containerd(
    cluster: LocalCluster,
    node: RealNode,
    containerd: str,
    runc: str,
    ctr: str,
    cni_bin: str,
    archive: Path,
) -> None:
    d = Path(node.dir)
    for sub in ("containerd/root", "containerd/state", "containerd/opt", "cni", "runc"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "cni" / "10-loopback.conflist").write_text(json.dumps(LOOPBACK_CNI, indent=2))
    cfg = d / "containerd.toml"
    cfg.write_text(containerd_config(node, cni_bin, runc))
    log = cluster.log_dir / f"{node.containerd_name}.log"
    pid = process.start(node.containerd_name, [containerd, "--config", str(cfg)], cluster.log_dir)
    track(cluster, node.containerd_name, pid, containerd)

    def serving() -> bool:
        if not os.path.exists(node.socket):
            return False
        return _ctr(ctr, node, "version", check=False).returncode == 0

    wait_started(node.containerd_name, serving, pid, containerd, log, 60.0)
    _ctr(ctr, node, "-n", "k8s.io", "images", "import", str(archive))


def _ctr(
    ctr: str, node: RealNode, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [ctr, "--address", node.socket, *args], capture_output=True, text=True, timeout=300
    )
    if check and proc.returncode != 0:
        raise ClusterError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()[:500]}")
    return proc


def _tool_path(d: Path) -> str:
    tools = d / "path"
    tools.mkdir(parents=True, exist_ok=True)
    for t in KUBELET_TOOLS:
        found = shutil.which(t)
        link = tools / t
        if found and not link.exists():
            link.symlink_to(found)
    return str(tools)


def _start_kubelet(cluster: LocalCluster, node: RealNode, kubelet: Path) -> None:
    d = Path(node.dir)
    kd = node.kubelet_dir
    (kd / "pki").mkdir(parents=True, exist_ok=True)
    (d / "pod-logs").mkdir(parents=True, exist_ok=True)
    cert, key = kd / "pki" / "node.crt", kd / "pki" / "node.key"
    issue_node_cert(cluster.pki_dir, node.name, cert, key)
    kubeconfig = node.kubelet_kubeconfig
    kubeconfig.write_text(node_kubeconfig(cluster.api_url, cluster.ca_file, cert, key))
    kubeconfig.chmod(0o600)
    host_footprint.create_cgroup_root(node.cgroup_root)
    log = cluster.log_dir / f"{node.kubelet_name}.log"
    for attempt in range(3):
        cfg = kd / "config.yaml"
        cfg.write_text(yaml.safe_dump(kubelet_config(node, cluster.ca_file)))
        argv = [
            str(kubelet),
            f"--config={cfg}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={node.kubelet_root_dir}",
            f"--cert-dir={kd / 'pki'}",
            f"--hostname-override={node.name}",
            f"--node-labels={REAL_NODE_LABEL}=true",
            "-v=1",
        ]
        pid = process.start(node.kubelet_name, argv, cluster.log_dir, env={"PATH": _tool_path(d)})
        track(cluster, node.kubelet_name, pid, str(kubelet))
        try:
            wait_started(node.kubelet_name, lambda: _healthy(node), pid, str(kubelet), log, 120.0)
            return
        except ClusterError as exc:
            # free_port() releases the port before the kubelet binds it: another cluster
            # starting at the same moment may take it. New ports, another try.
            if "exited during start" not in str(exc) or attempt == 2:
                raise ClusterError(
                    f"{exc}: {process.last_log_line(cluster.log_dir, node.kubelet_name)}"
                ) from exc
            node.kubelet_port, node.healthz_port = free_port(), free_port()
            _save(cluster.dir, [node if n.name == node.name else n for n in _load(cluster.dir)])


def _healthy(node: RealNode) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(
            f"http://{LOOPBACK}:{node.healthz_port}/healthz", timeout=2
        ) as r:
            return bool(r.status == 200)
    except OSError:
        return False


# ----- images --------------------------------------------------------------------------
def import_image(cluster_dir: Path, archive: Path) -> list[str]:
    """Import an image archive (docker-archive or OCI) into every real node's containerd."""
    nodes = _load(cluster_dir.resolve())
    if not nodes:
        raise ClusterError(
            f"no real node in {cluster_dir} (start it with 'cluster up --real-node')"
        )
    ctr = _which("ctr", "run hack/install-system-packages.sh")
    for node in nodes:
        _ctr(ctr, node, "-n", "k8s.io", "images", "import", str(archive))
    return [n.name for n in nodes]


# ----- down ----------------------------------------------------------------------------
def teardown(cluster: LocalCluster) -> list[str]:
    """Stop the real nodes and undo what they changed on the machine. Returns problems
    that could not be fixed (reported, never raised: `down` must go on)."""
    st = cluster.state
    nodes = _load(cluster.dir)
    problems: list[str] = []
    if st is None:
        return problems

    def stop(name: str) -> None:
        pid = st.pids.get(name)
        if pid:
            process.stop(pid, st.binaries.get(name), timeout=20.0)

    for node in nodes:
        stop(node.kubelet_name)
        # a DRA driver beside it (kas_dev/cluster/dra_driver.py), once nothing calls it
        stop(node.dra_driver_name)
    for node in nodes:
        # the pods' processes (pause and containers), then the shims serving our socket
        host_footprint.kill_cgroup_processes(node.cgroup_root)
        _kill_shims(node.socket)
        stop(node.containerd_name)
        # containerd may have started a shim for cleanup while it was stopping
        _kill_shims(node.socket)
    stop("kube-scheduler")
    stop("prometheus")
    left = host_footprint.unmount_under(cluster.dir / NODES_DIR)
    if left:
        problems.append(f"still mounted: {', '.join(left[:5])}")
    for node in nodes:
        problems += [f"cgroup busy: {c}" for c in host_footprint.remove_cgroups(node.cgroup_root)]
    if nodes or (cluster.dir / host_footprint.FOOTPRINT_FILE).is_file():
        problems += host_footprint.restore(cluster.dir, (str(cluster.dir / NODES_DIR),))
    return problems


def _kill_shims(sock: str) -> None:
    """containerd's shims outlive containerd by design; ours name our socket."""
    marker = sock.encode()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"containerd-shim" in cmd.split(b"\0", 1)[0] and marker in cmd:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    deadline = time.monotonic() + 10.0
    while killed and time.monotonic() < deadline:
        killed = [pid for pid in killed if process.is_running(pid)]
        time.sleep(0.05)


def remove_files(cluster_dir: Path) -> None:
    """After teardown: the nodes' folders (container filesystems, logs, state)."""
    if host_footprint.mounts_under(cluster_dir / NODES_DIR):
        raise ClusterError(f"cannot remove {cluster_dir / NODES_DIR}: something is still mounted")
    shutil.rmtree(cluster_dir / NODES_DIR, ignore_errors=True)
    # Prometheus' configuration and data (kas_dev/cluster/prometheus.py)
    shutil.rmtree(cluster_dir / "prometheus", ignore_errors=True)
    for f in (STATE_FILE, host_footprint.FOOTPRINT_FILE):
        (cluster_dir / f).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kas_dev.cluster.realnode")
    sub = ap.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import-image", help="import an image archive into the real nodes")
    imp.add_argument("--dir", default=".cluster", help="the cluster directory")
    imp.add_argument("archive", type=Path)
    sub.add_parser("names", help="print the node names a real node would get here")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "import-image":
            names = import_image(Path(args.dir), args.archive)
            print(f"imported {args.archive} into {', '.join(names)}")
        else:
            print(" ".join(loopback_names(1)))
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
