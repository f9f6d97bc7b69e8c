"""The error every configuration problem raises: it names the offending field, on one line.

Values from the file are echoed through ``brief`` (a bounded repr), and the message itself
is made printable and capped, so no input - a 1 MiB string, a key with newlines, an
integer of ten thousand digits - can turn the one-line error into something else.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

MAX_FIELD_CHARS = 200
MAX_DETAIL_CHARS = 400


def one_line(text: str, limit: int) -> str:
    """Printable, single line, at most about `limit` characters."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit * 2])
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def _int_text(v: int) -> str:
    # str() of a huge int is slow and refused past 4300 digits (sys.int_info); say its size
    if v.bit_length() <= 128:
        return str(v)
    return f"{'-' if v < 0 else ''}<an integer of {v.bit_length()} bits>"


def brief(value: Any, limit: int = 60, *, quote: bool = True) -> str:
    """A bounded, printable rendering of a value read from the file."""
    if isinstance(value, bool) or value is None:
        text = repr(value)
    elif isinstance(value, int):
        text = _int_text(value)
    elif isinstance(value, str):
        text = repr(value[: limit + 1]) if quote else value[: limit + 1]
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, list | tuple | Mapping | set | frozenset):
        # their size, never their (possibly huge, alias-expanded) contents
        n = len(value)
        return f"({n} {'entry' if n == 1 else 'entries'})"
    elif isinstance(value, bytes | bytearray):
        return f"({len(value)} bytes)"
    else:  # a timestamp, for instance
        text = str(value)
    return one_line(text, limit)


# the first entry whose type matches names the value (bool before int: a bool is an int)
_TYPE_NAMES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (type(None), "null"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "list"),
    (Mapping, "object"),
    ((bytes, bytearray), "binary"),
    (dt.date, "timestamp"),
)


def type_name(v: Any) -> str:
    """A value's type in the file's words (as upstream's decoding errors speak)."""
    for types, name in _TYPE_NAMES:
        if isinstance(v, types):
            return name
    return type(v).__name__


class ConfigError(ValueError):
    """A configuration value is invalid. `field` is a dotted path such as
    `profiles[0].pluginConfig[1].args.scoringStrategy.type` ("" when the problem is the
    file itself: unreadable, not UTF-8, not YAML)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = one_line(field, MAX_FIELD_CHARS)
        self.detail = one_line(message, MAX_DETAIL_CHARS)
        super().__init__(f"{self.field}: {self.detail}" if self.field else self.detail)
