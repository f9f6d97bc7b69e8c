from fractions import Fraction

import pytest

from scheduler.model.errors import InvalidQuantity
from scheduler.model.quantity import (
    parse_int,
    parse_milli,
    parse_quantity,
    parse_resource,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", Fraction(1)),
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(2**20)),
        ("2Gi", Fraction(2 * 2**30)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1E", Fraction(10**18)),
        ("5e-3", Fraction(5, 1000)),
        (".5", Fraction(1, 2)),
        ("+2", Fraction(2)),
        ("-1", Fraction(-1)),
        ("250u", Fraction(250, 10**6)),
        (3, Fraction(3)),
    ],
)
def test_quantity_parses_exactly(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "1Kb", "Mi", "1 Gi x", "1ii"])
def test_malformed_quantity_raises_invalid_quantity(text: str) -> None:
    with pytest.raises(InvalidQuantity):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("cpu", "100m", 100),
        ("cpu", "2", 2000),
        ("cpu", "0.1", 100),
        ("cpu", "1u", 1),  # rounded up to one millicore
        ("memory", "1Gi", 2**30),
        ("memory", "1.5", 2),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129000000),
        ("memory", "123Mi", 123 * 2**20),
        ("pods", "110", 110),
        ("example.com/gpu", "2", 2),
    ],
)
def test_resource_units(name: str, text: str, expected: int) -> None:
    assert parse_resource(name, text) == expected


def test_milli_and_int_round_up() -> None:
    assert parse_milli("1n") == 1
    assert parse_int("1m") == 1
    assert parse_int("0") == 0


# parse_fuzz once hung here: "1e999999999" (12 bytes) made parse_quantity expand
# 10**999999999 (minutes, gigabytes). Out-of-range amounts are refused from their scale.
@pytest.mark.parametrize(
    "text",
    ["1e999999999", "1E308", "1e31", "9" * 400, "12345678901234567890Ei", "1e" + "9" * 2000],
)
def test_amounts_beyond_any_count_are_refused_without_expanding_them(text: str) -> None:
    with pytest.raises(InvalidQuantity, match="out of range"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("1e-999999", 1, 1),
        ("-1e-999999", 0, 0),
        ("0e99999999999", 0, 0),
        ("9e30", 9 * 10**33, 9 * 10**30),
    ],
)
def test_amounts_at_the_edges_of_the_range_keep_their_rounding(
    text: str, milli: int, units: int
) -> None:
    assert parse_milli(text) == milli
    assert parse_int(text) == units


def test_a_mantissa_with_too_many_digits_is_refused() -> None:
    with pytest.raises(InvalidQuantity, match="too many digits"):
        parse_quantity("1" * 2000)
