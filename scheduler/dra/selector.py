"""Device selectors: a CEL expression of a DeviceClass or a request, compiled once and
evaluated against devices, as upstream's cel package does it
(k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile.go DeviceMatches, cache.go).

What a selector sees is `device`: `driver`, `allowMultipleAllocations` (declared since
DRAConsumableCapacity, on by default in v1.37), `attributes` and `capacity`, each a map
from domain to a map from identifier to value. An attribute or capacity name without a
domain belongs to the driver's. Looking up a domain the device does not have yields an
empty map, not an error (upstream's mapper with a default), so `has()` and `in` say false
and only a missing identifier errs ("no such key: x").

Results are cached per (expression, device): a selector's result depends on nothing but
the device's own fields, and a device is immutable once its ResourceSlice is read (a new
slice revision is new Device objects). Errors are upstream's words where the evaluator
can know them (docs/fidelity.md lists the rest).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from scheduler.dra.cel_evaluator import SelectorRunner, compile_program
from scheduler.dra.cel_values import QuantityValue, cel_type_name
from scheduler.dra.semver import InvalidSemver, parse_semver

# cel/errors.go EnhanceRuntimeError: what upstream appends to a "no such key" error
NO_SUCH_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the "
    "check with has() for optional fields"
)

# compiled expressions kept. Upstream's plugin keeps the 10 most recent (dynamicresources.go
# celCache); here each one also holds its results per device, and a celpy compilation
# costs milliseconds, so more are kept: the decision is the same either way
MAX_COMPILED = 10_000

# a device attribute: bool, int, str, or a version string (kept as text, parsed when read)
AttributeValue = bool | int | str


@dataclass(frozen=True)
class VersionText:
    """An attribute's `version` value: parsed as a semantic version when a selector
    reads it (an unparsable one is an evaluation error, as upstream)."""

    text: str


@dataclass(frozen=True, eq=False)
class Device:
    """The part of a device selectors see. Identity is the object: results are cached
    per Device, so a changed slice must give new Device objects."""

    driver: str
    attributes: Mapping[str, AttributeValue | VersionText] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    allow_multiple_allocations: bool = False


class SelectorError(Exception):
    """A selector failed to compile or to evaluate; the message is upstream's detail."""


class CompileError(SelectorError):
    pass


class EvaluationError(SelectorError):
    pass


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


class SelectorCache:
    """Compiled selectors by expression, least recently used dropped past MAX_COMPILED
    (cel/cache.go). A failed compilation is not kept, as upstream."""

    def __init__(self, max_entries: int = MAX_COMPILED) -> None:
        self._max = max_entries
        self._compiled: OrderedDict[str, CompiledSelector] = OrderedDict()

    def get(self, expression: str) -> CompiledSelector:
        """Raises CompileError."""
        found = self._compiled.get(expression)
        if found is not None:
            self._compiled.move_to_end(expression)
            return found
        try:
            program = compile_program(expression)
        except CELParseError as err:
            raise CompileError(f"compilation failed: Syntax error: {err.args[0]}") from err
        compiled = CompiledSelector(expression, program)
        self._compiled[expression] = compiled
        if len(self._compiled) > self._max:
            self._compiled.popitem(last=False)
        return compiled

    def __len__(self) -> int:
        return len(self._compiled)
