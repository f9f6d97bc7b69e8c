"""The README's main job: a local real cluster, the scheduler, and a workload that shows
what it does.

1. Bring up the local control plane (etcd, kube-apiserver, controller manager, kwok) with
   a small mix of nodes.
2. Start the scheduler as its own process (`kube-async-scheduler run`), as users run it.
3. Schedule a batch of pods with mixed constraints and report throughput and placement.
4. Fill every node with low-priority pods, submit high-priority ones that fit nowhere, and
   report each preemption: nominated node, victims, time to bind.
5. Print the scheduler's own metrics, stop it, and (unless --keep) the cluster.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

from kas_dev.cluster.api import AdminClient
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup, Taint
from kas_dev.cluster.ports import free_port
from kas_dev.cluster.scheduler_https import scheduler_get, serving_ca

SCHED = "kube-async-scheduler"
NS = "demo"


def _say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def _pod(name: str, cpu: str, *, priority_class: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": spec.pop("labels", {})},
        "spec": {
            "schedulerName": SCHED,
            "containers": [
                {
                    "name": "app",
                    "image": "demo/app:1",
                    "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}},
                }
            ],
            **spec,
        },
    }
    if priority_class:
        body["spec"]["priorityClassName"] = priority_class
    return body


class Demo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dir = Path(args.dir)
        self.cluster = LocalCluster(self.dir / "cluster")
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = free_port()
        self.general_nodes = max(args.nodes - args.nodes // 5, 1)

    @property
    def admin(self) -> AdminClient:
        return self.cluster.admin(timeout=30)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        status, out = self.admin.request(method, path, body)
        if status >= 300:
            raise ClusterError(f"{method} {path}: HTTP {status}: {out}")
        return out

    def pods(self) -> list[dict[str, Any]]:
        return list(self.api("GET", f"/api/v1/namespaces/{NS}/pods")["items"])

    def create(self, pods: list[dict[str, Any]]) -> None:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for f in [
                pool.submit(self.api, "POST", f"/api/v1/namespaces/{NS}/pods", p) for p in pods
            ]:
                f.result()

    # ------------------------------------------------------------------ steps
    def up(self) -> None:
        if self.cluster.state is not None and any(self.cluster.running().values()):
            _say(f"stopping the demo cluster left running in {self.cluster.dir}")
        self.cluster.purge()
        n = self.args.nodes
        mix = [
            NodeGroup(count=self.general_nodes, name_prefix="node", cpu="4", memory="16Gi"),
            NodeGroup(count=n // 5, name_prefix="gpu", cpu="8", memory="32Gi", labels={"node-type": "gpu"},
                      taints=(Taint("dedicated", "NoSchedule", "gpu"),)),
        ]  # fmt: skip
        self.cluster.up([g for g in mix if g.count], progress=_say)
        self.api("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        for name, value in (("demo-low", 100), ("demo-high", 10000)):
            self.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                     {"metadata": {"name": name}, "value": value, "preemptionPolicy": "PreemptLowerPriority"})  # fmt: skip

    @property
    def cert_dir(self) -> Path:
        return self.dir / "scheduler-certs"

    def scheduler_get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """The scheduler's HTTPS port, as the cluster's admin (scheduler_https)."""
        return scheduler_get(
            f"https://127.0.0.1:{self.port}", path,
            client=self.cluster.admin_client_cert(), server_ca=serving_ca(self.cert_dir),
            timeout=timeout,
        )  # fmt: skip

    def start_scheduler(self) -> None:
        cfg = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"qps": 200, "burst": 400},
            "profiles": [{"schedulerName": SCHED}],
        }
        path = self.dir / "scheduler-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        log = (self.dir / "scheduler.log").open("wb")
        argv = [sys.executable, "-m", "scheduler", "run", "--config", str(path),
                "--kubeconfig", str(self.cluster.kubeconfig), "--bind-address", "127.0.0.1",
                "--secure-port", str(self.port), "--cert-dir", str(self.cert_dir)]  # fmt: skip
        _say(
            f"starting the scheduler: kube-async-scheduler run --config {path} (log: {self.dir / 'scheduler.log'})"
        )
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ClusterError(
                    f"the scheduler exited with code {self.proc.returncode}; see its log"
                )
            try:
                if self.scheduler_get("/readyz", timeout=2)[0] == 200:
                    _say(f"scheduler ready: metrics on https://127.0.0.1:{self.port}/metrics "
                         "(for system:masters, or any user granted get on /metrics)")  # fmt: skip
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise ClusterError("the scheduler did not become ready within 60 s")

    def wait_bound(self, names: set[str], timeout: float = 120.0) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        last = -1
        while True:
            bound = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in self.pods()
                     if p["metadata"]["name"] in names and p["spec"].get("nodeName")}  # fmt: skip
            if len(bound) != last:
                print(f"    bound {len(bound)}/{len(names)}", flush=True)
                last = len(bound)
            if len(bound) == len(names) or time.monotonic() > deadline:
                return bound
            time.sleep(0.3)

    def mixed_batch(self) -> None:
        count = self.args.pods
        _say(
            f"phase 1: {count} pods with mixed constraints (plain, nodeSelector, gpu toleration, zone spread, anti-affinity)"
        )
        pods = []
        for i in range(count):
            kind = i % 5
            if kind == 0:
                pods.append(_pod(f"web-{i}", "200m", labels={"app": "web"},
                                 topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                             "whenUnsatisfiable": "DoNotSchedule",
                                                             "labelSelector": {"matchLabels": {"app": "web"}}}]))  # fmt: skip
            elif kind == 1 and i < 5 * self.general_nodes:
                pods.append(_pod(f"db-{i}", "300m", labels={"app": "db"},
                                 affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                                     {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}))  # fmt: skip
            elif kind == 2:
                pods.append(_pod(f"gpu-job-{i}", "100m", nodeSelector={"node-type": "gpu"},
                                 tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]))  # fmt: skip
            else:
                pods.append(_pod(f"batch-{i}", "100m"))
        t0 = time.monotonic()
        self.create(pods)
        names = {p["metadata"]["name"] for p in pods}
        bound = self.wait_bound(names)
        took = time.monotonic() - t0
        print(
            f"\n    {len(bound)}/{len(names)} pods bound in {took:.1f}s ({len(bound) / took:.0f} pods/s including creation)"
        )
        per_node = Counter(bound.values())
        zones: Counter[str] = Counter()
        node_zone = {n["metadata"]["name"]: n["metadata"]["labels"].get("topology.kubernetes.io/zone", "")
                     for n in self.api("GET", "/api/v1/nodes")["items"]}  # fmt: skip
        for name, node in bound.items():
            if name.startswith("web-"):
                zones[node_zone[node]] += 1
        print(f"    web pods per zone (maxSkew 1): {dict(sorted(zones.items()))}")
        gpu_ok = all(
            node.startswith("gpu-") for name, node in bound.items() if name.startswith("gpu-job")
        )
        print(
            f"    gpu jobs all on gpu nodes: {gpu_ok}; busiest node holds {max(per_node.values())} pods"
        )

    def preemption(self) -> None:
        nodes = [
            n["metadata"]["name"]
            for n in self.api("GET", "/api/v1/nodes")["items"]
            if n["metadata"]["name"].startswith("node-")
        ]
        _say(
            "phase 2: clear phase 1, fill every general node with low-priority pods (4 x 900m on 4 CPU)"
        )
        self.api("DELETE", f"/api/v1/namespaces/{NS}/pods")
        deadline = time.monotonic() + 60
        while self.pods() and time.monotonic() < deadline:
            time.sleep(0.3)
        low = [
            _pod(f"low-{n}-{j}", "900m", priority_class="demo-low")
            for n in range(len(nodes))
            for j in range(4)
        ]
        self.create(low)
        victim_node = self.wait_bound({p["metadata"]["name"] for p in low})
        k = min(self.args.preemptors, len(nodes))
        _say(f"submitting {k} high-priority pods of 3 CPU: they fit nowhere without preemption")
        created: dict[str, float] = {}
        for i in range(k):
            self.create([_pod(f"high-{i}", "3", priority_class="demo-high")])
            created[f"high-{i}"] = time.monotonic()
        nominated: dict[str, str] = {}
        bound: dict[str, tuple[str, float]] = {}
        deadline = time.monotonic() + 120
        while len(bound) < k and time.monotonic() < deadline:
            for p in self.pods():
                name = p["metadata"]["name"]
                if name in created:
                    if p["status"].get("nominatedNodeName"):
                        nominated.setdefault(name, p["status"]["nominatedNodeName"])
                    if p["spec"].get("nodeName") and name not in bound:
                        bound[name] = (p["spec"]["nodeName"], time.monotonic() - created[name])
            time.sleep(0.1)
        victims: dict[str, list[str]] = defaultdict(list)
        for e in self.api("GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events")["items"]:
            if e["reason"] == "Preempted":
                # the preemptor is the Event's related object (the note names it by uid,
                # as upstream's "Preempted by pod <uid> on node <node>")
                by = (e.get("related") or {}).get("name", "")
                victims[by].append(e["regarding"]["name"])
        print(
            f"\n    {'preemptor':<10} {'nominated':<10} {'bound to':<10} {'victims':<8} {'time to bind':>12}"
        )
        for name in sorted(created):
            node, took = bound.get(name, ("-", float("nan")))
            print(
                f"    {name:<10} {nominated.get(name, '-'):<10} {node:<10} {len(victims.get(name, [])):<8} {took:>11.2f}s"
            )
        for name in sorted(victims):
            where = ", ".join(f"{v} (on {victim_node.get(v, '?')})" for v in sorted(victims[name]))
            print(f"    {name} evicted: {where}")

    def metrics(self) -> None:
        _say("the scheduler's own metrics (/metrics)")
        text = self.scheduler_get("/metrics")[1]
        wanted = ("scheduler_schedule_attempts_total{", "scheduler_preemption_attempts_total ",
                  "scheduler_preemption_victims_sum", "scheduler_preemption_goroutines_execution_total{",
                  "scheduler_pending_pods{")  # fmt: skip
        for line in text.splitlines():
            if line.startswith(wanted):
                print(f"    {line}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            _say("stopping the scheduler (SIGTERM)")
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if not self.args.keep:
            _say("stopping the cluster (use --keep to leave it running)")
            self.cluster.down()
        else:
            print(f"cluster left running; kubeconfig: {self.cluster.kubeconfig}")


def run_demo(args: argparse.Namespace) -> int:
    demo = Demo(args)
    try:
        demo.up()
        demo.start_scheduler()
        demo.mixed_batch()
        demo.preemption()
        demo.metrics()
    except ClusterError as exc:
        print(f"kube-async-scheduler: error: {exc}", file=sys.stderr)
        return 1
    finally:
        demo.stop()
    return 0
