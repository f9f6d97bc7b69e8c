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
