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

# Go's integer types of the v1 API (k8s.io/kube-scheduler/config/v1/types*.go): a number
# outside its field's type fails decoding upstream ("cannot unmarshal number ... into Go
# struct field ... of type int32"), before any validation.
INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)
# float32 (clientConnection.qps): the largest finite value
FLOAT32_MAX = 3.4028234663852886e38


class Fields:
    """Typed getters over one raw mapping; ``done()`` rejects fields nobody read."""

    def __init__(self, raw: Any, path: str) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(path, f"must be an object, got {type_name(raw)}")
        for key in raw:
            if not isinstance(key, str):
                raise ConfigError(path, f"a field name must be a string, got {brief(key)}")
        self.raw: Mapping[str, Any] = raw
        self.path = path
        self._seen: set[str] = set()

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def get(self, key: str) -> Any:
        self._seen.add(key)
        return self.raw.get(key)

    def int_(self, key: str, default: int, go_type: tuple[int, int] = INT32) -> int:
        return check_int(self.get(key), default, self.sub(key), go_type)

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

    def bool_(self, key: str, default: bool) -> bool:
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ConfigError(self.sub(key), f"must be a boolean, got {type_name(v)}")
        return v

    def str_(self, key: str, default: str) -> str:
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise ConfigError(self.sub(key), f"must be a string, got {type_name(v)}")
        return v

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
        v = self.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise ConfigError(self.sub(key), f"must be a list, got {type_name(v)}")
        return v

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
