"""Pure numbers: percentiles, medians, throughput, and the per-run figures computed from
what the watch recorded. No I/O, so it is unit-tested exactly."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks
    (numpy's default method); None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return xs[lo]
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Iterable[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return percentile(xs, 50) if xs else None


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return num / den


def throughput(starts: Sequence[float], ends: Sequence[float]) -> float | None:
    """Pods per second from the first start (create sent) to the last end (seen bound)."""
    if not starts or not ends:
        return None
    span = max(ends) - min(starts)
    return len(ends) / span if span > 0 else None


def latency_summary(latencies: Sequence[float]) -> dict[str, float | None]:
    return {
        "p50": percentile(latencies, 50),
        "p90": percentile(latencies, 90),
        "p99": percentile(latencies, 99),
        "max": max(latencies) if latencies else None,
    }


def pod_figures(created: Mapping[str, float], bound: Mapping[str, float]) -> dict[str, Any]:
    """Figures for one group of pods: created = name -> monotonic time the create was
    sent; bound = name -> monotonic time the watch first saw it bound."""
    names = [n for n in created if n in bound]
    lat = [bound[n] - created[n] for n in names]
    return {
        "created": len(created),
        "bound": len(names),
        "complete": bool(created) and len(names) == len(created),
        "throughput": throughput([created[n] for n in created], [bound[n] for n in names]),
        "latency_s": latency_summary(lat),
    }


def bind_rate(bound_times: Sequence[float]) -> float | None:
    """Pods per second between the first and the last bind seen (the ceiling, whose pods
    all exist before binding starts)."""
    if len(bound_times) < 2:
        return None
    span = max(bound_times) - min(bound_times)
    return (len(bound_times) - 1) / span if span > 0 else None


def victims_per_preemptor(
    preemptor_nodes: Mapping[str, str], victim_nodes: Iterable[str]
) -> dict[str, float | int | None]:
    """Victims are charged to the preemptor bound to the victim's node (a node holds at
    most one preemptor in these workloads: 3000m of 4 CPU)."""
    per_node: dict[str, int] = {}
    for node in victim_nodes:
        per_node[node] = per_node.get(node, 0) + 1
    counts = [per_node.get(node, 0) for node in preemptor_nodes.values()]
    total = sum(per_node.values())
    return {
        "total": total,
        "preemptors_bound": len(counts),
        "mean": (sum(counts) / len(counts)) if counts else None,
        "max": max(counts) if counts else None,
        "unattributed": total - sum(counts),
    }


def timeline(times: Sequence[float], origin: float, step: float = 1.0) -> list[tuple[float, int]]:
    """Cumulative count of events per `step` seconds after `origin` (for plots)."""
    if not times:
        return []
    end = max(times) - origin
    out = []
    xs = sorted(t - origin for t in times)
    i = 0
    t = 0.0
    while t <= end + step:
        while i < len(xs) and xs[i] <= t:
            i += 1
        out.append((round(t, 3), i))
        t += step
    return out


# ----- the pinned suite ---------------------------------------------------------------------
def value_at(series: Sequence[tuple[float, float]], t: float) -> float | None:
    """A cumulative counter sampled as (time, value), read at time t by linear
    interpolation between the samples around it (clamped to the first/last sample)."""
    if not series:
        return None
    if t <= series[0][0]:
        return series[0][1]
    if t >= series[-1][0]:
        return series[-1][1]
    lo, hi = 0, len(series) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if series[mid][0] <= t:
            lo = mid
        else:
            hi = mid
    (t0, v0), (t1, v1) = series[lo], series[hi]
    if t1 == t0:
        return v1
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def window_figures(
    shape: str,
    started: float,
    created: Mapping[str, float],
    bound: Mapping[str, float],
    cpu_series: Sequence[tuple[float, float]],
    first_write: float | None = None,
    also_bound: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Throughput, create-to-bind latency and CPU per bound pod of one pinned run.

    drain (every measured pod existed before the contender started at `started`):
      window = first bind .. last bind; pods/s = (bound - 1) / window (the first bind
      opens the window, as for the ceiling); CPU per pod = CPU in the window / (bound -
      1); latency = bind seen - contender start (no pod waited for its create).
      Start-up (exec, informer sync, the first cycle) is reported apart: `startup_s`
      and `startup_cpu_s`, from the contender's start to the window's opening.
      `first_write`: when the contender wrote something the harness saw before its
      first bind (a preemption's first victim deletion), the window opens there
      instead, and every bind is inside it: pods/s = bound / window, CPU per pod = CPU
      in the window / bound. Otherwise the work of deciding preemptions before the
      first bind (upstream decides them all first) would count as start-up.
    `also_bound`: other pods the contender bound (PreemptionAsync's preemptors, created
    at a fixed rate for as long as the run lasts): those bound inside the window are
    counted (`also_bound_in_window`) and `cpu_ms_per_any_bound_pod` divides the
    window's CPU by every pod bound in it.
    arrival (pods created at a fixed rate after the contender had bound a warm-up pod):
      window = first create .. last bind; pods/s = bound / window; CPU per pod = CPU in
      the window / bound; latency = bind seen - create sent.
    """
    if shape not in ("drain", "arrival"):
        raise ValueError(f"unknown shape {shape!r}")
    names = [n for n in created if n in bound]
    times = sorted(bound[n] for n in names)
    out: dict[str, Any] = {
        "created": len(created),
        "bound": len(names),
        "complete": bool(created) and len(names) == len(created),
        "throughput": None,
        "latency_s": latency_summary([]),
        "window_s": None,
        "cpu_s_window": None,
        "cpu_ms_per_pod": None,
        "startup_s": None,
        "startup_cpu_s": None,
        "window_opened_by": None,
    }
    if not times:
        return out
    if shape == "drain":
        lat = [bound[n] - started for n in names]
        t0, t1, pods = times[0], times[-1], len(times) - 1
        out["window_opened_by"] = "first bind"
        if first_write is not None and started <= first_write < t0:
            t0, pods = first_write, len(times)
            out["window_opened_by"] = "first write"
        out["startup_s"] = t0 - started
        out["startup_cpu_s"] = value_at(cpu_series, t0)
    else:
        lat = [bound[n] - created[n] for n in names]
        t0, t1, pods = min(created.values()), times[-1], len(times)
        out["window_opened_by"] = "first create"
    out["latency_s"] = latency_summary(lat)
    span = t1 - t0
    out["window_s"] = span
    if span > 0 and pods > 0:
        out["throughput"] = pods / span
    extra = 0
    if also_bound is not None:
        extra = sum(1 for t in also_bound.values() if t0 <= t <= t1)
        out["also_bound_in_window"] = extra
        out["cpu_ms_per_any_bound_pod"] = None
    c0, c1 = value_at(cpu_series, t0), value_at(cpu_series, t1)
    if c0 is not None and c1 is not None:
        out["cpu_s_window"] = c1 - c0
        if pods > 0:
            out["cpu_ms_per_pod"] = (c1 - c0) * 1000.0 / pods
            if also_bound is not None:
                out["cpu_ms_per_any_bound_pod"] = (c1 - c0) * 1000.0 / (pods + extra)
    return out
