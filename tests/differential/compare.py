"""Comparing the two schedulers' decisions on one pod, and adding them up for a run.

What counts (issue 9):
- feasibility, per node: a node feasible for one and not the other is one difference;
  known only where a decision shows it (see Decision.feasible);
- the PodScheduled=False message, word for word, where both refused the pod;
- the chosen node, where upstream's choice was unique (one top score, or one feasible node);
- the final score of every node both scored;
- preemption: the number of victims (from the "preempting N victims" text each writes), and the victims' priorities (what upstream deleted must be among ours).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.differential.harness import Decision, PodResult

KINDS = ("outcome", "feasibility", "message", "node", "score", "preemption")


@dataclass
class Difference:
    kind: str
    scenario: int
    pod: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "scenario": self.scenario,
            "pod": self.pod,
            "detail": self.detail,
        }


def _outcome(d: Decision) -> str:
    if d.timed_out:
        return "timeout"
    if d.node is not None:
        return "bound"
    return d.reason or "unknown"


def _unique_choice(d: Decision) -> str | None:
    if d.node is None:
        return None
    if not d.scores:
        return d.node
    top = max(d.scores.values())
    best = [n for n, s in d.scores.items() if s == top]
    return best[0] if len(best) == 1 else None


_PREEMPTING = re.compile(r"preempting (\d+) victims")


def _victim_count(d: Decision) -> int:
    """How many victims the scheduler chose: its own message says so ("found a potential
    placement for pod on node X, preempting N victims"), else the DELETEs it sent."""
    m = _PREEMPTING.search(d.message or "")
    return int(m.group(1)) if m else len(d.victims)


def compare(
    result: PodResult, num_nodes: int, victim_priority: dict[str, str]
) -> tuple[list[Difference], Counter[str]]:
    """Differences for one pod, and how many comparisons of each kind were made."""
    up, ours = result.upstream, result.ours
    assert up is not None and ours is not None
    diffs: list[Difference] = []
    made: Counter[str] = Counter()

    def diff(kind: str, detail: str) -> None:
        diffs.append(Difference(kind, result.scenario, result.name, detail))

    made["outcome"] += 1
    if _outcome(up) != _outcome(ours):
        diff(
            "outcome",
            f"upstream {_outcome(up)} ({up.message or up.node}), ours {_outcome(ours)} ({ours.message or ours.node})",
        )

    fu, fo = up.feasible, ours.feasible
    if fu is not None and fo is not None:
        made["feasibility"] += num_nodes
        for node in sorted(fu ^ fo):
            diff("feasibility", f"{node}: feasible for {'upstream' if node in fu else 'ours'} only")

    if up.message is not None and ours.message is not None:
        made["message"] += 1
        if up.message != ours.message:
            diff("message", f"upstream: {up.message!r} / ours: {ours.message!r}")

    choice = _unique_choice(up)
    if choice is not None and ours.node is not None:
        made["node"] += 1
        if ours.node != choice:
            diff("node", f"upstream chose {choice} (unique), ours {ours.node}")

    for node in sorted(set(up.scores) & set(ours.scores)):
        made["score"] += 1
        if up.scores[node] != ours.scores[node]:
            detail = f"{node}: upstream {up.scores[node]}, ours {ours.scores[node]}"
            pu = up.plugin_scores.get(node, {})
            po = ours.plugin_scores.get(node, {})
            parts = [
                f"{p} {pu.get(p, 0)}/{po.get(p, 0)}"
                for p in sorted(set(pu) | set(po))
                if pu.get(p, 0) != po.get(p, 0)
            ]
            if parts:
                detail += " (plugin upstream/ours: " + ", ".join(parts) + ")"
            diff("score", detail)

    if up.victims or ours.victims or result.priority_class == "oracle-high":
        made["preemption"] += 1
        nu, no = _victim_count(up), _victim_count(ours)
        vu = Counter(victim_priority.get(v, "?") for v in up.victims)
        vo = Counter(victim_priority.get(v, "?") for v in ours.victims)
        # upstream deletes the last victim only after the others are gone (its async
        # preemption), so with DELETEs refused it never sends that one: what it did send
        # must be among ours by priority, and the counts come from the messages
        if nu != no or vu - vo:
            diff(
                "preemption",
                f"upstream {nu} victim(s), sent {sorted(vu.elements())} ({up.victims}); "
                f"ours {no}, sent {sorted(vo.elements())} ({ours.victims})",
            )
    return diffs, made


@dataclass
class Tally:
    made: Counter[str] = field(default_factory=Counter)
    differences: list[Difference] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # manifests the API server refused
    errors: list[str] = field(default_factory=list)  # scenarios the harness could not run
    pods: int = 0
    scenarios: int = 0

    def add(self, diffs: list[Difference], made: Counter[str]) -> None:
        self.pods += 1
        self.made.update(made)
        self.differences.extend(diffs)

    def count(self, kind: str) -> int:
        return sum(1 for d in self.differences if d.kind == kind)

    def table(self) -> str:
        rows = ["| comparison | made | different | identical |", "|---|---:|---:|---:|"]
        for kind in KINDS:
            made = self.made.get(kind, 0)
            bad = self.count(kind)
            pct = f"{100.0 * (made - bad) / made:.2f}%" if made else "-"
            rows.append(f"| {kind} | {made} | {bad} | {pct} |")
        return "\n".join(rows)
