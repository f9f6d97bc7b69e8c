"""Go duration strings ("15s", "1m30s", "1.5h", "300ms"), as metav1.Duration in the config.

Parsing follows Go's time.ParseDuration (units ns, us/µs, ms, s, m, h; a sign; "0");
formatting follows time.Duration.String ("1m30s", "1h0m0s", "500ms", "0s"), so a dumped
config reads like kube-scheduler's.
"""

from __future__ import annotations

import re
from decimal import Decimal

_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string. Raises ValueError."""
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    sign = 1
    if s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0.0
    pos = 0
    total = Decimal(0)
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {text!r}")
        total += Decimal(m.group(1)) * _UNIT_NS[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise ValueError(f"invalid duration {text!r}")
    return sign * float(total / Decimal(1_000_000_000))


def _frac(value: int, digits: int) -> str:
    """value / 10**digits without trailing zeros ("1.5", "2")."""
    whole, rest = divmod(value, 10**digits)
    if not rest:
        return str(whole)
    return f"{whole}.{str(rest).rjust(digits, '0').rstrip('0')}"


def format_duration(seconds: float) -> str:
    """Go's time.Duration.String for these seconds (rounded to nanoseconds)."""
    ns = round(Decimal(repr(seconds)) * 1_000_000_000)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_frac(ns, 3)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_frac(ns, 6)}ms"
    hours, ns = divmod(ns, 3_600_000_000_000)
    minutes, ns = divmod(ns, 60_000_000_000)
    secs = _frac(ns, 9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return f"{sign}{secs}"
