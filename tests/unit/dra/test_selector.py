"""scheduler.dra.selector on upstream's CEL selector cases (selector_cases.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from scheduler.dra.selector import (
    NO_SUCH_KEY_HINT,
    CompileError,
    Device,
    EvaluationError,
    VersionText,
)
from scheduler.dra.selector_cache import SelectorCache
from scheduler.model.quantity import parse_quantity
from tests.unit.dra.selector_cases import CASES, SelectorCase


def device_of(case: SelectorCase) -> Device:
    attributes: dict[str, bool | int | str | VersionText] = {}
    for name, value in case.attributes.items():
        kind, raw = next(iter(value.items()))
        attributes[name] = VersionText(str(raw)) if kind == "version" else raw  # type: ignore[assignment]
    return Device(
        driver=case.driver,
        attributes=attributes,
        capacity={name: parse_quantity(text) for name, text in case.capacity.items()},
        allow_multiple_allocations=bool(case.allow_multiple_allocations),
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_upstream_case(case: SelectorCase) -> None:
    cache = SelectorCache()
    if case.expect_compile_error:
        # upstream's type checker refuses these at compile time, and so does the API
        # server when the object is written: no stored object carries one. celpy has no
        # type checker, so ours fails when evaluating; either way the device is not
        # allocated and the claim's allocation errs, as upstream's would
        with pytest.raises((CompileError, EvaluationError)):
            cache.get(case.expression).matches(device_of(case))
        return
    selector = cache.get(case.expression)
    if case.expect_match_error:
        with pytest.raises(EvaluationError) as err:
            selector.matches(device_of(case))
        assert case.expect_match_error in str(err.value)
        return
    assert selector.matches(device_of(case)) is case.expect_match


def test_no_such_key_carries_upstreams_hint() -> None:
    selector = SelectorCache().get('device.attributes["dra.example.com"].model == "x"')
    with pytest.raises(EvaluationError) as err:
        selector.matches(Device(driver="dra.example.com"))
    assert str(err.value) == "no such key: model" + NO_SUCH_KEY_HINT


def test_non_bool_result_names_its_type() -> None:
    selector = SelectorCache().get('device.attributes["d"].name')
    with pytest.raises(EvaluationError) as err:
        selector.matches(Device(driver="d", attributes={"name": "fish"}))
    assert str(err.value).startswith("CEL result of type string could not be converted to bool")


def test_unparsable_version_attribute_is_an_evaluation_error() -> None:
    selector = SelectorCache().get("true")
    with pytest.raises(EvaluationError) as err:
        selector.matches(Device(driver="d", attributes={"v": VersionText("1.0")}))
    assert (
        str(err.value) == "attribute v: parse semantic version: No Major.Minor.Patch elements found"
    )


def test_syntax_error_is_a_compile_error() -> None:
    with pytest.raises(CompileError) as err:
        SelectorCache().get("device.driver ==")
    assert str(err.value).startswith("compilation failed: Syntax error")


def test_results_are_cached_per_device_object() -> None:
    selector = SelectorCache().get('device.capacity["d"].mem.compareTo(quantity("1Gi")) >= 0')
    big = Device(driver="d", capacity={"mem": Fraction(2**31)})
    small = Device(driver="d", capacity={"mem": Fraction(2**29)})
    assert selector.matches(big) and not selector.matches(small)
    assert selector.matches(big)
    assert len(selector.results) == 2
    # an equal but new device (a new slice revision) is evaluated on its own
    assert selector.matches(Device(driver="d", capacity={"mem": Fraction(2**31)}))
    assert len(selector.results) == 3


def test_cache_drops_the_least_recently_used() -> None:
    cache = SelectorCache(max_entries=2)
    first = cache.get("true")
    cache.get("false")
    assert cache.get("true") is first
    cache.get("1 == 1")
    assert len(cache) == 2
    assert cache.get("true") is first  # kept: used after "false"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("optional.of(1).orValue(2) == 1", True),
        ("optional.none().orValue(2) == 2", True),
        ("optional.none().hasValue()", False),
        ('optional.ofNonZeroValue("").hasValue()', False),
        ('device.attributes["d"].?a.or(optional.of(3)).value() == 3', True),
        ('device.attributes["d"].?n.orValue(0) == 7', True),
        ('device.attributes["x"].?n.hasValue()', False),
        ("cel.bind(x, 2, cel.bind(y, 3, x * y == 6))", True),
        ("[1, 2, 3].exists(i, cel.bind(j, i * 2, j == 4))", True),
        ('"a,b,c".split(",").size() == 3', True),
        ('"abc".indexOf("c") == 2 && "abcabc".lastIndexOf("abc") == 3', True),
        ('"  x ".trim() == "x" && "abc".substring(1) == "bc"', True),
        ('["b", "a"].join("-") == "b-a"', True),
        ('"a1b22".findAll("[0-9]+") == ["1", "22"] && "xyz".find("y") == "y"', True),
        ('quantity("1.5").isInteger() || quantity("2k").asInteger() == 2000', True),
        ('quantity("1Gi").add(1).compareTo(quantity("1073741825")) == 0', True),
        ('isQuantity("1Gi") && !isQuantity("1 Gi")', True),
        ('semver("1.2.3").major() == 1 && semver("v1.2", true).minor() == 2', True),
        ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
        ("[1, 2, 3].isSorted() && [1, 2, 3].sum() == 6", True),
    ],
)
def test_kubernetes_library_and_syntax(expression: str, expected: bool) -> None:
    device = Device(driver="d", attributes={"n": 7})
    assert SelectorCache().get(expression).matches(device) is expected


def test_quantity_parse_error_is_upstreams() -> None:
    with pytest.raises(EvaluationError) as err:
        SelectorCache().get('quantity("x").sign() == 1').matches(Device(driver="d"))
    assert str(err.value).startswith("quantities must match the regular expression")


def test_optional_none_dereference() -> None:
    with pytest.raises(EvaluationError) as err:
        SelectorCache().get("optional.none().value() == 1").matches(Device(driver="d"))
    assert str(err.value) == "optional.none() dereference"
