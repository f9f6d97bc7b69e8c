"""The processes under test: how each scheduler is started, its configuration file, and
a monitor that samples its CPU and memory with psutil.

Every contender is a plain child process talking to the cluster through the same
kubeconfig (a ServiceAccount token of its own, so the API server's audit log can tell
its requests apart), with the same client-side qps/burst."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.workloads import SCHEDULER_NAME

ROOT = Path(__file__).resolve().parent.parent
SCHEDULERS = ("upstream", "ours-async", "ours-sync", "ceiling")
# run only when named, after the compared contenders: ours-async in bench/memstats.py,
# which writes where its heap goes (its CPU and RSS are a profile's, not comparable)
PROFILED = ("ours-memstats",)
# `python -m scheduler` of this checkout (PYTHONPATH=ROOT below), run by the interpreter
# running the harness: a worktree without a venv of its own benchmarks its own code
OURS_CLI = (sys.executable, "-m", "scheduler")
# both schedulers' default always-allowed paths, and /metrics (command_for's metrics_port)
OPEN_PATHS = "/healthz,/readyz,/livez,/metrics"


def scheduler_config(
    contender: str,
    kubeconfig: Path,
    qps: float,
    burst: int,
    leader_election: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration both schedulers read: one profile with the
    benchmark's schedulerName, the same qps/burst, leader election off unless
    `leader_election` (the config's leaderElection section) is given. Ours also gets
    DefaultPreemption's `mode` (upstream's strict decoder would refuse that field)."""
    profile: dict[str, Any] = {"schedulerName": SCHEDULER_NAME}
    if contender in ("ours-async", "ours-sync", "ours-memstats"):
        mode = "Sync" if contender == "ours-sync" else "Async"
        profile["pluginConfig"] = [
            {
                "name": "DefaultPreemption",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "DefaultPreemptionArgs",
                    "mode": mode,
                },
            }
        ]
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": leader_election or {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": burst},
        "profiles": [profile],
    }


def ours_available() -> tuple[bool, str]:
    """Whether `kube-async-scheduler run` exists in this checkout's venv yet."""
    try:
        res = subprocess.run(
            [*OURS_CLI, "run", "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env=ours_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    if res.returncode != 0:
        return False, (res.stderr.strip().splitlines() or ["run --help failed"])[-1]
    return True, ""


def ours_env() -> dict[str, str]:
    """The environment our scheduler runs in: this checkout first on the import path."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def version_of(argv: list[str]) -> str:
    try:
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, cwd=ROOT, env=ours_env()
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if res.returncode != 0:
        return "unknown"
    return (res.stdout.strip() or res.stderr.strip() or "unknown").splitlines()[0]


def command_for(
    contender: str,
    *,
    run_dir: Path,
    bin_dir: Path,
    kubeconfig: Path,
    qps: float,
    burst: int,
    concurrency: int,
    feature_gates: list[str] | None = None,
    metrics_port: int | None = None,
    leader_election: dict[str, Any] | None = None,
    config_name: str | None = None,
) -> list[str]:
    """The contender's command line; `feature_gates` (`--feature-gates=...` arguments)
    go to both schedulers, never to the ceiling. With `metrics_port`, both schedulers
    serve HTTPS on that port of 127.0.0.1 with /metrics open to a caller without
    credentials (bench/scrape.py reads it); without it upstream serves nothing, as
    before, and ours any free port with /metrics behind its delegated authorization.

    kube-scheduler v1.37.2 given no --authentication-kubeconfig and run outside a Pod
    has no delegation client (k8s.io/apiserver@v0.37.2 pkg/server/options/
    authentication.go:462-479, authorization.go:220-237): anonymous requests are
    authenticated (authentication.go:337), no client-CA or front-proxy ConfigMap is
    looked up (:366-368, :390-392), no TokenReview or SubjectAccessReview is ever sent
    (authorization.go:198-199), and the always-allowed paths admit anyone
    (:187-196). Serving adds one idle listener and an in-memory self-signed certificate
    made at start-up, outside every window; no request to the API server.

    `leader_election` goes to scheduler_config; `config_name` names the config file in
    `run_dir` (default `<contender>-config.yaml`)."""
    gates = list(feature_gates or [])
    if contender == "ceiling":
        return [
            sys.executable,
            "-m",
            "bench.binder",
            f"--kubeconfig={kubeconfig}",
            f"--scheduler-name={SCHEDULER_NAME}",
            f"--qps={qps}",
            f"--burst={burst}",
            f"--concurrency={concurrency}",
        ]
    cfg = run_dir / (config_name or f"{contender}-config.yaml")
    cfg.write_text(
        yaml.safe_dump(scheduler_config(contender, kubeconfig, qps, burst, leader_election))
    )
    if contender == "upstream":
        serving = (
            [f"--secure-port={metrics_port}", "--bind-address=127.0.0.1",
             f"--authorization-always-allow-paths={OPEN_PATHS}"]
            if metrics_port
            else ["--secure-port=0"]
        )  # fmt: skip
        return [str(bin_dir / "kube-scheduler"), f"--config={cfg}", *serving, "-v=1", *gates]
    if contender == "ours-memstats":
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        out = ROOT / "bench" / "results" / f"memstats-{stamp}.txt"
        return [
            sys.executable, "-m", "bench.memstats", "--out", str(out), "--",
            "run", "--config", str(cfg), "--kubeconfig", str(kubeconfig),
            "--secure-port", "0", "--bind-address", "127.0.0.1",
            *gates,
        ]  # fmt: skip
    if contender in ("ours-async", "ours-sync"):
        # KAS_BENCH_PYINSTRUMENT=<file>: run ours under pyinstrument's sampling profiler
        # (the text report is written when the harness stops it with SIGTERM), to see
        # where a workload's time goes; never set for figures that are compared.
        profile_out = os.environ.get("KAS_BENCH_PYINSTRUMENT")
        profiler = (sys.executable, "-m", "pyinstrument", "-r", "text", "-o", profile_out)
        cli = (*profiler, "-m", "scheduler") if profile_out else OURS_CLI
        return [
            *cli,
            "run",
            "--config",
            str(cfg),
            "--kubeconfig",
            str(kubeconfig),
            "--secure-port",
            str(metrics_port or 0),
            "--bind-address",
            "127.0.0.1",
            *(["--authorization-always-allow-paths", OPEN_PATHS] if metrics_port else []),
            *gates,
        ]
    raise ValueError(f"unknown scheduler {contender!r} (known: {', '.join(SCHEDULERS)})")


@dataclass
class Monitor:
    """A child process with psutil sampling (every `interval` s) of RSS and CPU time.

    `preexec` runs in the child before exec (the pinned suite pins it there); `env` is
    added to this process's environment. With `keep_series`, every CPU sample is kept as
    (monotonic time, CPU seconds) so figures can be cut to any window afterwards."""

    name: str
    argv: list[str]
    log: Path
    interval: float = 0.25
    preexec: Callable[[], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    keep_series: bool = False
    proc: subprocess.Popen[bytes] | None = None
    peak_rss: int = 0
    marks: dict[str, float] = field(default_factory=dict)
    series: list[tuple[float, float]] = field(default_factory=list)
    started_at: float = 0.0
    _ps: psutil.Process | None = None
    _task: asyncio.Task[None] | None = None
    cpu_total: float = 0.0
    exit_code: int | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        if self.argv[:3] in (list(OURS_CLI), [sys.executable, "-m", "bench.memstats"]):
            env["PYTHONPATH"] = ours_env()["PYTHONPATH"]
        with self.log.open("ab") as out:
            self.started_at = time.monotonic()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=ROOT,
                env=env,
                preexec_fn=self.preexec,
            )
        self._ps = psutil.Process(self.proc.pid)
        if self.keep_series:
            self.series.append((self.started_at, 0.0))
        self._task = asyncio.create_task(self._sample())

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float:
        if self._ps is None:
            return 0.0
        try:
            t = self._ps.cpu_times()
            self.cpu_total = t.user + t.system
        except psutil.Error:
            pass
        return self.cpu_total

    def mark(self, label: str) -> None:
        """Remember the CPU seconds used so far under `label`."""
        self.marks[label] = self.cpu_seconds()

    def _hwm(self) -> int:
        """The kernel's own peak RSS of the process (VmHWM), in bytes."""
        assert self.proc is not None
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    async def _sample(self) -> None:
        assert self._ps is not None
        n = 0
        while self.alive():
            with contextlib.suppress(psutil.Error):
                # VmHWM is the kernel's own peak: reading it now and then is enough
                if n % 10 == 0:
                    self.peak_rss = max(self.peak_rss, self._ps.memory_info().rss, self._hwm())
                cpu = self.cpu_seconds()
                if self.keep_series:
                    self.series.append((time.monotonic(), cpu))
            n += 1
            await asyncio.sleep(self.interval)

    async def stop(self, grace_s: float = 15.0) -> None:
        if self.proc is None:
            return
        if self.alive():
            self.peak_rss = max(self.peak_rss, self._hwm())
            cpu = self.cpu_seconds()
            if self.keep_series:
                self.series.append((time.monotonic(), cpu))
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.proc.wait, grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.exit_code = self.proc.wait()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def tail(self, lines: int = 5) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return ""
