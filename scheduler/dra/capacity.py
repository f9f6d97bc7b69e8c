"""Consumable capacity (DRAConsumableCapacity, beta and on in v1.37.2): how much of a
shareable device's capacity one allocation consumes, and whether it still fits
(k8s.io/dynamic-resource-allocation@v0.37.2/structured/internal/incubating/
consumable_capacity.go). Quantities are exact fractions; upstream's int64 and milli
arithmetic is reproduced where its rounding decides (Value() and MilliValue() round up).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from scheduler.dra.resources import CapacityRange, DeviceCapacity, RequestPolicy

_INT64_MAX = 2**63 - 1

# name -> amount, of one device
Consumed = dict[str, Fraction]


class CapacityError(Exception):
    """A request upstream cannot represent in the device's range arithmetic."""


def _value(q: Fraction) -> int:
    return math.ceil(q)  # resource.Quantity.Value rounds up


def _milli(q: Fraction) -> int:
    return math.ceil(q * 1000)  # MilliValue rounds up


def _safe_milli(q: Fraction) -> int | None:
    milli = _milli(q)
    return milli if Fraction(milli, 1000) == q else None


def _use_milli(valid_range: CapacityRange) -> bool:
    # useMilli with DRAFractionalCapacityRange on (its default in v1.37)
    for i, q in enumerate((valid_range.min, valid_range.max, valid_range.step)):
        if q is None:
            continue
        milli = _safe_milli(q)
        if milli is None:
            return False
        if i == 2 and milli < 1:
            return False
    return True


def _round_up_range(requested: Fraction, valid_range: CapacityRange) -> Fraction:
    assert valid_range.min is not None
    if requested < valid_range.min:
        return valid_range.min
    if valid_range.step is None:
        return requested
    if _use_milli(valid_range):
        requested_milli = _safe_milli(requested)
        if requested_milli is None:
            raise CapacityError(
                "capacity request cannot be represented in the device's range arithmetic: "
                f"request {requested} is not a representable milli value"
            )
        step, minimum = _milli(valid_range.step), _milli(valid_range.min)
        n = -(-(requested_milli - minimum) // step)
        if n > (_INT64_MAX - minimum) // step:
            raise CapacityError(
                "capacity request cannot be represented in the device's range arithmetic: "
                "rounding request up to the next step passes the milli-value range"
            )
        return Fraction(minimum + step * n, 1000)
    if requested > _INT64_MAX:
        raise CapacityError(
            "capacity request cannot be represented in the device's range arithmetic: "
            "request exceeds MaxInt64"
        )
    requested_int, step_int, min_int = (
        _value(requested),
        _value(valid_range.step),
        _value(valid_range.min),
    )
    added = requested_int - min_int  # >= 0: rounding up keeps the order
    n = -(-added // step_int)
    if min_int >= 0 and n > (_INT64_MAX - min_int) // step_int:
        raise CapacityError(
            "capacity request cannot be represented in the device's range arithmetic: "
            "rounding request up to the next step passes MaxInt64"
        )
    return Fraction(min_int + step_int * n)


def _consumed(requested: Fraction | None, capacity: DeviceCapacity) -> Fraction:
    """calculateConsumedCapacity."""
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range.min is not None:
        return _round_up_range(requested, policy.valid_range)
    if policy.valid_values:
        for valid in policy.valid_values:
            if requested <= valid:
                return valid
    return requested


def _violates(consumed: Fraction, policy: RequestPolicy | None) -> bool:
    """violatesPolicy. Upstream compares with the default as a struct (equal when the
    amount was the default's copy); the amount's equality is the same decision for
    every default the API server admits (it must itself be valid)."""
    if policy is None:
        return False
    if policy.default is not None and consumed == policy.default:
        return False
    if policy.valid_range is not None:
        r = policy.valid_range
        if r.max is not None and consumed > r.max:
            return True
        if r.step is not None:
            if _use_milli(r):
                requested = _safe_milli(consumed)
                if requested is None:
                    return True
                step = _milli(r.step)
                minimum = _milli(r.min) if r.min is not None else 0
            else:
                requested = _value(consumed)
                step = _value(r.step)
                minimum = _value(r.min) if r.min is not None else 0
            return (requested - minimum) % step != 0
        return False
    if policy.valid_values:
        return all(consumed != v for v in policy.valid_values)
    return False


def fits(
    current: Mapping[str, Fraction],
    requests: Mapping[str, Fraction] | None,
    capacity: Mapping[str, DeviceCapacity],
    allocating: Mapping[str, Fraction] | None,
) -> bool:
    """CmpRequestOverCapacity: the request's consumption of every capacity, added to
    what is allocated and being allocated, within the device's capacity and its policy.
    Raises CapacityError."""
    if requests and any(name not in capacity for name in requests):
        return False
    consumed: dict[str, Fraction] = {}
    for name, cap in capacity.items():
        amount = _named(name, requests, cap)
        if amount < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
        consumed[name] = amount
    for name, cap in capacity.items():
        amount = consumed[name]
        if _violates(amount, cap.request_policy):
            return False
        total = current.get(name, Fraction(0)) + amount
        if allocating and name in allocating:
            total += allocating[name]
        if total > cap.value:
            return False
    return True


def consumed_by(
    requests: Mapping[str, Fraction] | None, capacity: Mapping[str, DeviceCapacity]
) -> Consumed:
    """GetConsumedCapacityFromRequest. Raises CapacityError."""
    return {name: _named(name, requests, cap) for name, cap in capacity.items()}


def _named(
    name: str, requests: Mapping[str, Fraction] | None, capacity: DeviceCapacity
) -> Fraction:
    try:
        return _consumed(requests.get(name) if requests else None, capacity)
    except CapacityError as err:
        raise CapacityError(f'capacity "{name}": {err}') from err
