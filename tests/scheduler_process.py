"""Run the scheduler as a real process against a test cluster (what users run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from kas_dev.cluster.ports import free_port


def write_config(path: Path, profiles: list[dict[str, Any]] | None = None, **top: Any) -> Path:
    cfg: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": 500, "burst": 1000},
        "profiles": profiles or [{"schedulerName": "kube-async-scheduler"}],
    }
    cfg.update(top)
    path.write_text(yaml.safe_dump(cfg))
    return path


class SchedulerProcess:
    def __init__(
        self,
        kubeconfig: str,
        config: Path,
        log_path: Path,
        *,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.argv = [
            sys.executable, "-m", "scheduler", "run",
            "--config", str(config), "--kubeconfig", kubeconfig,
            "--bind-address", "127.0.0.1", "--port", str(self.port), "-v", "3",
            *(extra_args or []),
        ]  # fmt: skip
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_ready: bool = True) -> SchedulerProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        if wait_ready:
            self.wait_ready()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"scheduler exited with {self.proc.returncode}:\n{self.tail()}"
                )
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"scheduler not ready after {timeout}s:\n{self.tail()}")

    def metrics(self) -> str:
        return self.get("/metrics")[1]

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        total = 0.0
        for line in self.metrics().splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            metric, _, rest = head.partition("{")
            if metric != name:
                continue
            got = dict(kv.split("=", 1) for kv in rest.rstrip("}").split(",") if "=" in kv)
            if all(got.get(k, "").strip('"') == v for k, v in labels.items()):
                total += float(value)
        return total

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
