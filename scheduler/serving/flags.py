"""The serving flags' values, checked as upstream's pflag would: Go durations ("10s",
"1m30s", "250ms") and comma-separated path lists. A bad value is a ValueError naming it."""

from __future__ import annotations

import re

__all__ = ["parse_duration", "parse_paths"]

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (time.ParseDuration: "0" alone, else number+unit parts)."""
    s = text.strip()
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {text!r} (e.g. 10s, 1m30s, 250ms)")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not s:
        raise ValueError("invalid duration '' (e.g. 10s)")
    return total


def parse_paths(text: str) -> tuple[str, ...]:
    """A comma-separated list; only a trailing * (a prefix) is allowed in a path."""
    paths = tuple(p.strip() for p in text.split(",") if p.strip())
    for p in paths:
        if "*" in p[:-1]:
            raise ValueError(f'only trailing * allowed in "{p}"')
    return paths
