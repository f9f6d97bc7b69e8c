"""The oracle's tie comparison (tests/differential/compare.py) on written-out decisions:
a determined pick is compared on the exact node and victims, a pick among candidates
tied on every criterion on the count and priorities, and each candidate's victims name
by name."""

from __future__ import annotations

from tests.differential.compare import TieFacts, compare
from tests.differential.harness import Decision, PodResult

T = "2026-01-01T00:00:00Z"
EARLIER = "2025-12-31T23:59:59Z"
FACTS = TieFacts(
    priorities={f"ns/e{i}": 10 for i in range(8)},
    start_times={**{f"ns/e{i}": T for i in range(8)}, "ns/e7": EARLIER},
)


def _decision(
    sched: str, node: str, victims: list[str], candidates: dict[str, list[str]]
) -> Decision:
    n = len(candidates[node])
    return Decision(
        sched,
        f"ns/p-{sched}",
        reason="Unschedulable",
        message=f"0/2 nodes are available: 2 Insufficient cpu. preemption: found a "
        f"potential placement for pod on node {node}, preempting {n} victims",
        nominated=node,
        victims=victims,
        candidates=candidates,
    )


def _kinds(up: Decision, ours: Decision) -> list[str]:
    diffs, made = compare(PodResult(1, "p", "oracle-high", up, ours), 2, {}, FACTS)
    assert made["victims"] == len(set(up.candidates) | set(ours.candidates))
    return [d.kind for d in diffs]


def test_a_determined_pick_must_be_the_same_node_and_victims() -> None:
    cands = {"n1": ["ns/e0", "ns/e1"], "n2": ["ns/e2"]}  # n2: fewer victims, best
    up = _decision("u", "n2", [], cands)
    assert _kinds(up, _decision("o", "n2", [], cands)) == []
    assert "preemption" in _kinds(up, _decision("o", "n1", ["ns/e0"], cands))
    # the same node, another victim on it: both the candidate's list and the pick differ
    cands = {"n1": ["ns/e0", "ns/e1"], "n2": ["ns/e2", "ns/e3", "ns/e4"]}
    up = _decision("u", "n1", ["ns/e0"], cands)
    ours = _decision("o", "n1", ["ns/e5"], {**cands, "n1": ["ns/e5", "ns/e1"]})
    assert sorted(_kinds(up, ours)) == ["preemption", "victims"]


def test_candidates_tied_on_every_criterion_compare_count_and_priorities() -> None:
    cands = {"n1": ["ns/e0"], "n2": ["ns/e2"]}  # tied: one victim each, same start
    up = _decision("u", "n1", [], cands)
    assert _kinds(up, _decision("o", "n2", [], cands)) == []
    # the latest earliest start decides: n1's victim started a second earlier
    cands = {"n1": ["ns/e7"], "n2": ["ns/e2"]}
    up = _decision("u", "n2", [], cands)
    assert _kinds(up, _decision("o", "n1", [], cands)) == ["preemption"]
