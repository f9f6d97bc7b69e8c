"""A child process (upstream kube-scheduler, in the tests that compare with it) whose
output goes to a log file: start, stop (terminate, then kill after a grace), the log."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path


class LoggedProcess:
    def __init__(self, argv: Sequence[str], log_path: Path, *, grace: float = 20.0) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.grace = grace
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(self.grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])
