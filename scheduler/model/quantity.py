"""Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity).

Grammar: a signed decimal number followed by an optional suffix: a binary SI suffix
(Ki, Mi, Gi, Ti, Pi, Ei), a decimal SI suffix (n, u, m, "", k, M, G, T, P, E) or a decimal
exponent (e3, E-2). Values are parsed exactly (Fraction) and rounded UP to the unit the
scheduler counts in, as upstream's MilliValue()/Value() do: cpu in millicores, every
other resource in integer units.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from scheduler.model.errors import InvalidQuantity

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity. Raises InvalidQuantity."""
    if isinstance(value, bool):
        raise InvalidQuantity("", f"quantity must be a string or number, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidQuantity("", f"quantity is not finite: {value!r}")
        return Fraction(value)
    if not isinstance(value, str):
        raise InvalidQuantity("", f"quantity must be a string or number, got {value!r}")
    m = _RE.match(value.strip())
    if m is None:
        raise InvalidQuantity("", f"invalid quantity {value!r}")
    number = Fraction(m.group("num"))
    if m.group("exp"):
        return number * Fraction(10) ** int(m.group("exp")[1:])
    suffix = m.group("suffix") or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def parse_milli(value: str | int | float) -> int:
    """Quantity in thousandths, rounded up (cpu: "100m" -> 100, "1.5" -> 1500)."""
    return _ceil(parse_quantity(value) * 1000)


def parse_int(value: str | int | float) -> int:
    """Quantity in whole units, rounded up ("1Ki" -> 1024, "1.5" -> 2)."""
    return _ceil(parse_quantity(value))


def parse_resource(name: str, value: str | int | float) -> int:
    """A resource amount in the unit the scheduler counts it: cpu in millicores,
    everything else in integer units."""
    return parse_milli(value) if name == CPU else parse_int(value)


def format_resource(name: str, amount: int) -> str:
    """Human form for messages and logs ("1500m", "2Gi", "3")."""
    if name == CPU:
        return f"{amount}m"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)
