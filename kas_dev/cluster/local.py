"""A real local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager
and kwok, on free loopback ports, in one directory.

The directory holds everything of one cluster: certificates, etcd data, logs, the admin
kubeconfig and `cluster.json` (ports and pids). Several clusters can run at once, each in
its own directory. `down` stops exactly the pids it started (checked against the binary
path, so a reused pid is never hit) and removes nothing but what `up` made.

Why these flags:
- `--authorization-mode=Node,RBAC`: RBAC is enforced, so the chart's roles are tested
  for real.
- `--disable-admission-plugins=ServiceAccount,TaintNodesByCondition`: pods created right
  after their namespace would otherwise race the controller that makes the `default`
  ServiceAccount (upstream's scheduler_perf does the same; TokenRequest still works); and
  new nodes would get a `node.kubernetes.io/not-ready` taint that only the (disabled)
  node-lifecycle controller removes.
- kube-controller-manager without the node-lifecycle and taint-eviction controllers: kwok
  nodes keep no leases fresh, and we do not want nodes tainted under the tests' feet. Its
  disruption controller computes PodDisruptionBudget status, which preemption needs.
- etcd with `--unsafe-no-fsync`: tests and benchmarks, never data anyone keeps.
- kwok `--disregard-status-with-label-selector`: pods labelled `KWOK_IGNORED_LABEL` get
  no status from kwok (bound pods created by the thousand, which kwok would take an hour
  to mark Running); every other pod is played as before.
- `large=True` (`cluster up --large`): settings for a cluster of a large cluster's worth
  of pods (150,000 at 5000 nodes, issue 26), chosen by the pinned benchmark when it fills
  the cluster with 50,000 pods or more (`LARGE_APISERVER_ARGS`, `LARGE_ENV`;
  docs/local-control-plane.md says each one and why).
- `generic_workload=True` (`cluster up --generic-workload`): the Workload and PodGroup API
  of v1.37.2 (gangs). Both are behind the GenericWorkload gate (beta, off by default:
  pkg/features/kube_features.go) and served at scheduling.k8s.io/v1beta1, a beta version
  disabled by default (pkg/controlplane/instance.go), so kube-apiserver gets the gate and
  the runtime-config; kube-controller-manager gets the gate for its
  podgroup-protection-controller (without it the finalizer the PodGroupProtection
  admission plugin puts on every PodGroup is never removed, and no PodGroup can be
  deleted); an upstream kube-scheduler started for this cluster gets `feature_gate_args`.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kas_dev.cluster import process, realnode
from kas_dev.cluster.api import AdminClient
from kas_dev.cluster.binaries import Binaries, find_binaries
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.nodes import NodeGroup, default_mix, node_manifests
from kas_dev.cluster.pki import FRONT_PROXY_CLIENT_CN, Pki, make_pki, pki_paths
from kas_dev.cluster.ports import LOOPBACK, free_port, port_in_use
from kas_dev.cluster.scheduler_https import ClientCert, register_admin

log = logging.getLogger(__name__)

STATE_FILE = "cluster.json"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")
SERVICE_CIDR = "10.0.0.0/24"
# Pod IPs are only strings kwok writes into pod status; nothing is ever sent to them.
POD_CIDR = "10.64.0.0/10"
# docs/plans/gangs.md section 1: what the Workload/PodGroup API needs in each component
GENERIC_WORKLOAD_GATES = ("GenericWorkload=true",)
GENERIC_WORKLOAD_RUNTIME_CONFIG = ("scheduling.k8s.io/v1beta1=true",)
KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)

# `large` mode: a LIST of every pod of a 150,000-pod cluster (about 1 GB of JSON) must not
# be cut by the default one-minute limit on a non-watch request; pods that wait for
# their seat behind such LISTs must not time out either
LARGE_APISERVER_ARGS = ("--request-timeout=5m",)
# a soft heap limit for kube-apiserver (Go's GC works harder as the heap nears it): its
# watch cache of 150,000 pods and the LIST responses it builds would otherwise let the
# heap grow to twice what is live (GOGC=100) on a machine the schedulers share. 6GiB was
# too low: at 150,000 pods what is live passed it (RSS 6.5-7.7 GiB) and the collector
# ran without pause, 84% of the API server's core with nothing to serve, and every LIST
# crawled (docs/local-control-plane.md). 10GiB was not enough either (RSS 9.9 GiB after
# the fill, 52% of a core idle): what is live at 150,000 such pods is about 10 GiB. 13GiB
# leaves the collector room above that and still fits a 24 GiB machine beside
# etcd, the controller manager and one contender (not two contenders at once)
LARGE_ENV: dict[str, dict[str, str]] = {"kube-apiserver": {"GOMEMLIMIT": "13GiB"}}
LARGE_POD_THRESHOLD = 50_000
"""From how many pods the pinned benchmark brings its cluster up in `large` mode."""
# pods with this label are left alone by kwok: no stage is played for them, their status
# is whatever their creator writes (the pinned benchmark's 150,000 init pods: kwok marks
# pods Running a few dozen a second on a loaded machine, an hour for 150,000)
KWOK_IGNORED_LABEL = ("kas-dev.local/kwok", "ignore")

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass
class ClusterState:
    dir: str
    bin_dir: str
    ports: dict[str, int]
    pids: dict[str, int] = field(default_factory=dict)
    binaries: dict[str, str] = field(default_factory=dict)
    version: str = ""
    # every process ever started for this cluster (retries and restarts included), so
    # down() leaves none behind even if one was replaced in `pids`
    started: list[tuple[str, int]] = field(default_factory=list)
    # feature gates ("Name=true") given to kube-apiserver, kube-controller-manager and any
    # kube-scheduler started for this cluster; runtime-config entries for kube-apiserver.
    # Kept in the state so a component restarted later (fault tests) gets them again.
    feature_gates: list[str] = field(default_factory=list)
    runtime_config: list[str] = field(default_factory=list)
    # `large` mode (LARGE_APISERVER_ARGS, LARGE_ENV), kept for components restarted later
    large: bool = False

    @property
    def api_url(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['kube-apiserver']}"


class LocalCluster:
    """One local cluster rooted at `directory`."""

    def __init__(self, directory: Path | str, bin_dir: Path | None = None) -> None:
        self.dir = Path(directory).resolve()
        self._bin_dir = bin_dir
        self._extra_apiserver_args: list[str] = []
        self._fixed_apiserver_port = False
        self.state: ClusterState | None = None
        self._load_state()
        self._real_node_mode = realnode.is_real_node_cluster(self.dir)

    # ----- paths -----------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def pki_dir(self) -> Path:
        return self.dir / "pki"

    @property
    def log_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def ca_file(self) -> Path:
        return self.pki_dir / "ca.crt"

    @property
    def api_url(self) -> str:
        if self.state is None:
            raise ClusterError(f"no cluster in {self.dir}")
        return self.state.api_url

    def feature_gate_args(self) -> list[str]:
        """`--feature-gates=...` for a control-plane component of this cluster (kube-apiserver,
        kube-controller-manager, an upstream kube-scheduler), or nothing."""
        gates = self.state.feature_gates if self.state is not None else []
        return [f"--feature-gates={','.join(gates)}"] if gates else []

    def _pki(self) -> Pki:
        return pki_paths(self.pki_dir)

    def admin_client_cert(self) -> ClientCert:
        """The admin identity (system:masters) as a client certificate: what the
        harness presents to a scheduler's HTTPS port (scheduler_https.scheduler_get)."""
        p = self._pki()
        return ClientCert(p.admin_cert, p.admin_key)

    def admin(self, timeout: float = 10.0) -> AdminClient:
        p = self._pki()
        return AdminClient(self.api_url, p.ca_cert, p.admin_cert, p.admin_key, timeout)

    # ----- state -----------------------------------------------------------------
    def _load_state(self) -> None:
        path = self.dir / STATE_FILE
        if path.is_file():
            try:
                self.state = ClusterState(**json.loads(path.read_text()))
            except (ValueError, TypeError) as exc:
                raise ClusterError(f"{path} is not a cluster state file ({exc})") from exc

    def _save_state(self) -> None:
        assert self.state is not None
        (self.dir / STATE_FILE).write_text(json.dumps(asdict(self.state), indent=2))

    def running(self) -> dict[str, bool]:
        if self.state is None:
            return {}
        return {
            name: process.is_running(pid, self.state.binaries.get(name))
            for name, pid in self.state.pids.items()
        }

    # ----- up --------------------------------------------------------------------
    def up(
        self,
        nodes: Iterable[NodeGroup] | int = 0,
        *,
        apiserver_port: int | None = None,
        progress: Progress = _quiet,
        extra_apiserver_args: Iterable[str] = (),
        real_nodes: int = 0,
        generic_workload: bool = False,
        large: bool = False,
    ) -> None:
        self._check_directory()
        bins = find_binaries(self._bin_dir)
        if apiserver_port is not None and port_in_use(apiserver_port):
            raise ClusterError(f"port {apiserver_port} on {LOOPBACK} is already in use")
        t0 = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        progress("generating the cluster CA, serving and admin certificates")
        make_pki(self.pki_dir)
        ports = {
            "etcd": free_port(),
            "etcd-peer": free_port(),
            "kube-apiserver": apiserver_port or free_port(),
            "kube-controller-manager": free_port(),
            "kwok": free_port(),
        }
        self.state = ClusterState(
            dir=str(self.dir),
            bin_dir=str(bins.bin_dir),
            ports=ports,
            binaries={n: str(bins.path(n)) for n in COMPONENTS},
            feature_gates=list(GENERIC_WORKLOAD_GATES) if generic_workload else [],
            runtime_config=list(GENERIC_WORKLOAD_RUNTIME_CONFIG) if generic_workload else [],
            large=large,
        )
        self._extra_apiserver_args = list(extra_apiserver_args)
        self._real_node_mode = real_nodes > 0
        if real_nodes:
            # kas_dev/cluster/realnode.py: ServiceAccount admission on, kubelets by name
            p = self._pki()
            self._extra_apiserver_args += [
                *realnode.APISERVER_ARGS,
                f"--kubelet-client-certificate={p.admin_cert}",
                f"--kubelet-client-key={p.admin_key}",
            ]
        self._fixed_apiserver_port = apiserver_port is not None
        self._save_state()
        try:
            for name in COMPONENTS:
                progress(f"starting {name}")
                self.start_component(name, bins)
                self._save_state()
            if real_nodes:
                realnode.start(self, real_nodes, progress)
            groups = default_mix(nodes) if isinstance(nodes, int) else list(nodes)
            manifests = node_manifests(groups) if (not isinstance(nodes, int) or nodes) else []
            if manifests:
                progress(f"creating {len(manifests)} kwok nodes")
                self.create_nodes(manifests)
                progress("waiting for every node to be Ready")
                self.wait_nodes_ready({m["metadata"]["name"] for m in manifests})
        except BaseException:
            self.down()
            raise
        self.state.version = self._server_version()
        self._save_state()
        progress(f"cluster up in {time.monotonic() - t0:.1f}s: {self.state.api_url}")

    def _check_directory(self) -> None:
        if self.state is not None:
            alive = [n for n, ok in self.running().items() if ok]
            if alive:
                raise ClusterError(
                    f"a cluster is already running in {self.dir} ({', '.join(alive)}); "
                    f"run 'kube-async-scheduler cluster down --dir {self.dir}' first"
                )
            # a stale cluster from a crash: start fresh in the same directory
            self._remove_contents()
            self.state = None
            return
        if self.dir.exists() and not self.dir.is_dir():
            raise ClusterError(f"{self.dir} exists and is not a directory")
        if self.dir.is_dir() and any(self.dir.iterdir()):
            raise ClusterError(
                f"{self.dir} is not empty and holds no cluster; choose another --dir"
            )
        if self.dir.is_dir() and not os.access(self.dir, os.W_OK):
            raise ClusterError(f"{self.dir} is not writable")

    def _remove_contents(self) -> None:
        for name in (STATE_FILE, "kubeconfig", "kwok-stages.yaml", "kwok-kubeconfig"):
            (self.dir / name).unlink(missing_ok=True)
        for sub in ("pki", "etcd", "logs"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        realnode.remove_files(self.dir)

    # ----- components --------------------------------------------------------------
    def _argv(self, name: str, bins: Binaries) -> list[str]:
        assert self.state is not None
        p = self._pki()
        ports = self.state.ports
        etcd_url = f"http://{LOOPBACK}:{ports['etcd']}"
        if name == "etcd":
            peer = f"http://{LOOPBACK}:{ports['etcd-peer']}"
            return [
                str(bins.path("etcd")),
                "--name=local",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=local={peer}",
                "--unsafe-no-fsync",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ]
        if name == "kube-apiserver":
            issuer = "https://kubernetes.default.svc.cluster.local"
            return [
                str(bins.path("kube-apiserver")),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                f"--secure-port={ports['kube-apiserver']}",
                f"--tls-cert-file={p.server_cert}",
                f"--tls-private-key-file={p.server_key}",
                f"--client-ca-file={p.ca_cert}",
                # the front proxy: what the aggregator presents when it forwards a user
                # to an aggregated API (the scheduler's explain API), published with the
                # client CA in kube-system/extension-apiserver-authentication
                f"--requestheader-client-ca-file={p.front_proxy_ca_cert}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT_CN}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={p.front_proxy_client_cert}",
                f"--proxy-client-key-file={p.front_proxy_client_key}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-issuer={issuer}",
                f"--api-audiences={issuer}",
                f"--service-account-key-file={p.sa_pub}",
                f"--service-account-signing-key-file={p.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--disable-admission-plugins="
                + (
                    realnode.DISABLED_ADMISSION
                    if self._real_node_mode
                    else "ServiceAccount,TaintNodesByCondition"
                ),
                "--allow-privileged=true",
                "--profiling=false",
                # the default reconciler refuses a loopback advertise address
                "--endpoint-reconciler-type=none",
                "--max-requests-inflight=1000",
                "--max-mutating-requests-inflight=500",
                f"--cert-dir={self.pki_dir / 'apiserver-generated'}",
                *self.feature_gate_args(),
                *(
                    [f"--runtime-config={','.join(self.state.runtime_config)}"]
                    if self.state.runtime_config
                    else []
                ),
                *(LARGE_APISERVER_ARGS if self.state.large else ()),
                *self._extra_apiserver_args,
            ]
        if name == "kube-controller-manager":
            return [
                str(bins.path("kube-controller-manager")),
                f"--kubeconfig={self.kubeconfig}",
                f"--bind-address={LOOPBACK}",
                f"--secure-port={ports['kube-controller-manager']}",
                "--leader-elect=false",
                "--controllers=*,-node-lifecycle-controller,-taint-eviction-controller,"
                "-node-ipam-controller",
                f"--service-account-private-key-file={p.sa_key}",
                f"--root-ca-file={p.ca_cert}",
                "--use-service-account-credentials=false",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                *self.feature_gate_args(),
            ]
        if name == "kwok":
            return [
                str(bins.path("kwok")),
                f"--kubeconfig={self.dir / 'kwok-kubeconfig'}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--config={self._kwok_config(bins)}",
                f"--cidr={POD_CIDR}",
                "--node-ip=127.0.0.1",
                f"--server-address={LOOPBACK}:{ports['kwok']}",
                # deprecated in favour of stages, still honoured by v0.8.0
                "--disregard-status-with-label-selector=" + "=".join(KWOK_IGNORED_LABEL),
            ]
        raise ClusterError(f"unknown component {name!r}")

    def _kwok_config(self, bins: Binaries) -> Path:
        path = self.dir / "kwok-stages.yaml"
        docs = []
        for rel in KWOK_STAGES:
            src = bins.kwok_stages / rel
            try:
                docs.append(src.read_text().strip())
            except OSError as exc:
                raise ClusterError(
                    f"kwok stage {src} is missing (run hack/install-binaries.sh)"
                ) from exc
        path.write_text("\n---\n".join(docs) + "\n")
        return path

    def start_component(self, name: str, bins: Binaries | None = None) -> None:
        assert self.state is not None
        bins = bins or find_binaries(Path(self.state.bin_dir))
        for attempt in range(4):
            env = LARGE_ENV.get(name) if self.state.large else None
            pid = process.start(name, self._argv(name, bins), self.log_dir, env)
            self.state.pids[name] = pid
            self.state.started.append((name, pid))
            self._save_state()
            try:
                # etcd now and then stalls before serving when several clusters start at
                # once (a single-member election that never completes): a fresh start
                # with a fresh data dir fixes it, so it gets a short deadline
                self._wait_component(name, pid, timeout=20.0 if name == "etcd" else 90.0)
                break
            except ClusterError as exc:
                stalled = name == "etcd" and "did not become ready" in str(exc)
                if stalled and attempt < 3:
                    process.stop(pid, self.state.binaries.get(name), sig=signal.SIGKILL)
                    shutil.rmtree(self.dir / "etcd", ignore_errors=True)
                    for port_name in self._ports_of(name):
                        self.state.ports[port_name] = free_port()
                    log.info("etcd stalled during start; retrying with a fresh data dir")
                    continue
                # free_port() closes the socket before the component binds it, so another
                # cluster starting at the same moment can take it: pick new ports, retry
                # (etcd at --log-level=warn may die of it without a word, so any early
                # exit on a port we chose counts; a fixed port is the user's to fix)
                fixed = name == "kube-apiserver" and self._fixed_apiserver_port
                early_exit = "exited during start" in str(exc)
                if not early_exit or fixed or attempt == 3:
                    raise
                # never leave a second copy on the same data dir behind
                process.stop(pid, self.state.binaries.get(name), sig=signal.SIGKILL)
                for port_name in self._ports_of(name):
                    self.state.ports[port_name] = free_port()
                log.info("%s exited during start (%s); retrying on new ports", name, exc)
        if name == "kube-apiserver":
            self._write_kubeconfig()

    @staticmethod
    def _ports_of(name: str) -> tuple[str, ...]:
        return ("etcd", "etcd-peer") if name == "etcd" else (name,)

    def stop_component(self, name: str, sig: int = signal.SIGTERM) -> None:
        assert self.state is not None
        pid = self.state.pids.get(name)
        if pid:
            process.stop(pid, self.state.binaries.get(name), sig=sig)

    def _wait_component(self, name: str, pid: int, timeout: float = 90.0) -> None:
        assert self.state is not None
        deadline = time.monotonic() + timeout
        binary = self.state.binaries.get(name)
        while time.monotonic() < deadline:
            if not process.is_running(pid, binary):
                raise ClusterError(
                    f"{name} exited during start: {process.last_log_line(self.log_dir, name)} "
                    f"(log: {self.log_dir / (name + '.log')})"
                )
            if self._component_ready(name):
                return
            time.sleep(0.1)
        raise ClusterError(
            f"{name} did not become ready in {timeout:.0f}s (log: {self.log_dir / (name + '.log')})"
        )

    def _component_ready(self, name: str) -> bool:
        assert self.state is not None
        if name == "etcd":
            import urllib.request

            try:
                with urllib.request.urlopen(
                    f"http://{LOOPBACK}:{self.state.ports['etcd']}/health", timeout=2
                ) as r:
                    return bool(json.loads(r.read()).get("health") == "true")
            except (OSError, ValueError):
                return False
        if name == "kube-apiserver":
            try:
                status, body = self.admin(timeout=3).get_text("/readyz")
            except OSError:
                return False
            return status == 200 and body.strip() == "ok"
        # the controller manager and kwok count as ready once they serve on their port
        # (each serves only after it has loaded its configuration and reached the API)
        return port_in_use(self.state.ports[name])

    def _write_kubeconfig(self) -> None:
        p = self._pki()
        register_admin(self.api_url, ClientCert(p.admin_cert, p.admin_key), p.ca_cert)
        self.write_kubeconfig(self.kubeconfig, "admin", p.admin_cert, p.admin_key)
        self.write_kubeconfig(self.dir / "kwok-kubeconfig", "kwok", p.kwok_cert, p.kwok_key)

    def write_kubeconfig(self, path: Path, user: str, cert: Path, key: Path) -> None:
        """A kubeconfig for this cluster authenticating as `user` with a client
        certificate (the admin's, kwok's, or one the tests issue)."""
        p = self._pki()

        def b64(f: Path) -> str:
            return base64.b64encode(f.read_bytes()).decode()

        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.api_url,
                        "certificate-authority-data": b64(p.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": b64(cert),
                        "client-key-data": b64(key),
                    },
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local",
        }
        path.write_text(yaml.safe_dump(cfg))
        path.chmod(0o600)

    def _server_version(self) -> str:
        status, body = self.admin().request("GET", "/version")
        return str(body.get("gitVersion", "")) if status == 200 and isinstance(body, dict) else ""

    # ----- nodes -----------------------------------------------------------------
    def create_nodes(self, manifests: list[dict[str, Any]], workers: int = 16) -> None:
        admin = self.admin()

        def create(node: dict[str, Any]) -> None:
            name = node["metadata"]["name"]
            status, body = admin.request("POST", "/api/v1/nodes", node)
            if status == 409:
                raise ClusterError(f"node {name} already exists")
            if status not in (200, 201):
                raise ClusterError(f"creating node {name}: HTTP {status}: {_message(body)}")
            # The API server keeps status on create, but kwok may initialise the node in
            # between; writing status again makes capacity exactly what the mix says.
            patch = {"status": node["status"]}
            status, body = admin.request(
                "PATCH", f"/api/v1/nodes/{name}/status", patch, "application/merge-patch+json"
            )
            if status != 200:
                raise ClusterError(
                    f"setting status of node {name}: HTTP {status}: {_message(body)}"
                )

        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for fut in [pool.submit(create, m) for m in manifests]:
                fut.result()

    def ready_nodes(self) -> set[str]:
        status, body = self.admin(timeout=30).request("GET", "/api/v1/nodes")
        if status != 200:
            raise ClusterError(f"listing nodes: HTTP {status}: {_message(body)}")
        ready = set()
        for n in body.get("items", []):
            for c in n.get("status", {}).get("conditions", []) or []:
                if c.get("type") == "Ready" and c.get("status") == "True":
                    ready.add(n["metadata"]["name"])
        return ready

    def wait_nodes_ready(self, names: set[str], timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            missing = names - self.ready_nodes()
            if not missing:
                return
            if time.monotonic() > deadline:
                example = sorted(missing)[0]
                raise ClusterError(
                    f"{len(missing)} node(s) not Ready after {timeout:.0f}s, e.g. {example}"
                )
            time.sleep(0.25)

    # ----- down / status -----------------------------------------------------------
    def down(self) -> list[str]:
        """Stop every process of this cluster (reverse start order). Returns their names."""
        if self.state is None:
            return []
        stopped = []
        # real nodes first: their kubelets, pods and runtimes, and what they changed
        for problem in realnode.teardown(self):
            log.warning("real node teardown: %s", problem)
        for name in reversed(COMPONENTS):
            pid = self.state.pids.get(name)
            if pid and process.is_running(pid, self.state.binaries.get(name)):
                process.stop(pid, self.state.binaries.get(name))
                stopped.append(name)
        for name, pid in self.state.started:
            if process.is_running(pid, self.state.binaries.get(name)):
                process.stop(pid, self.state.binaries.get(name), sig=signal.SIGKILL)
        self.state.pids = {}
        self.state.started = []
        self._save_state()
        return stopped

    def purge(self) -> list[str]:
        """down() and remove the directory's contents made by up()."""
        stopped = self.down()
        self._remove_contents()
        self.state = None
        return stopped

    def status(self) -> dict[str, Any]:
        if self.state is None:
            return {"dir": str(self.dir), "running": False}
        run = self.running()
        info: dict[str, Any] = {
            "dir": str(self.dir),
            "running": bool(run) and all(run.values()),
            "api_url": self.state.api_url,
            "kubeconfig": str(self.kubeconfig),
            "version": self.state.version,
            "feature_gates": list(self.state.feature_gates),
            "large": self.state.large,
            "components": {
                n: {
                    "pid": self.state.pids.get(n),
                    "running": run.get(n, False),
                    "port": self.state.ports.get(n),
                }
                # the control plane, then what a real-node cluster adds (realnode.py)
                for n in [*COMPONENTS, *(n for n in self.state.pids if n not in COMPONENTS)]
            },
        }
        if run.get("kube-apiserver"):
            try:
                info["nodes_ready"] = len(self.ready_nodes())
            except (ClusterError, OSError):
                info["nodes_ready"] = None
        return info


def _message(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("message", body))
    return str(body)[:300]
