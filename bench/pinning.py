"""CPU pinning for the scheduler-bound ("pinned") suite.

Every contender gets the same CPU budget: one core of its own. The control plane (etcd,
kube-apiserver, kube-controller-manager, kwok) and the harness share the other cores.
The harness pins its own thread first; every thread and process it starts afterwards
(the cluster's components included) inherits that mask, and the contender is re-pinned
in the child between fork and exec, before its runtime starts any thread.

A Go binary sizes GOMAXPROCS from the affinity mask it sees at start; the harness also
sets GOMAXPROCS explicitly to the contender's core count, so the figure in the result
file is the one the binary used, not an inference.

`plan` is pure (unit-tested); `pin_self`, `preexec_for` and `affinity_of` touch the OS.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class PinningPlan:
    contender: frozenset[int]
    """CPUs the scheduler under test may run on."""
    control_plane: frozenset[int]
    """CPUs of the control plane and the harness (everything else this suite starts)."""

    @property
    def gomaxprocs(self) -> int:
        return len(self.contender)

    def describe(self) -> dict[str, object]:
        return {
            "contender_cpus": sorted(self.contender),
            "control_plane_cpus": sorted(self.control_plane),
            "contender_gomaxprocs": self.gomaxprocs,
        }


def plan(available: Iterable[int], contender_cpu: int | None = None) -> PinningPlan:
    """One core for the contender (the highest available one unless `contender_cpu` is
    given), every other available core for the control plane and the harness."""
    cpus = sorted(set(available))
    if len(cpus) < 2:
        raise ValueError(
            f"the pinned suite needs at least 2 CPUs (one for the scheduler under test, "
            f"one for the control plane); this process may use {cpus or 'none'}"
        )
    chosen = cpus[-1] if contender_cpu is None else contender_cpu
    if chosen not in cpus:
        raise ValueError(f"CPU {chosen} is not available to this process (available: {cpus})")
    return PinningPlan(
        contender=frozenset({chosen}), control_plane=frozenset(c for c in cpus if c != chosen)
    )


def pin_self(cpus: frozenset[int]) -> None:
    """Pin the calling thread (threads and children started later inherit it)."""
    os.sched_setaffinity(0, cpus)


def preexec_for(cpus: frozenset[int]) -> Callable[[], None]:
    """A Popen preexec_fn: the child pins itself before exec, and asks the kernel to
    kill it if the harness dies (an interrupted matrix leaves no scheduler behind)."""

    def pin() -> None:
        os.sched_setaffinity(0, cpus)
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)

    return pin


def set_affinity_all_threads(pid: int, cpus: frozenset[int]) -> int:
    """Re-pin every thread of a running process (a Go binary's threads each carry their
    own mask; threads started later inherit their creator's). Twice over, so a thread
    born while the first pass ran is caught by the second. Returns threads re-pinned."""
    done = 0
    for _ in range(2):
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task.name), cpus)
                    done += 1
    return done


def parse_cpu_list(text: str) -> frozenset[int]:
    """The kernel's list format ("0", "0-3", "0,2-3") as a set."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.update(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return frozenset(out)


def affinity_of(pid: int) -> list[list[int]]:
    """The distinct CPU masks of every thread of `pid`, as the kernel reports them
    (Cpus_allowed_list in /proc/PID/task/TID/status): what was really enforced."""
    masks: set[frozenset[int]] = set()
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for line in (task / "status").read_text().splitlines():
                    if line.startswith("Cpus_allowed_list:"):
                        masks.add(parse_cpu_list(line.split(":", 1)[1]))
    return sorted(sorted(m) for m in masks)
