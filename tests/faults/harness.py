"""The fault suite's test bed: a real local control plane with the audit log on, and
scheduler replicas run as real processes, each under a client certificate of its own
(so the audit log tells the replicas apart).

Everything a case starts is stopped by `Bed.close()` (the cluster's processes also die
with the test process, see tests/conftest.py)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kas_dev.cluster import process
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.faults import audit
from tests.identity import kubeconfig_for
from tests.kube import ClusterHandle, pod_manifest
from tests.scheduler_process import SchedulerProcess, write_config
from tests.webhook import DeleteWebhook

SCHED = "kube-async-scheduler"
LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "kube-async-scheduler"
_IDENTITY = re.compile(r"identity=(\S+)")

Say = Callable[[str], None]

# every process this module starts dies with it, as the test fixtures arrange
os.environ.setdefault("KAS_CLUSTER_DIE_WITH_PARENT", "1")


@dataclass(frozen=True, slots=True)
class Lease:
    """leaderElection timings in seconds."""

    duration: float
    renew_deadline: float
    retry_period: float


PRODUCTION_LEASE = Lease(15.0, 10.0, 2.0)  # upstream's and the chart's defaults
FAST_LEASE = Lease(6.0, 4.0, 1.0)  # the failover tests' short lease


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    qps: float = 500.0
    burst: int = 1000
    lease: Lease | None = None
    pod_initial_backoff: int = 1
    pod_max_backoff: int = 10

    def config(self) -> dict[str, Any]:
        top: dict[str, Any] = {
            "clientConnection": {"qps": self.qps, "burst": self.burst},
            "podInitialBackoffSeconds": self.pod_initial_backoff,
            "podMaxBackoffSeconds": self.pod_max_backoff,
        }
        if self.lease is None:
            top["leaderElection"] = {"leaderElect": False}
        else:
            top["leaderElection"] = {
                "leaderElect": True,
                "leaseDuration": f"{self.lease.duration:g}s",
                "renewDeadline": f"{self.lease.renew_deadline:g}s",
                "retryPeriod": f"{self.lease.retry_period:g}s",
                "resourceLock": "leases",
                "resourceName": LEASE_NAME,
                "resourceNamespace": LEASE_NAMESPACE,
            }
        return top


PRODUCTION = SchedulerSettings(qps=50, burst=100, lease=PRODUCTION_LEASE)


@dataclass
class Replica:
    """One scheduler process with its audit identity (the certificate's user name)."""

    name: str
    user: str
    proc: SchedulerProcess

    @property
    def pid(self) -> int:
        assert self.proc.proc is not None
        return self.proc.proc.pid

    def identity(self) -> str:
        """The leader-election identity the process logged ("" before it did)."""
        try:
            found = _IDENTITY.findall(self.proc.log_path.read_text(errors="replace"))
        except OSError:
            return ""
        return found[-1] if found else ""

    def alive(self) -> bool:
        return self.proc.proc is not None and self.proc.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def metric_or_none(self, name: str, **labels: str) -> float | None:
        """The metric's value (0 for a registered metric without samples yet, such as a
        labelled counter never incremented), or None when the process does not export it."""
        try:
            text = self.proc.metrics()
        except OSError:
            return None
        family = name.removesuffix("_total")  # prometheus_client's TYPE line drops it
        if not any(
            line.startswith((f"# TYPE {family} ", f"# TYPE {name} ")) for line in text.splitlines()
        ):
            return None
        return self.proc.metric(name, **labels)


class Bed:
    """One cluster for one case; `close()` stops everything it started."""

    def __init__(
        self,
        workdir: Path,
        nodes: list[NodeGroup] | int,
        say: Say,
        *,
        generic_workload: bool = False,
    ) -> None:
        self.dir = workdir
        self.say = say
        workdir.mkdir(parents=True, exist_ok=True)
        self.audit = audit.AuditLog(workdir / "audit.log")
        self.local = LocalCluster(workdir / "cluster")
        self.replicas: list[Replica] = []
        self.webhooks: list[DeleteWebhook] = []
        t0 = time.monotonic()
        self.local.up(
            nodes,
            extra_apiserver_args=audit.apiserver_args(
                workdir / "audit-policy.json", self.audit.path
            ),
            generic_workload=generic_workload,
        )
        self.cluster = ClusterHandle(self.local)
        say(f"cluster up in {time.monotonic() - t0:.1f}s ({self.local.api_url})")

    # ------------------------------------------------------------- schedulers
    def kubeconfig_for(self, user: str) -> Path:
        # system:masters (the scheduler may do anything) and the group the audit policy
        # records
        return kubeconfig_for(
            self.local,
            user,
            self.dir / "identities",
            ("system:masters", audit.SCHEDULER_GROUP),
        )

    def start_scheduler(
        self,
        name: str,
        settings: SchedulerSettings,
        *,
        wait_ready: bool = True,
        extra_args: list[str] | None = None,
    ) -> Replica:
        user = f"fault-scheduler-{name}"
        config = write_config(self.dir / f"config-{name}.yaml", **settings.config())
        proc = SchedulerProcess(
            str(self.kubeconfig_for(user)),
            config,
            self.dir / f"scheduler-{name}.log",
            extra_args=extra_args,
        )
        replica = Replica(name, user, proc)
        self.replicas.append(replica)
        proc.start(wait_ready=wait_ready)
        self.say(f"scheduler {name} started (pid {replica.pid}, user {user})")
        return replica

    # ------------------------------------------------------------- control plane
    def kill_apiserver(self) -> None:
        self.local.stop_component("kube-apiserver", sig=signal.SIGKILL)

    def start_apiserver(self, attempts: int = 5) -> None:
        """Starts kube-apiserver again on its old port: the schedulers' kubeconfigs name
        it. LocalCluster.start_component moves a component that exits during start to new
        ports (right for `cluster up`, wrong here), so a move is undone and retried."""
        assert self.local.state is not None
        port = self.local.state.ports["kube-apiserver"]
        for attempt in range(attempts):
            self.local.start_component("kube-apiserver")
            if self.local.state.ports["kube-apiserver"] == port:
                return
            why = process.last_log_line(self.local.log_dir, "kube-apiserver")
            self.say(f"kube-apiserver moved off port {port} on start ({why}); retrying")
            self.local.stop_component("kube-apiserver", sig=signal.SIGKILL)
            self.local.state.ports["kube-apiserver"] = port
            time.sleep(1.0 + attempt)  # whoever held the port may let go of it
        raise RuntimeError(f"kube-apiserver could not get its port {port} back")

    # ------------------------------------------------------------- objects
    def namespace(self, name: str) -> str:
        return self.cluster.create_namespace(name)

    def priority_classes(self, classes: dict[str, int]) -> None:
        for name, value in classes.items():
            self.cluster.api(
                "POST",
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": name}, "value": value,
                 "preemptionPolicy": "PreemptLowerPriority"},
            )  # fmt: skip

    def create_pods(
        self, namespace: str, manifests: Iterable[dict[str, Any]], workers: int = 12
    ) -> int:
        """Creates every pod (in parallel); returns how many were created."""
        admin = self.local.admin(timeout=60)

        def create(pod: dict[str, Any]) -> bool:
            for _ in range(20):
                status, out = admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
                if status in (200, 201):
                    return True
                if status == 409:
                    return False
                time.sleep(0.5)  # 429/5xx while the server is busy: try again
            raise RuntimeError(f"creating {pod['metadata']['name']}: HTTP {status}: {out}")

        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            return sum(pool.map(create, manifests))

    def list_all(self, path: str, page: int = 500) -> list[dict[str, Any]]:
        """Every item of a (large) list, page by page."""
        items: list[dict[str, Any]] = []
        cont = ""
        sep = "&" if "?" in path else "?"
        while True:
            url = f"{path}{sep}limit={page}" + (f"&continue={cont}" if cont else "")
            out = self.cluster.api("GET", url)
            items.extend(out.get("items") or [])
            cont = (out.get("metadata") or {}).get("continue") or ""
            if not cont:
                return items

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.list_all(
            f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        )

    def nodes(self) -> list[dict[str, Any]]:
        return self.list_all("/api/v1/nodes")

    def lease(self) -> dict[str, Any]:
        status, out = self.cluster.admin.request(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
        )
        return dict(out.get("spec") or {}) if status == 200 else {}

    def webhook(self, hook: DeleteWebhook) -> DeleteWebhook:
        hook.start()
        if hook._server is not None:
            # a connection cut by an API server kill is expected here: no traceback
            hook._server.handle_error = lambda request, address: None  # type: ignore[method-assign,assignment]
        self.webhooks.append(hook)
        return hook

    # ------------------------------------------------------------- teardown
    def close(self) -> None:
        for r in self.replicas:
            if r.alive():
                r.signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
            r.proc.stop(timeout=10)
        for h in self.webhooks:
            with contextlib.suppress(OSError):
                h.stop()
        self.local.down()


def pods_named(prefix: str, count: int, **kw: Any) -> list[dict[str, Any]]:
    return [pod_manifest(f"{prefix}-{i:05d}", **kw) for i in range(count)]


def wait_until(
    predicate: Callable[[], Any], timeout: float, interval: float = 0.5
) -> tuple[bool, Any]:
    """Polls `predicate` until it is truthy or `timeout` passes: (met, last value). Unlike
    tests.kube.wait_for it does not raise, so a case records a failed invariant and goes on."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return True, value
        if time.monotonic() > deadline:
            return False, value
        time.sleep(interval)


@dataclass
class Sampler:
    """Calls `sample()` every `interval` seconds in the caller's loop (`tick()`)."""

    interval: float
    sample: Callable[[], None]
    _next: float = field(default=0.0)

    def tick(self) -> None:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.interval
            self.sample()
