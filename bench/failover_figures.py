"""The fail-over benchmark's figures and its side-by-side table (bench/failover.py runs
it). Pure: times in, numbers and text out, so every figure is unit-tested exactly.

Every instant is on the harness's monotonic clock. Two come from elsewhere and are
mapped onto it: the Lease's acquireTime (the new leader's wall clock at the start of
its winning attempt; the same machine's clock, so only the mapping's own error of a
few microseconds remains) and a process's CPU time (/proc/PID/stat, in clock ticks).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.stats import ratio

FAILOVER = "failover"
COLD_START = "cold_start"
PHASES = (FAILOVER, COLD_START)


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """What one phase of one contender recorded.

    `origin` is the SIGKILL of the leader (fail-over) or the start of the process (cold
    start); `cpu_at_origin` / `cpu_at_end` the measured process's CPU seconds then and
    when every pod was seen bound (the new leader in a fail-over, the only replica in a
    cold start; None when it could not be read)."""

    origin: float
    pods: int
    binds: Mapping[str, float]
    """Pod name -> when the harness's watch first saw it bound."""
    acquired: float | None = None
    """The new holder's Lease acquireTime, mapped to the monotonic clock."""
    cpu_at_origin: float | None = None
    cpu_at_end: float | None = None


def phase_figures(t: PhaseTimes) -> dict[str, Any]:
    """The figures of one phase; a time to "all bound" only when every pod was bound."""
    times = sorted(t.binds.values())
    first = times[0] if times else None
    complete = len(times) >= t.pods
    last = times[-1] if complete and times else None

    def since(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(a - b, 3)

    cpu = (
        round(t.cpu_at_end - t.cpu_at_origin, 3)
        if t.cpu_at_end is not None and t.cpu_at_origin is not None and complete
        else None
    )
    return {
        "pods": t.pods,
        "bound": len(times),
        "complete": complete,
        "origin_to_lease_s": since(t.acquired, t.origin),
        "origin_to_first_bind_s": since(first, t.origin),
        "origin_to_all_bound_s": since(last, t.origin),
        "lease_to_first_bind_s": since(first, t.acquired),
        "first_to_last_bind_s": since(last, first),
        "cpu_s": cpu,
    }


# (phase, figure key, label in the table), in the table's order
ROWS: tuple[tuple[str, str, str], ...] = (
    (FAILOVER, "origin_to_lease_s", "fail-over: kill -> lease acquired (s)"),
    (FAILOVER, "origin_to_first_bind_s", "fail-over: kill -> first bind (s)"),
    (FAILOVER, "origin_to_all_bound_s", "fail-over: kill -> all bound (s)"),
    (FAILOVER, "lease_to_first_bind_s", "fail-over: lease acquired -> first bind (s)"),
    (FAILOVER, "first_to_last_bind_s", "fail-over: first -> last bind (s)"),
    (FAILOVER, "cpu_s", "fail-over: new leader CPU, kill -> all bound (s)"),
    (COLD_START, "origin_to_first_bind_s", "cold start: process start -> first bind (s)"),
    (COLD_START, "origin_to_all_bound_s", "cold start: process start -> all bound (s)"),
    (COLD_START, "lease_to_first_bind_s", "cold start: lease acquired -> first bind (s)"),
    (COLD_START, "cpu_s", "cold start: CPU, start -> all bound (s)"),
)


def side_by_side(
    figures: Mapping[str, Mapping[str, Mapping[str, Any]]],
    upstream: str = "upstream",
    ours: str = "ours-async",
) -> list[tuple[str, float | None, float | None, float | None]]:
    """One row per figure: (label, upstream's, ours, ours / upstream). `figures` is
    contender -> phase -> phase_figures(); a missing phase or figure is None."""
    out = []
    for phase, key, label in ROWS:
        up = (figures.get(upstream) or {}).get(phase, {}).get(key)
        us = (figures.get(ours) or {}).get(phase, {}).get(key)
        r = ratio(us, up)
        out.append((label, up, us, None if r is None else round(r, 2)))
    return out


def table(rows: list[tuple[str, float | None, float | None, float | None]]) -> str:
    """The rows as a Markdown table (readable as plain text too)."""

    def cell(v: float | None, suffix: str = "") -> str:
        return "-" if v is None else f"{v:.2f}{suffix}"

    lines = ["| figure | upstream | ours | ours/upstream |", "|---|---:|---:|---:|"]
    for label, up, us, r in rows:
        lines.append(f"| {label} | {cell(up)} | {cell(us)} | {cell(r, 'x')} |")
    return "\n".join(lines)


def rfc3339_epoch(text: str) -> float:
    """A Lease's MicroTime ("2026-12-06T01:50:00.123456Z") as seconds since the epoch."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def wall_to_monotonic(wall: float, wall_ref: float, mono_ref: float) -> float:
    """A wall-clock instant on the monotonic clock, given one instant read on both."""
    return mono_ref + (wall - wall_ref)


def cpu_seconds_from_stat(stat: str, clock_ticks: int) -> float:
    """utime + stime of a /proc/PID/stat line, in seconds. The command name (field 2) is
    in parentheses and may hold spaces or ")", so fields are counted after the last ")":
    there the state is field 3, utime field 14 and stime field 15 (proc(5))."""
    rest = stat[stat.rindex(")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / clock_ticks
