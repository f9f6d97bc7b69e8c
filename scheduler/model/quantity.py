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


# a quantity beyond 10**30 fits no int64 count (9.2e18 units, even in thousandths);
# upstream's MilliValue()/Value() overflow there, so such a value is refused, not guessed
_MAX_MAGNITUDE = 30
_MAX_DIGITS = 1000
# floor(log10) of each suffix's factor, for that check
_BINARY_LOG10 = {k: len(str(v)) - 1 for k, v in _BINARY.items()}
_DECIMAL_LOG10 = {k: len(str(v.numerator)) - len(str(v.denominator)) for k, v in _DECIMAL.items()}


def _log10_floor(num: str) -> int:
    """floor(log10(|x|)) of a non-zero decimal string "[+-]digits[.digits]"."""
    digits = num.lstrip("+-")
    whole, _, frac = digits.partition(".")
    whole = whole.lstrip("0")
    if whole:
        return len(whole) - 1
    return -(len(frac) - len(frac.lstrip("0")) + 1)


def _short(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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
        raise InvalidQuantity("", f"invalid quantity {_short(value)}")
    num = m.group("num")
    if len(num) > _MAX_DIGITS:  # Python's int() refuses longer digit strings
        raise InvalidQuantity("", f"quantity has too many digits: {_short(value)}")
    number = Fraction(num)
    if number == 0:
        return number
    suffix = m.group("suffix") or ""
    if m.group("exp"):
        exp_text = m.group("exp")[1:]
        if len(exp_text.lstrip("+-")) > _MAX_DIGITS:
            raise InvalidQuantity("", f"quantity exponent out of range: {_short(value)}")
        exponent = int(exp_text)
    elif suffix in _BINARY:
        exponent = _BINARY_LOG10[suffix]
    else:
        exponent = _DECIMAL_LOG10[suffix]
    # the scale first: 10**exponent is never computed for an exponent far out of range
    # (a 12-byte "1e999999999" would take minutes and gigabytes; the API server keeps
    # it as a scale and never expands it)
    magnitude = _log10_floor(num) + exponent
    if magnitude > _MAX_MAGNITUDE:
        raise InvalidQuantity("", f"quantity out of range: {_short(value)}")
    if magnitude < -_MAX_MAGNITUDE:
        # far below 1n: every count the scheduler makes rounds it up to 1 unit (or,
        # negative, to 0), as the exact value would
        return Fraction(1 if number > 0 else -1, 10 ** (_MAX_MAGNITUDE + 1))
    if m.group("exp"):
        return number * Fraction(10) ** exponent
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
