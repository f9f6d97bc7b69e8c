"""The CEL half of device selectors (scheduler/dra/selector.py holds the data types and
the cache): the `device` variable as upstream's compile.go builds it, compiled programs,
and evaluation errors in upstream's words. Imported on the first compilation only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from scheduler.dra.cel_evaluator import SelectorRunner, compile_program
from scheduler.dra.cel_values import QuantityValue, cel_type_name
from scheduler.dra.selector import (
    NO_SUCH_KEY_HINT,
    AttributeValue,
    CompileError,
    Device,
    EvaluationError,
    VersionText,
)
from scheduler.dra.semver import InvalidSemver, parse_semver


class _DefaultedMap(celtypes.MapType):  # type: ignore[misc]
    """A map whose missing keys read as an empty map (compile.go's mapper with a default),
    while `in` still says false."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType()


def _split_name(name: str, driver: str) -> tuple[str, str]:
    # compile.go parseQualifiedName: the domain is before the first "/"
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute(value: AttributeValue | VersionText) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, VersionText):
        return parse_semver(value.text)
    return celtypes.StringType(value)


def device_activation(device: Device) -> dict[str, Any]:
    """The `device` variable. Raises EvaluationError for an attribute upstream cannot
    convert either (a version that does not parse)."""
    attributes: dict[str, dict[Any, Any]] = {}
    for name, value in device.attributes.items():
        domain, ident = _split_name(name, device.driver)
        try:
            converted = _attribute(value)
        except InvalidSemver as err:
            raise EvaluationError(f"attribute {name}: parse semantic version: {err}") from err
        attributes.setdefault(domain, {})[celtypes.StringType(ident)] = converted
    capacity: dict[str, dict[Any, Any]] = {}
    for name, amount in device.capacity.items():
        domain, ident = _split_name(name, device.driver)
        capacity.setdefault(domain, {})[celtypes.StringType(ident)] = QuantityValue(amount)
    return {
        "device": celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(device.driver),
                celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                    device.allow_multiple_allocations
                ),
                celtypes.StringType("attributes"): _DefaultedMap(
                    {celtypes.StringType(d): celtypes.MapType(m) for d, m in attributes.items()}
                ),
                celtypes.StringType("capacity"): _DefaultedMap(
                    {celtypes.StringType(d): celtypes.MapType(m) for d, m in capacity.items()}
                ),
            }
        )
    }


def _error_text(err: CELEvalError) -> str:
    message = str(err.args[0]) if err.args else str(err)
    details = err.args[2] if len(err.args) > 2 else None
    if message == "no such key" and details:
        message = f"no such key: {details[0]}"
    if message.startswith("no such key:"):
        return message + NO_SUCH_KEY_HINT
    if message.startswith("undeclared reference to"):
        # celpy appends its whole activation; cel-go names the function only
        return message.split(" (in activation", 1)[0]
    return message


@dataclass
class CompiledSelector:
    expression: str
    program: SelectorRunner
    # Device -> True/False, or the error text; weakly bounded by MAX_RESULTS per selector
    results: dict[int, tuple[Device, bool | str]] = field(default_factory=dict)

    def matches(self, device: Device) -> bool:
        """Whether the device matches. Raises EvaluationError with upstream's detail."""
        cached = self.results.get(id(device))
        if cached is not None and cached[0] is device:
            outcome = cached[1]
        else:
            outcome = self._evaluate(device)
            if len(self.results) >= MAX_RESULTS:
                self.results.clear()
            self.results[id(device)] = (device, outcome)
        if isinstance(outcome, str):
            raise EvaluationError(outcome)
        return outcome

    def _evaluate(self, device: Device) -> bool | str:
        try:
            activation = device_activation(device)
        except EvaluationError as err:
            return str(err)
        try:
            value = self.program.evaluate(activation)
        except CELEvalError as err:
            return _error_text(err)
        if isinstance(value, celtypes.BoolType):
            return bool(value)
        # compile.go: result.ConvertToNative(bool) fails for every other type
        kind = cel_type_name(value)
        return (
            f"CEL result of type {kind} could not be converted to bool: "
            f"type conversion error from '{kind}' to 'bool'"
        )


# results kept per selector before the table is dropped (devices of a large cluster)
MAX_RESULTS = 200_000


def compile_selector(expression: str) -> CompiledSelector:
    """Raises CompileError with upstream's text."""
    try:
        program = compile_program(expression)
    except CELParseError as err:
        raise CompileError(f"compilation failed: Syntax error: {err.args[0]}") from err
    return CompiledSelector(expression, program)
