"""Comparing the two schedulers' decisions on one pod, and adding them up for a run.

What counts (issue 9):
- feasibility, per node: a node feasible for one and not the other is one difference;
  known only where a decision shows it (see Decision.feasible);
- the PodScheduled=False message, word for word, where both refused the pod;
- the chosen node, where upstream's choice was unique (one top score, or one feasible node);
- the final score of every node both scored;
- preemption: the number of victims (from the "preempting N victims" text each writes), and the victims' priorities (what upstream deleted must be among ours).
- in tie scenarios (issue 23; scenario.generate_ties), where every start time is known:
  the victims of every candidate node, name by name (each scheduler logs them), and,
  where upstream's pick is determined (one candidate best on pickOneNodeForPreemption's
  criteria), its node and the very victims it deleted; where candidates tie on every
  criterion upstream picks among them in Go map order, so ours must be one of them and
  the count and priorities rule applies.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.differential.harness import Decision, PodResult

KINDS = ("outcome", "feasibility", "message", "node", "score", "preemption", "victims")


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
_PLACEMENT = re.compile(r"found a potential placement for pod on node (\S+), preempting")
_ANY_NODE = "found a potential placement for pod on node <node>, preempting"


@dataclass
class TieFacts:
    """What a tie scenario's comparison needs beyond the decisions."""

    priorities: dict[str, int]  # ns/name -> priority value
    start_times: dict[str, str]  # ns/name -> status.startTime (RFC 3339, one format)


def _chosen(d: Decision) -> str | None:
    m = _PLACEMENT.search(d.message or "")
    return m.group(1) if m else (d.nominated or None)


def _best_candidates(
    candidates: dict[str, list[str]], violations: dict[str, int], facts: TieFacts
) -> list[str]:
    """pickOneNodeForPreemption's criteria (framework/preemption/preemption.go) over
    upstream's candidates: fewest PDB violations (as ours counted them for the same
    victims), lowest top priority, smallest priority sum, fewest victims, latest
    earliest start among the top-priority victims. The nodes best on all of them."""

    def key(node: str) -> tuple[int, int, int, int, str]:
        victims = candidates[node]
        prios = [facts.priorities.get(v, 0) for v in victims]
        top = max(prios)
        earliest = min(
            facts.start_times.get(v, "~") for v, p in zip(victims, prios, strict=True) if p == top
        )
        return (
            -violations.get(node, 0),
            -top,
            -sum(p + 2**31 for p in prios),
            -len(victims),
            earliest,
        )

    keys = {n: key(n) for n in candidates if candidates[n]}
    if not keys:
        return []
    best = max(keys.values())
    return sorted(n for n, k in keys.items() if k == best)


def _victim_count(d: Decision) -> int:
    """How many victims the scheduler chose: its own message says so ("found a potential
    placement for pod on node X, preempting N victims"), else the DELETEs it sent."""
    m = _PREEMPTING.search(d.message or "")
    return int(m.group(1)) if m else len(d.victims)


def compare(
    result: PodResult,
    num_nodes: int,
    victim_priority: dict[str, str],
    ties: TieFacts | None = None,
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
        mu, mo = up.message, ours.message
        if ties is not None:
            # the node named in "found a potential placement for pod on node X" is
            # compared by the preemption rules (exactly where upstream's pick is
            # determined, else among the tied best)
            mu, mo = _PLACEMENT.sub(_ANY_NODE, mu), _PLACEMENT.sub(_ANY_NODE, mo)
        if mu != mo:
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

    if ties is not None and result.priority_class == "oracle-high":
        _compare_ties(up, ours, ties, made, diff)
    elif up.victims or ours.victims or result.priority_class == "oracle-high":
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


def _compare_ties(
    up: Decision,
    ours: Decision,
    facts: TieFacts,
    made: Counter[str],
    diff: Callable[[str, str], None],
) -> None:
    for node in sorted(set(up.candidates) | set(ours.candidates)):
        made["victims"] += 1
        vu, vo = up.candidates.get(node), ours.candidates.get(node)
        if vu is None or vo is None or sorted(vu) != sorted(vo):
            diff("victims", f"{node}: upstream {sorted(vu or [])}, ours {sorted(vo or [])}")
    made["preemption"] += 1
    node_u, node_o = _chosen(up), _chosen(ours)
    best = _best_candidates(up.candidates, ours.pdb_violations, facts)
    # the DELETEs of the first attempt: all victims but the last, sent together (a
    # retry after the refusals may send others)
    sent_u = sorted(up.victims[: max(_victim_count(up) - 1, 0)])
    sent_o = sorted(ours.victims[: max(_victim_count(ours) - 1, 0)])
    if len(best) == 1:  # upstream's pick is determined: the very node and victims
        made["determined"] += 1  # (counted apart; its differences are "preemption")
        if node_u != best[0] or node_o != node_u or sent_u != sent_o:
            diff(
                "preemption",
                f"determined: upstream {node_u} (best {best[0]}) deleted {sent_u}; "
                f"ours {node_o} deleted {sent_o}",
            )
        return
    nu, no = _victim_count(up), _victim_count(ours)
    pu = Counter(facts.priorities.get(v, 0) for v in sent_u)
    po = Counter(facts.priorities.get(v, 0) for v in sent_o)
    if (best and node_o not in best) or nu != no or pu - po:
        diff(
            "preemption",
            f"tied best {best}: upstream {node_u} {nu} victim(s) {sent_u}; "
            f"ours {node_o} {no} {sent_o}",
        )


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
