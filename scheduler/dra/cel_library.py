"""Kubernetes' CEL libraries as celpy functions: what a DRA selector may call beyond the
language's own functions.

Upstream's environment is the API server's base environment at the compatibility version
(k8s.io/apiserver@v0.37.2/pkg/cel/environment/base.go) plus `cel.bind`
(k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile.go). Here: the quantity library
(library/quantity.go), the semver library (library/semverlib.go), cel-go's string
extension functions, the lists library (library/lists.go) and the regex library
(library/regex.go). Optional values and `cel.bind` are syntax, handled by the evaluator
(cel_evaluator.py). Not here yet: the URL, IP, CIDR, format and authz libraries, the
sets and math extensions; a selector calling them fails to evaluate with "undeclared
reference" (docs/plans/dra.md).

A method call `x.f(y)` reaches celpy as `f(x, y)`, so one function serves every receiver
type and dispatches on it, returning cel-go's "no such overload" for the others.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import re2  # type: ignore[import-untyped]
from celpy import celtypes
from celpy.evaluation import CELEvalError

from scheduler.dra.cel_values import QuantityValue, Semver
from scheduler.dra.semver import InvalidSemver, normalize_and_parse, parse_semver
from scheduler.model.errors import InvalidQuantity
from scheduler.model.quantity import parse_quantity

# apimachinery's resource.ParseQuantity error for text it cannot read (ErrFormatWrong)
QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_INT64 = (-(2**63), 2**63 - 1)


def no_such_overload() -> CELEvalError:
    return CELEvalError("no such overload", TypeError, ())


def cel_error(message: str) -> CELEvalError:
    return CELEvalError(message, ValueError, ())


def _quantity(text: Any) -> Any:
    if not isinstance(text, str):
        return no_such_overload()
    try:
        return QuantityValue(parse_quantity(str(text)))
    except InvalidQuantity:
        return cel_error(QUANTITY_FORMAT_ERROR)


def _is_quantity(text: Any) -> Any:
    if not isinstance(text, str):
        return no_such_overload()
    try:
        parse_quantity(str(text))
    except InvalidQuantity:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _semver(text: Any, normalize: Any = False) -> Any:
    if not isinstance(text, str) or not isinstance(normalize, int):
        return no_such_overload()
    try:
        return normalize_and_parse(str(text)) if normalize else parse_semver(str(text))
    except InvalidSemver as err:
        return cel_error(str(err))


def _is_semver(text: Any, normalize: Any = False) -> Any:
    result = _semver(text, normalize)
    if isinstance(result, CELEvalError) and result.args[1] is TypeError:
        return result
    return celtypes.BoolType(isinstance(result, Semver))


def _ordered(a: Any, b: Any) -> int | None:
    if isinstance(a, QuantityValue) and isinstance(b, QuantityValue):
        return a.compare(b)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    return None


def _is_greater_than(a: Any, b: Any) -> Any:
    order = _ordered(a, b)
    return no_such_overload() if order is None else celtypes.BoolType(order > 0)


def _is_less_than(a: Any, b: Any) -> Any:
    order = _ordered(a, b)
    return no_such_overload() if order is None else celtypes.BoolType(order < 0)


def _compare_to(a: Any, b: Any) -> Any:
    order = _ordered(a, b)
    return no_such_overload() if order is None else celtypes.IntType(order)


def _quantity_operand(value: Any) -> Fraction | None:
    if isinstance(value, QuantityValue):
        return value.value
    if isinstance(value, int) and not isinstance(value, celtypes.BoolType):
        return Fraction(int(value))
    return None


def _add(a: Any, b: Any) -> Any:
    other = _quantity_operand(b)
    if not isinstance(a, QuantityValue) or other is None:
        return no_such_overload()
    return QuantityValue(a.value + other)


def _sub(a: Any, b: Any) -> Any:
    other = _quantity_operand(b)
    if not isinstance(a, QuantityValue) or other is None:
        return no_such_overload()
    return QuantityValue(a.value - other)


def _sign(q: Any) -> Any:
    if not isinstance(q, QuantityValue):
        return no_such_overload()
    return celtypes.IntType((q.value > 0) - (q.value < 0))


def _fits_int64(q: QuantityValue) -> bool:
    return q.value.denominator == 1 and _INT64[0] <= q.value.numerator <= _INT64[1]


def _is_integer(q: Any) -> Any:
    if not isinstance(q, QuantityValue):
        return no_such_overload()
    return celtypes.BoolType(_fits_int64(q))


def _as_integer(q: Any) -> Any:
    if not isinstance(q, QuantityValue):
        return no_such_overload()
    if not _fits_int64(q):
        return cel_error("cannot convert value to integer")
    return celtypes.IntType(q.value.numerator)


def _as_approximate_float(q: Any) -> Any:
    if not isinstance(q, QuantityValue):
        return no_such_overload()
    return celtypes.DoubleType(float(q.value))


def _semver_part(index: int) -> Callable[[Any], Any]:
    def part(v: Any) -> Any:
        if not isinstance(v, Semver):
            return no_such_overload()
        return celtypes.IntType((v.major, v.minor, v.patch)[index])

    return part


# --- cel-go's string extensions (ext.Strings) and the lists library -------------------


def _code_points(s: str) -> list[str]:
    return list(s)


def _char_at(s: Any, i: Any) -> Any:
    if not isinstance(s, str) or not isinstance(i, int):
        return no_such_overload()
    if i < 0 or i > len(s):
        return cel_error(f"index out of range: {int(i)}")
    return celtypes.StringType(s[i] if i < len(s) else "")


def _index_of(container: Any, item: Any, start: Any = 0) -> Any:
    if isinstance(container, str) and isinstance(item, str) and isinstance(start, int):
        if start < 0 or start > len(container):
            return cel_error(f"index out of range: {int(start)}")
        return celtypes.IntType(container.find(item, start))
    if isinstance(container, list):
        for index, value in enumerate(container):
            if type(value) is type(item) and value == item:
                return celtypes.IntType(index)
        return celtypes.IntType(-1)
    return no_such_overload()


def _last_index_of(container: Any, item: Any, end: Any = None) -> Any:
    if isinstance(container, str) and isinstance(item, str):
        if end is None:
            return celtypes.IntType(container.rfind(item))
        if not isinstance(end, int) or end < 0 or end >= max(len(container), 1):
            return cel_error(f"index out of range: {end}")
        return celtypes.IntType(container.rfind(item, 0, int(end) + len(item)))
    if isinstance(container, list):
        for index in range(len(container) - 1, -1, -1):
            value = container[index]
            if type(value) is type(item) and value == item:
                return celtypes.IntType(index)
        return celtypes.IntType(-1)
    return no_such_overload()


def _lower_ascii(s: Any) -> Any:
    if not isinstance(s, str):
        return no_such_overload()
    return celtypes.StringType("".join(c.lower() if c.isascii() else c for c in s))


def _upper_ascii(s: Any) -> Any:
    if not isinstance(s, str):
        return no_such_overload()
    return celtypes.StringType("".join(c.upper() if c.isascii() else c for c in s))


def _replace(s: Any, old: Any, new: Any, limit: Any = -1) -> Any:
    if not all(isinstance(x, str) for x in (s, old, new)) or not isinstance(limit, int):
        return no_such_overload()
    return celtypes.StringType(str(s).replace(str(old), str(new), int(limit)))


def _split(s: Any, sep: Any, limit: Any = -1) -> Any:
    if not isinstance(s, str) or not isinstance(sep, str) or not isinstance(limit, int):
        return no_such_overload()
    if limit == 0:
        return celtypes.ListType([])
    if sep == "":
        parts = _code_points(str(s))
        if limit > 0 and len(parts) > limit:
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    else:
        parts = str(s).split(str(sep), int(limit) - 1 if limit > 0 else -1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(s: Any, start: Any, end: Any = None) -> Any:
    if not isinstance(s, str) or not isinstance(start, int):
        return no_such_overload()
    stop = len(s) if end is None else end
    if not isinstance(stop, int):
        return no_such_overload()
    if start < 0 or start > len(s):
        return cel_error(f"index out of range: {int(start)}")
    if stop < 0 or stop > len(s):
        return cel_error(f"index out of range: {int(stop)}")
    if start > stop:
        return cel_error(f"invalid substring range. start: {int(start)}, end: {int(stop)}")
    return celtypes.StringType(s[start:stop])


def _trim(s: Any) -> Any:
    if not isinstance(s, str):
        return no_such_overload()
    return celtypes.StringType(str(s).strip())


def _join(items: Any, sep: Any = "") -> Any:
    if not isinstance(items, list) or not isinstance(sep, str):
        return no_such_overload()
    if not all(isinstance(x, str) for x in items):
        return no_such_overload()
    return celtypes.StringType(str(sep).join(str(x) for x in items))


def _reverse(s: Any) -> Any:
    if not isinstance(s, str):
        return no_such_overload()
    return celtypes.StringType(str(s)[::-1])


def _is_sorted(items: Any) -> Any:
    if not isinstance(items, list):
        return no_such_overload()
    try:
        return celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(items)))
    except TypeError:
        return no_such_overload()


def _sum(items: Any) -> Any:
    if not isinstance(items, list):
        return no_such_overload()
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _max(items: Any) -> Any:
    if not isinstance(items, list):
        return no_such_overload()
    if not items:
        return cel_error("max of empty list is undefined")  # library/lists.go
    return max(items)


# --- the regex library: RE2, as cel-go's matches() ------------------------------------


def _find(s: Any, pattern: Any) -> Any:
    if not isinstance(s, str) or not isinstance(pattern, str):
        return no_such_overload()
    try:
        match = re2.search(str(pattern), str(s))
    except re2.error as err:
        return cel_error(f"error parsing regexp: {err}")
    return celtypes.StringType(match.group(0) if match else "")


def _find_all(s: Any, pattern: Any, limit: Any = -1) -> Any:
    if not isinstance(s, str) or not isinstance(pattern, str) or not isinstance(limit, int):
        return no_such_overload()
    try:
        found = [m.group(0) for m in re2.finditer(str(pattern), str(s))]
    except re2.error as err:
        return cel_error(f"error parsing regexp: {err}")
    if limit >= 0:
        found = found[:limit]
    return celtypes.ListType([celtypes.StringType(x) for x in found])


FUNCTIONS: dict[str, Callable[..., Any]] = {
    # quantity (library/quantity.go)
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": _sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "add": _add,
    "sub": _sub,
    # quantity and semver
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "compareTo": _compare_to,
    # semver (library/semverlib.go)
    "semver": _semver,
    "isSemver": _is_semver,
    "major": _semver_part(0),
    "minor": _semver_part(1),
    "patch": _semver_part(2),
    # strings (cel-go ext.Strings)
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "reverse": _reverse,
    # lists (library/lists.go)
    "isSorted": _is_sorted,
    "sum": _sum,
    "max": _max,
    # regex (library/regex.go)
    "find": _find,
    "findAll": _find_all,
}
