"""Device selectors: a CEL expression of a DeviceClass or a request, compiled once and
evaluated against devices, as upstream's cel package does it
(k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile.go DeviceMatches, cache.go).

What a selector sees is `device`: `driver`, `allowMultipleAllocations` (declared since
DRAConsumableCapacity, on by default in v1.37), `attributes` and `capacity`, each a map
from domain to a map from identifier to value. An attribute or capacity name without a
domain belongs to the driver's. Looking up a domain the device does not have yields an
empty map, not an error (upstream's mapper with a default), so `has()` and `in` say false
and only a missing identifier errs ("no such key: x").

The CEL engine (cel-python, its grammar and libraries: tenths of a second to import)
loads on the first compilation (selector_cache.py, cel_selector.py), so a scheduler
that never sees a selector does not pay for it.

Results are cached per (expression, device): a selector's result depends on nothing but
the device's own fields, and a device is immutable once its ResourceSlice is read (a new
slice revision is new Device objects). Errors are upstream's words where the evaluator
can know them (docs/fidelity.md lists the rest).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

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
