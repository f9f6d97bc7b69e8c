"""The values Kubernetes' CEL environment adds to the language, for celpy: Quantity (the
quantity library), Semver (the semver library) and Optional (cel-go's optional types,
part of Kubernetes' base environment: k8s.io/apiserver@v0.37.2/pkg/cel/environment/base.go).

celpy evaluates with Python values; these classes are the values of the three types, and
their names are the type names cel-go prints in its messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from scheduler.dra.semver import Semver

__all__ = ["CEL_TYPE_NAMES", "OptionalValue", "QuantityValue", "Semver", "cel_type_name"]


@dataclass(frozen=True)
class QuantityValue:
    """A resource.Quantity: its exact value (apimachinery compares quantities by value)."""

    value: Fraction

    def compare(self, other: QuantityValue) -> int:
        return (self.value > other.value) - (self.value < other.value)


@dataclass(frozen=True)
class OptionalValue:
    """cel-go's optional: `present` False is optional.none()."""

    present: bool
    value: object = None


NONE = OptionalValue(False)

# Python class name (celpy's and ours) -> cel-go's type name, for messages
CEL_TYPE_NAMES = {
    "BoolType": "bool",
    "IntType": "int",
    "UintType": "uint",
    "DoubleType": "double",
    "StringType": "string",
    "BytesType": "bytes",
    "ListType": "list",
    "MapType": "map",
    "DefaultedMap": "map",
    "NoneType": "null_type",
    "TimestampType": "google.protobuf.Timestamp",
    "DurationType": "google.protobuf.Duration",
    "QuantityValue": "kubernetes.Quantity",
    "Semver": "kubernetes.Semver",
    "OptionalValue": "optional_type",
}


def cel_type_name(value: object) -> str:
    name = type(value).__name__
    return CEL_TYPE_NAMES.get(name, name)
