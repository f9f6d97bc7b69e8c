"""Does explain leave scheduling and the lease alone under load? (issue 21)

    python -m bench.explain_load [--nodes 5000] [--pods 15000] [--schedule 2000]
                                 [--calls 200] [--targets 200] [--rounds 1] [--keep]

On a local control plane (etcd, kube-apiserver, kube-controller-manager; static nodes,
which the local cluster's controller manager leaves Ready) it creates `--nodes` nodes of
4 CPU and `--pods` pods bound to them (900m each, priority 0, spread evenly), and
`--targets` gated pods of priority 1000 that need 2 CPU: explaining one runs the whole
Filter and DefaultPreemption's dry run over the cluster (10% of the nodes are dry-run).
Then it starts our scheduler with leader election (lease 15 s, renew deadline 10 s,
retry period 1 s, so a renewal gap over 2 s means a stall of a second or more) and
follows its Lease with a watch (tests/lease_watch.py).

Each round schedules `--schedule` pods of 100m twice (the order alternating from round
to round): once alone, once while waves of `--calls` concurrent GET /explain calls
(call i asks about target i mod `--targets`) start every `--wave-interval` seconds (1 s;
0: back to back) until the pods are bound. Throughput is bound pods over the seconds
from the first create to the last bind seen (both phases create the same way).
Reported as a table: leader changes (0 wanted), the longest renewal gap (< 2 s
wanted), throughput alone and with explain (within 10% wanted), the scheduler's CPU per
bound pod in both (steadier than throughput when other work shares the machine), explain
answers by HTTP status, and the evaluations' CPU and longest event-loop step (from the
scheduler's "explain evaluated" log lines).

Every HTTP call to the scheduler goes through `scheduler_get`: the one place to change
when the scheduler serves HTTPS with credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import yaml

from bench.api import Api, ApiError
from bench.pinned_workloads import node_manifest, node_name
from bench.procs import OURS_CLI, ROOT, ours_env
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.ports import free_port
from kas_dev.cluster.scheduler_https import admin_of, client_context, serving_ca
from tests.lease_watch import LeaseWatcher

SCHEDULER = "kas-explain-bench"
NAMESPACE = "explain-bench"
LEASE_NAMESPACE = "kube-system"
LEASE = "kas-explain-bench"
HIGH = "explain-bench-high"
CONCURRENCY = 32
RETRY_PERIOD = 1.0


# ------------------------------------------------------------------ the scheduler's HTTP


async def scheduler_get(session: aiohttp.ClientSession, base: str, path: str) -> tuple[int, bytes]:
    """GET `path` from the scheduler's HTTPS port: (HTTP status, body). The only HTTP call
    to the scheduler in this benchmark (explain, readiness); the session carries the
    cluster admin's client certificate (system:masters: no review per call)."""
    async with session.get(base + path, timeout=aiohttp.ClientTimeout(total=120)) as r:
        return r.status, await r.read()


# ------------------------------------------------------------------ objects


def _pod(name: str, cpu: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}},
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [
                {"name": "c", "image": "registry.local/pause:3.10",
                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
            ],
            **spec,
        },
    }  # fmt: skip


def _config(kubeconfig: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
        "leaderElection": {
            "leaderElect": True,
            "leaseDuration": "15s",
            "renewDeadline": "10s",
            "retryPeriod": f"{RETRY_PERIOD:g}s",
            "resourceNamespace": LEASE_NAMESPACE,
            "resourceName": LEASE,
        },
        "profiles": [{"schedulerName": SCHEDULER}],
    }


async def _each(count: int, make: Any, api: Api) -> None:
    """POST make(i) for i in range(count), CONCURRENCY at a time (409: already there)."""
    it = iter(range(count))

    async def worker() -> None:
        for i in it:
            path, body = make(i)
            for attempt in range(5):
                try:
                    await api.request("POST", path, body, ok=(409,))
                    break
                except (TimeoutError, ApiError, aiohttp.ClientError):
                    if attempt == 4:
                        raise
                    await asyncio.sleep(0.5 * (attempt + 1))

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


# ------------------------------------------------------------------ figures


@dataclass
class Phase:
    label: str
    pods: int
    seconds: float
    cpu: float = 0.0  # the scheduler process's CPU seconds over the phase
    answers: Counter[int] = field(default_factory=Counter)
    waves: int = 0
    slowest_answer: float = 0.0

    @property
    def throughput(self) -> float:
        return self.pods / self.seconds if self.seconds else 0.0


@dataclass
class Figures:
    nodes: int
    pods: int
    phases: list[Phase]
    leader_changes: int
    longest_gap: float
    renewals: int
    scheduler_exited: bool
    longest_step_ms: float
    evaluations: int
    explain_cpu: float  # seconds of CPU the evaluations took, over the run
    calls: int = 0

    def _sum(self, label: str) -> tuple[int, float, float]:
        """(pods, seconds, scheduler CPU seconds) of the phases labelled `label`."""
        phases = [p for p in self.phases if p.label == label]
        return (
            sum(p.pods for p in phases),
            sum(p.seconds for p in phases),
            sum(p.cpu for p in phases),
        )

    def throughputs(self) -> tuple[float, float]:
        (pa, sa, _), (pb, sb, _) = self._sum("alone"), self._sum("explain")
        return pa / sa, pb / sb

    def table(self) -> str:
        a, b = self.throughputs()
        (pa, _, ca), (pb, sb, cb) = self._sum("alone"), self._sum("explain")
        loaded = [p for p in self.phases if p.label == "explain"]
        answers: Counter[int] = Counter()
        for p in loaded:
            answers.update(p.answers)
        rows = [
            ("cluster", f"{self.nodes} nodes, {self.pods} pods bound before"),
            ("leader changes", f"{self.leader_changes} (exited: {self.scheduler_exited})"),
            ("longest renewal gap", f"{self.longest_gap:.2f} s (retry period {RETRY_PERIOD:g} s; "
                                    f"{self.renewals} renewals)"),
            ("throughput alone", f"{a:.1f} pods/s"),
            ("throughput with explain", f"{b:.1f} pods/s ({(b / a - 1) * 100:+.1f}%)"),
            ("scheduler CPU per pod", f"alone {ca / pa * 1000:.2f} ms, with explain "
                                      f"{cb / pb * 1000:.2f} ms"),
            ("explain waves", f"{sum(p.waves for p in loaded)} of {self.calls} calls"),
            ("explain answers", ", ".join(f"{k}: {v}" for k, v in sorted(answers.items()))),
            ("slowest explain answer", f"{max(p.slowest_answer for p in loaded):.2f} s"),
            ("evaluations", f"{self.evaluations}, {self.explain_cpu:.2f} s CPU "
                            f"({self.explain_cpu / sb * 100:.1f}% of the explain phases)"),
            ("longest evaluation step", f"{self.longest_step_ms:.1f} ms (event loop held)"),
        ]  # fmt: skip
        for p in self.phases:
            rows.append((f"  {p.label}", f"{p.pods} pods in {p.seconds:.1f} s, "
                                         f"{p.cpu:.1f} s CPU"))  # fmt: skip
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def ok(self) -> bool:
        alone, loaded = self.throughputs()
        return (
            self.leader_changes == 0
            and not self.scheduler_exited
            and self.longest_gap < 2.0
            and loaded >= 0.9 * alone
        )


_EVALUATED = re.compile(r"explain evaluated .*cpu_ms=([0-9.]+) longest_step_ms=([0-9.]+)")


def _evaluations(log: Path) -> list[tuple[float, float]]:
    """(CPU ms, longest step ms) of each evaluation the scheduler logged."""
    found = _EVALUATED.finditer(log.read_text(errors="replace"))
    return [(float(m.group(1)), float(m.group(2))) for m in found]


# ------------------------------------------------------------------ the run


def _start_scheduler(
    kubeconfig: Path, workdir: Path, port: int, log: Path, client_ca: Path
) -> subprocess.Popen[bytes]:
    cfg = workdir / "config.yaml"
    cfg.write_text(yaml.safe_dump(_config(kubeconfig)))
    argv = [*OURS_CLI, "run", "--config", str(cfg), "--kubeconfig", str(kubeconfig),
            "--bind-address", "127.0.0.1", "--secure-port", str(port),
            "--cert-dir", str(workdir / "certs"), "--client-ca-file", str(client_ca)]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env=ours_env())  # fmt: skip


@dataclass
class Bench:
    nodes: int
    pods: int
    schedule: int
    calls: int
    targets: int
    rounds: int
    base: Path
    wave_interval: float = 1.0
    progress: Any = print

    async def run(self) -> Figures:
        cluster = LocalCluster(self.base / "cluster")
        await asyncio.to_thread(cluster.up, 0)
        proc: subprocess.Popen[bytes] | None = None
        watcher: LeaseWatcher | None = None
        try:
            async with Api(cluster.kubeconfig, connections=CONCURRENCY + 8, timeout=120) as api:
                await self._populate(api)
                port = free_port()
                log = self.base / "scheduler.log"
                admin = admin_of(cluster.api_url)
                if admin is None:
                    raise RuntimeError("the local cluster registered no admin certificate")
                proc = _start_scheduler(
                    cluster.kubeconfig, self.base, port, log, admin.client_ca
                )
                base = f"https://127.0.0.1:{port}"
                await self._wait_cert(proc)
                tls = client_context(admin.client, serving_ca(self.base / "certs"))
                async with aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=self.calls + 8, ssl=tls)
                ) as session:
                    await self._wait_serving(session, base, proc)
                    watcher = LeaseWatcher(cluster.admin(timeout=30), LEASE_NAMESPACE, LEASE)
                    watcher.start()
                    phases: list[Phase] = []
                    for r in range(self.rounds):
                        # the order alternates, so a drift over the run (a cluster growing
                        # by the pods scheduled) does not favour one side
                        order = ("alone", "explain") if r % 2 == 0 else ("explain", "alone")
                        for label in order:
                            phases.append(await self._phase(
                                api, session, base, label, f"r{r}{label[0]}", proc.pid
                            ))  # fmt: skip
                            last = phases[-1]
                            self.progress(f"{label}: {last.pods} pods in {last.seconds:.1f}s"
                                          f" {dict(last.answers)}")  # fmt: skip
                    figures = watcher.figures()
                    evaluations = _evaluations(log)
                    return Figures(
                        nodes=self.nodes,
                        pods=self.pods,
                        phases=phases,
                        leader_changes=figures.leader_changes,
                        longest_gap=figures.longest_gap,
                        renewals=figures.renewals,
                        scheduler_exited=proc.poll() is not None,
                        longest_step_ms=max((e[1] for e in evaluations), default=0.0),
                        evaluations=len(evaluations),
                        explain_cpu=sum(e[0] for e in evaluations) / 1000,
                        calls=self.calls,
                    )
        finally:
            if watcher is not None:
                watcher.stop()
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            await asyncio.to_thread(cluster.down)

    async def _populate(self, api: Api) -> None:
        t = time.monotonic()
        await _each(self.nodes, lambda i: ("/api/v1/nodes", node_manifest(i, kwok=False)), api)
        await api.request(
            "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}, ok=(409,)
        )
        await api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "metadata": {"name": HIGH}, "value": 1000}, ok=(409,))  # fmt: skip
        self.progress(f"{self.nodes} nodes in {time.monotonic() - t:.0f}s")
        t = time.monotonic()
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"

        def old(i: int) -> tuple[str, dict[str, Any]]:
            return path, _pod(f"old-{i}", "900m", nodeName=node_name(i % self.nodes))

        await _each(self.pods, old, api)
        gated = {"priorityClassName": HIGH, "schedulingGates": [{"name": "bench/hold"}]}
        await _each(self.targets, lambda i: (path, _pod(f"asked-{i}", "2", **gated)), api)
        self.progress(f"{self.pods} bound pods and {self.targets} gated targets in "
                      f"{time.monotonic() - t:.0f}s")  # fmt: skip

    async def _wait_cert(self, proc: subprocess.Popen[bytes]) -> None:
        """Until the scheduler has written its self-signed certificate (--cert-dir): the
        client's TLS context checks the scheduler against it."""
        cert = serving_ca(self.base / "certs")
        deadline = time.monotonic() + 120
        while not cert.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"the scheduler exited with {proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no serving certificate at {cert} within 120 s")
            await asyncio.sleep(0.2)

    async def _wait_serving(
        self, session: aiohttp.ClientSession, base: str, proc: subprocess.Popen[bytes]
    ) -> None:
        """Until the scheduler leads and its cache holds the last target."""
        deadline = time.monotonic() + 600
        last = f"/explain/{NAMESPACE}/asked-{self.targets - 1}"
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the scheduler exited with {proc.returncode}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                code, body = await scheduler_get(session, base, last)
                if code == 200 and json.loads(body).get("leader"):
                    return
            await asyncio.sleep(1)
        raise RuntimeError("the scheduler did not serve explain within 600 s")

    async def _phase(
        self,
        api: Api,
        session: aiohttp.ClientSession,
        base: str,
        label: str,
        prefix: str,
        pid: int,
    ) -> Phase:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        stop = asyncio.Event()
        phase = Phase(label, self.schedule, 0.0)
        load = asyncio.create_task(self._explain_waves(session, base, phase, stop)) if (
            label == "explain") else None  # fmt: skip
        scheduler = psutil.Process(pid)
        cpu = sum(scheduler.cpu_times()[:2])
        started = time.monotonic()
        labels = {"phase": prefix}
        await _each(self.schedule, lambda i: (path, _pod(f"{prefix}-{i}", "100m", labels)), api)
        while True:
            listed = await api.request(
                "GET", f"{path}?labelSelector=phase%3D{prefix}&fieldSelector=spec.nodeName!%3D"
            )
            if len(listed["items"]) >= self.schedule:
                break
            await asyncio.sleep(0.5)
        phase.seconds = time.monotonic() - started
        phase.cpu = sum(scheduler.cpu_times()[:2]) - cpu
        stop.set()
        if load is not None:
            await load
        return phase

    async def _explain_waves(
        self, session: aiohttp.ClientSession, base: str, phase: Phase, stop: asyncio.Event
    ) -> None:
        async def one(i: int) -> None:
            t = time.monotonic()
            try:
                code, _ = await scheduler_get(
                    session, base, f"/explain/{NAMESPACE}/asked-{i % self.targets}"
                )
            except (TimeoutError, aiohttp.ClientError, OSError):
                code = 0
            phase.answers[code] += 1
            phase.slowest_answer = max(phase.slowest_answer, time.monotonic() - t)

        while not stop.is_set():
            next_wave = time.monotonic() + self.wave_interval
            await asyncio.gather(*(one(i) for i in range(self.calls)))
            phase.waves += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, next_wave - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=15000, help="pods bound before the run")
    parser.add_argument("--schedule", type=int, default=2000, help="pods scheduled per phase")
    parser.add_argument("--calls", type=int, default=200, help="concurrent explain calls")
    parser.add_argument("--targets", type=int, default=200, help="distinct pods explained")
    parser.add_argument("--rounds", type=int, default=1, help="alone/explain phase pairs")
    parser.add_argument(
        "--wave-interval", type=float, default=1.0, help="seconds between wave starts (0: none)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    for flag in ("nodes", "schedule", "calls", "targets", "rounds"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1")
    if args.pods < 0:
        parser.error("--pods must not be negative")
    base = Path(tempfile.mkdtemp(prefix="kas-explain-load-"))
    if args.wave_interval < 0:
        parser.error("--wave-interval must not be negative")
    bench = Bench(args.nodes, args.pods, args.schedule, args.calls, args.targets, args.rounds,
                  base, wave_interval=args.wave_interval,
                  progress=lambda m: print(m, file=sys.stderr, flush=True))  # fmt: skip
    try:
        figures = asyncio.run(bench.run())
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"work directory: {base}", file=sys.stderr)
    print(figures.table())
    if args.json:
        args.json.write_text(json.dumps(figures.__dict__, default=lambda o: o.__dict__, indent=2))
    return 0 if figures.ok() else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
