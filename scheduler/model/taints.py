"""Taints and tolerations (v1.Taint, v1.Toleration), upstream's matching rules, and a
pod's tolerations read from its JSON."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import object_entries

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EFFECTS = frozenset({NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE})

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" tolerates every effect
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """upstream v1.Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # Equal (an empty key with Equal is rejected by API validation; never matches)
        return bool(self.key) and self.value == taint.value


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def find_untolerated(
    taints: Iterable[Taint], tolerations: tuple[Toleration, ...], effects: frozenset[str]
) -> Taint | None:
    """The first taint with one of `effects` that no toleration tolerates."""
    for taint in taints:
        if taint.effect in effects and not tolerates(tolerations, taint):
            return taint
    return None


def parse_tolerations(raw: Any, path: str) -> tuple[Toleration, ...]:
    out = []
    for where, t in object_entries(raw, path):
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise InvalidObject(f"{where}.operator", f"unsupported operator {op!r}")
        secs = t.get("tolerationSeconds")
        out.append(
            Toleration(
                str(t.get("key") or ""),
                op,
                str(t.get("value") or ""),
                str(t.get("effect") or ""),
                secs if isinstance(secs, int) else None,
            )
        )
    return tuple(out)
