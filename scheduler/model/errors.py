"""Errors of the model layer.

ValueError
 +-- InvalidObject      a raw API object cannot be turned into a record
      +-- InvalidQuantity   a resource quantity string does not parse
"""

from __future__ import annotations


class InvalidObject(ValueError):
    """A raw object (pod, node, ...) is malformed. `path` names the offending field,
    `key` the object ("ns/name") when known. The caller emits an event and leaves the
    pod pending; it never crashes the informer."""

    def __init__(self, path: str, message: str, key: str = "") -> None:
        self.path = path
        self.key = key
        self.detail = message
        where = f"{key}: " if key else ""
        super().__init__(f"{where}{path}: {message}" if path else f"{where}{message}")


class InvalidQuantity(InvalidObject):
    """A quantity such as "1.5Gi" or "100m" does not parse."""
