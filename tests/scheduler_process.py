"""Run the scheduler as a real process against a test cluster (what users run)."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from kas_dev.cluster.scheduler_https import ClientCert, admin_of, scheduler_get, serving_ca

# the scheduler's "Serving securely on <host>:<port>" line (scheduler/server.py)
SERVING_LINE = re.compile(rb"Serving securely on \S+:(\d+)")
ANONYMOUS_PATHS = ("/healthz", "/livez", "/readyz")


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
        admin: ClientCert | None = None,
        server_ca: Path | None = None,
    ) -> None:
        self._port: int | None = None
        self.log_path = log_path
        # the serving certificate is written here; the harness trusts its CA
        self.cert_dir = log_path.parent / f"{log_path.stem}-certs"
        # the harness reads /metrics and /explain as the cluster's admin (system:masters),
        # whatever identity the scheduler itself runs as; the scheduler learns the admin's
        # CA from --client-ca-file, as its own identity may not read the API server's
        server, own_cert = _kubeconfig_user(kubeconfig, log_path.parent / f"{log_path.stem}-admin")
        cluster_admin = admin_of(server) if server else None
        self.admin = admin or (cluster_admin.client if cluster_admin else own_cert)
        ca_args: list[str] = []
        if cluster_admin is not None and "--client-ca-file" not in (extra_args or []):
            ca_args = ["--client-ca-file", str(cluster_admin.client_ca)]
        self._server_ca = server_ca
        self.argv = [
            sys.executable, "-m", "scheduler", "run",
            "--config", str(config), "--kubeconfig", kubeconfig,
            "--bind-address", "127.0.0.1", "--secure-port", "0",
            "--cert-dir", str(self.cert_dir), *ca_args, "-v", "3",
            *(extra_args or []),
        ]  # fmt: skip
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_ready: bool = True) -> SchedulerProcess:
        self._port = None
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        if wait_ready:
            self.wait_ready()
        return self

    @property
    def port(self) -> int:
        """The HTTPS port the process bound (--secure-port 0), read from its log;
        OSError until it has logged it."""
        if self._port is None:
            try:
                with self.log_path.open("rb") as f:
                    f.seek(self._log_offset)
                    found = SERVING_LINE.search(f.read())
            except OSError as exc:
                raise ConnectionRefusedError(f"no log yet: {exc}") from exc
            if found is None:
                raise ConnectionRefusedError("the scheduler is not serving yet")
            self._port = int(found.group(1))
        return self._port

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def server_ca(self) -> Path:
        """What the serving certificate is checked against: the given CA (with
        --tls-cert-file), else the self-signed pair's in --cert-dir."""
        return self._server_ca or serving_ca(self.cert_dir)

    def get(self, path: str, *, token: str | None = None) -> tuple[int, str]:
        """GET over HTTPS: anonymous on the health paths (as the kubelet probes), with a
        `token` when given, else with the admin client certificate."""
        anonymous = token is not None or path.split("?")[0] in ANONYMOUS_PATHS
        return scheduler_get(
            self.url, path, client=None if anonymous else self.admin,
            server_ca=self.server_ca, token=token, timeout=10,
        )  # fmt: skip

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"scheduler exited with {self.proc.returncode}:\n{self.tail()}"
                )
            try:
                # ready, and (with a client certificate) trusting the API server's
                # client CA: the scheduler reads it just after it starts serving
                if self.get("/readyz")[0] == 200 and (
                    self.admin is None or self.get("/metrics")[0] == 200
                ):
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


def _kubeconfig_user(kubeconfig: str, folder: Path) -> tuple[str, ClientCert | None]:
    """The server URL of the kubeconfig's current context, and its user's client
    certificate (written to `folder` when inline), or None for a token user."""
    try:
        cfg = yaml.safe_load(Path(kubeconfig).read_text())
        current = next(c for c in cfg["contexts"] if c["name"] == cfg["current-context"])
        ctx = current["context"]
        server = next(c for c in cfg["clusters"] if c["name"] == ctx["cluster"])["cluster"]
        user = next(u for u in cfg["users"] if u["name"] == ctx["user"])["user"]
    except (OSError, KeyError, StopIteration, TypeError, yaml.YAMLError):
        return "", None
    url = str(server.get("server", ""))
    if "client-certificate-data" in user and "client-key-data" in user:
        folder.mkdir(parents=True, exist_ok=True)
        cert, key = folder / "client.crt", folder / "client.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        key.chmod(0o600)
        return url, ClientCert(cert, key)
    if "client-certificate" in user and "client-key" in user:
        return url, ClientCert(Path(user["client-certificate"]), Path(user["client-key"]))
    return url, None
