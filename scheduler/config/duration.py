"""Go duration strings ("15s", "1m30s", "1.5h", "300ms"), as metav1.Duration in the config.

Parsing follows Go's time.ParseDuration (units ns, us/µs, ms, s, m, h; a sign; "0"; no
surrounding spaces; a value beyond time.Duration's int64 nanoseconds is "invalid duration",
as Go's overflow check - metav1.Duration's JSON decoding uses it, so upstream refuses
such a value before validation);
formatting follows time.Duration.String ("1m30s", "1h0m0s", "500ms", "0s"), so a dumped
config reads like kube-scheduler's.
"""

from __future__ import annotations

import re
from decimal import Decimal

from scheduler.config.errors import brief

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
# time.Duration is int64 nanoseconds: at most 2562047h47m16.854775807s
MAX_DURATION_NS = (1 << 63) - 1
_PART = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")  # ASCII digits, as Go


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string. Raises ValueError."""
    s = text
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
    limit = MAX_DURATION_NS + (1 if sign < 0 else 0)
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {brief(text)}")
        whole, _, frac = m.group(1).partition(".")
        if len(whole.lstrip("0")) > 20:  # more than int64 in any unit; keeps Decimal small
            total = Decimal(limit + 1)
        else:
            # digits past the 30th cannot matter at nanosecond resolution
            total += Decimal(f"{whole or 0}.{frac[:30] or 0}") * _UNIT_NS[m.group(2)]
        pos = m.end()
    if total > limit:
        raise ValueError(
            f"invalid duration {brief(text)}: beyond Go's time.Duration (about 292 years)"
        )
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
