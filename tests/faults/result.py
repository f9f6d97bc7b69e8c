"""What a case reports: the invariants it checked (each passed or not, with the
evidence) and the figures it measured."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class CaseResult:
    name: str
    mode: str  # "reduced" or "full"
    checks: list[Check] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""  # the case could not run to its end (the traceback's last line)

    @property
    def passed(self) -> bool:
        return not self.error and bool(self.checks) and all(c.ok for c in self.checks)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

    def figure(self, name: str, value: Any) -> None:
        self.figures[name] = value

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passed"] = self.passed
        return d

    def summary(self) -> str:
        lines = [
            f"{self.name} ({self.mode}): {'PASS' if self.passed else 'FAIL'} in {self.seconds:.0f}s"
        ]
        if self.error:
            lines.append(f"  error: {self.error}")
        for c in self.checks:
            lines.append(
                f"  [{'ok' if c.ok else 'FAIL'}] {c.name}" + (f": {c.detail}" if c.detail else "")
            )
        for k, v in self.figures.items():
            lines.append(f"  {k} = {v}")
        return "\n".join(lines)
