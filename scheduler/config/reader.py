"""Strict reading of the decoded document: unknown fields and wrong types are errors.

kube-scheduler decodes its config strictly (unknown or duplicate fields fail: the v1
scheme's codec factory is built with serializer.EnableStrict, see
pkg/scheduler/apis/config/scheme); so do we, and every error names the dotted field path
(``profiles[0].plugins.score.enabled[2].name``). Integers must fit their Go type
(int32/int64) as upstream's decoding demands. (The YAML itself is read by safe_yaml.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from scheduler.config.duration import parse_duration
from scheduler.config.errors import ConfigError, brief, type_name
from scheduler.config.k8s_names import qualified_name

# Go's integer types of the v1 API (k8s.io/kube-scheduler/config/v1/types*.go): a number
# outside its field's type fails decoding upstream ("cannot unmarshal number ... into Go
# struct field ... of type int32"), before any validation.
INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
# float32 (clientConnection.qps): the largest finite value
FLOAT32_MAX = 3.4028234663852886e38


class Fields:
    """Typed getters over one raw mapping; ``done()`` rejects fields nobody read.

    With `known` (the object's fields) any other field is refused at once, before any
    value is looked at, as upstream's strict decoding fails before validation runs (a
    mis-cased "Type" is reported as the unknown field it is, not as a missing "type").
    Plugin args objects (`args=True`) also carry apiVersion and kind."""

    def __init__(
        self, raw: Any, path: str, known: tuple[str, ...] = (), *, args: bool = False
    ) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(path, f"must be an object, got {type_name(raw)}")
        for key in raw:
            if not isinstance(key, str):
                raise ConfigError(path, f"a field name must be a string, got {brief(key)}")
        self.raw: Mapping[str, Any] = raw
        self.path = path
        self._seen: set[str] = {"apiVersion", "kind"} if args else set()
        if known:
            allowed = {*known, *self._seen}
            for key in raw:
                if key not in allowed:
                    raise ConfigError(self.sub(brief(key, quote=False)), "unknown field")

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def get(self, key: str) -> Any:
        self._seen.add(key)
        return self.raw.get(key)

    def skip(self, key: str) -> None:
        """Count the field as read (its value is read elsewhere)."""
        self._seen.add(key)

    def int_(
        self,
        key: str,
        default: int,
        go_type: tuple[int, int] = INT32,
        *,
        lo: int | None = None,
        hi: int | None = None,
    ) -> int:
        """An integer of the Go type (int32 unless said), then within [lo, hi]."""
        v = check_int(self.get(key), default, self.sub(key), go_type)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
            raise ConfigError(self.sub(key), f"must be in the range {rng}, got {brief(v)}")
        return v

    def optional_int(self, key: str, go_type: tuple[int, int] = INT32) -> int | None:
        return self.int_(key, 0, go_type) if self.has(key) else self.get(key)

    def float32(self, key: str, default: float) -> float:
        v = self.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ConfigError(self.sub(key), f"must be a number, got {type_name(v)}")
        if isinstance(v, int) and abs(v) > FLOAT32_MAX:
            raise ConfigError(self.sub(key), f"must fit a float32, got {brief(v)}")
        f = float(v)
        # JSON has no NaN or infinity, so upstream's YAML-to-JSON step cannot carry them
        if not math.isfinite(f) or abs(f) > FLOAT32_MAX:
            raise ConfigError(self.sub(key), f"must be a finite float32, got {brief(v)}")
        return f

    def _typed(self, key: str, type_: type, what: str) -> Any:
        """The field's value, None when absent; a value of another type is an error."""
        v = self.get(key)
        if v is not None and not isinstance(v, type_):
            raise ConfigError(self.sub(key), f"must be {what}, got {type_name(v)}")
        return v

    def bool_(self, key: str, default: bool) -> bool:
        v = self._typed(key, bool, "a boolean")
        return default if v is None else bool(v)

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        v = self.get(key)
        if v is None:
            return default
        if v not in choices:
            raise ConfigError(self.sub(key), f"must be one of {', '.join(choices)}; got {brief(v)}")
        return str(v)

    def str_(self, key: str, default: str) -> str:
        v = self._typed(key, str, "a string")
        return default if v is None else str(v)

    def duration(self, key: str, default: float) -> float:
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise ConfigError(
                self.sub(key), f'must be a duration string such as "15s", got {type_name(v)}'
            )
        try:
            return parse_duration(v)
        except ValueError as e:
            raise ConfigError(
                self.sub(key), f'{e} (use Go syntax such as "15s", "1m30s")'
            ) from None

    def list_(self, key: str) -> list[Any]:
        v = self._typed(key, list, "a list")
        return [] if v is None else list(v)

    def label_names(self, key: str) -> frozenset[str]:
        """A list of label-style names (metav1validation.ValidateLabelName each)."""
        items = self.list_(key)
        for i, s in enumerate(items):
            if not isinstance(s, str):
                raise ConfigError(f"{self.sub(key)}[{i}]", f"must be a string, got {type_name(s)}")
            problem = qualified_name(s)
            if problem is not None:
                raise ConfigError(f"{self.sub(key)}[{i}]", f"{brief(s)}: {problem}")
        return frozenset(items)

    def obj(self, key: str) -> Fields:
        return Fields(self.get(key), self.sub(key))

    def done(self) -> None:
        unknown = [k for k in self.raw if k not in self._seen]
        if unknown:
            raise ConfigError(self.sub(brief(unknown[0], quote=False)), "unknown field")


def check_int(v: Any, default: int, path: str, go_type: tuple[int, int] = INT32) -> int:
    """`v` as an integer of the Go type's range (`default` when absent)."""
    if v is None:
        return default
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)  # 16.0 or 1e3 decode into an integer field upstream (YAML goes via JSON)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(path, f"must be an integer, got {type_name(v)} {brief(v)}")
    lo, hi = go_type
    if not lo <= v <= hi:
        bits = "int32" if go_type == INT32 else "int64"
        raise ConfigError(path, f"must fit a Go {bits} [{lo}, {hi}], got {brief(v)}")
    return v
