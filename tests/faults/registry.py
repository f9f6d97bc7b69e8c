"""The fault cases and how one is run: each case module exposes CASE; `run_case` gives
it a fresh work directory, times it, and turns an exception into a failed result."""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.faults.result import CaseResult

# module names under tests/faults, in the order the suite runs them (cheap ones first)
MODULES = (
    "parse_fuzz",
    "apiserver_kill",
    "watch_expiry",
    "leader_pause",
    "admission_refusal",
    "backlog",
    "burst",
    "gangs",
    "soak",
    "gang_soak",
)


@dataclass(frozen=True)
class RunContext:
    workdir: Path
    full: bool  # the full form (figures for docs/reliability.md) or the reduced one (CI)
    say: Callable[[str], None]
    minutes: float | None = None  # the soak's length; None: the mode's default


@dataclass(frozen=True)
class Case:
    name: str
    summary: str
    needs_cluster: bool
    run: Callable[[RunContext, CaseResult], None]


def cases() -> dict[str, Case]:
    out: dict[str, Case] = {}
    for mod in MODULES:
        case: Case = importlib.import_module(f"tests.faults.{mod}").CASE
        out[case.name] = case
    return out


def run_case(case: Case, ctx: RunContext) -> CaseResult:
    result = CaseResult(case.name, "full" if ctx.full else "reduced")
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        case.run(ctx, result)
    except Exception as exc:  # the case is reported as failed, the suite goes on
        result.error = f"{type(exc).__name__}: {exc}"
        ctx.say(traceback.format_exc())
    result.seconds = time.monotonic() - t0
    return result
