"""Start and stop the cluster's processes, tracked by pid.

Each process runs in its own session (so `cluster up` can return and leave it running) and
logs to a file. Stopping checks /proc/<pid>/cmdline first, so a pid the kernel reused for
something else is never signalled."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from kas_dev.cluster.errors import ClusterError


def _die_with_parent() -> None:
    """In the child, before exec: ask the kernel to SIGKILL it when its parent dies."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def start(name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None) -> int:
    """Start `argv` detached, logging to log_dir/name.log. With KAS_CLUSTER_DIE_WITH_PARENT=1
    (the test suite sets it) the process is killed when the starting process dies, so an
    aborted test run leaves no control plane behind; `cluster up` leaves it unset, as its
    processes must outlive the command."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = (log_dir / f"{name}.log").open("ab")
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
            preexec_fn=_die_with_parent
            if os.environ.get("KAS_CLUSTER_DIE_WITH_PARENT") == "1"
            else None,
        )
    except OSError as exc:
        raise ClusterError(f"cannot start {name} ({argv[0]}): {exc.strerror}") from exc
    finally:
        log.close()
    return proc.pid


def is_running(pid: int, binary: str | None = None) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # a zombie (state Z) has exited; its parent has not reaped it yet
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        _reap(pid)
        return False
    return binary is None or cmdline.split(b"\0", 1)[0].decode(errors="replace") == binary


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(pid: int, binary: str | None, timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
    if not is_running(pid, binary):
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not is_running(pid, binary):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(100):
        _reap(pid)
        if not is_running(pid, binary):
            return
        time.sleep(0.05)


def last_log_line(log_dir: Path, name: str) -> str:
    try:
        lines = (log_dir / f"{name}.log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    # prefer the last line that looks like an error
    for line in reversed(lines[-40:]):
        low = line.lower()
        if "error" in low or "fatal" in low or "failed" in low or "invalid" in low:
            return line.strip()[:400]
    return lines[-1].strip()[:400] if lines else "(empty log)"
