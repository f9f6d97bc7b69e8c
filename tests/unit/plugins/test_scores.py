"""Score plugins: expected scores after normalization, per-node and batch forms agree."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.framework import CycleState
from tests.unit.helpers.builders import (
    NodeBuilder,
    PodBuilder,
    make_framework,
    make_node,
    make_pod,
    make_snapshot,
)

ZONE = "topology.kubernetes.io/zone"
MI = 2**20


def scores(fw: Any, pod: Any, snap: Any) -> dict[str, dict[str, int]]:
    state = CycleState()
    fw.run_pre_filter(state, pod, snap)
    slots = snap.live_slots()
    assert fw.run_pre_score(state, pod, snap, slots).ok
    out: dict[str, dict[str, int]] = {}
    for p in fw.score_plugins:
        if p.name in state.skip_score:
            continue
        if hasattr(p, "score_batch"):
            batch = np.asarray(p.score_batch(state, pod, snap, slots), dtype=np.int64)
            if hasattr(p, "score"):
                one = np.array([p.score(state, pod, snap.view(s))[0] for s in slots.tolist()])
                assert list(one) == list(batch), p.name
        else:
            batch = np.array([p.score(state, pod, snap.view(s))[0] for s in slots.tolist()])
        if hasattr(p, "normalize_scores"):
            p.normalize_scores(state, pod, batch, slots)
        out[p.name] = {
            snap.view(s).name: int(v) for s, v in zip(slots.tolist(), batch, strict=True)
        }
    return out


def _score(plugin: str, pod: PodBuilder, nodes: list[NodeBuilder], pods: list[PodBuilder] | None = None,
           args: dict[str, Any] | None = None) -> dict[str, int] | None:  # fmt: skip
    fw = make_framework([plugin], args)
    return scores(fw, pod.obj(), make_snapshot(nodes, pods)).get(plugin)


def test_least_allocated() -> None:
    got = _score("NodeResourcesFit", make_pod("p").requests(cpu="1", memory="1Gi"),
                 [make_node("a").capacity(cpu="4", memory="8Gi"),
                  make_node("b").capacity(cpu="4", memory="8Gi")],
                 [make_pod("e").requests(cpu="2", memory="4Gi").node("b")])  # fmt: skip
    # a: cpu (4000-1000)*100/4000=75, mem 7/8 -> 87; (75+87)//2 = 81
    # b: cpu 25, mem 3/8 -> 37; 31
    assert got == {"a": 81, "b": 31}


def test_least_allocated_uses_non_zero_defaults_for_best_effort_pods() -> None:
    got = _score(
        "NodeResourcesFit", make_pod("p"), [make_node("a").capacity(cpu="1", memory="1Gi")]
    )
    # cpu (1000-100)*100/1000 = 90, mem (1024-200)*100/1024 = 80 -> 85
    assert got == {"a": 85}


def test_most_allocated_and_requested_to_capacity_ratio() -> None:
    nodes = [make_node("a").capacity(cpu="4", memory="8Gi")]
    pod = make_pod("p").requests(cpu="1", memory="1Gi")
    most = _score(
        "NodeResourcesFit",
        pod,
        nodes,
        args={"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}},
    )
    assert most == {"a": 18}  # (25 + 12) // 2
    rtcr = _score("NodeResourcesFit", pod, nodes, args={"NodeResourcesFit": {"scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                               {"utilization": 100, "score": 10}]}}}})  # fmt: skip
    assert rtcr == {"a": 19}  # round half away from zero of (25 + 12) / 2


def test_resource_weights() -> None:
    got = _score("NodeResourcesFit", make_pod("p").requests(cpu="1", memory="1Gi"),
                 [make_node("a").capacity(cpu="4", memory="8Gi")],
                 args={"NodeResourcesFit": {"scoringStrategy": {"resources": [
                     {"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}}})  # fmt: skip
    assert got == {"a": (75 * 3 + 87) // 4}


# Figures from upstream v1.37.2 noderesources/balanced_allocation_test.go (node capacities
# in milli-CPU / bytes there; the same ratios here): the score is the improvement in
# balance, 50 + (50 + with - without) / 2 with Go's truncating division.
@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "resources", "expected"),
    [
        # 0 -> 75% cpu, 0 -> 50% mem: 100 -> 87 = 68; 50% / 50%: 100 -> 100 = 75
        ({"cpu": "3", "memory": "5000"},
         [("a", {"cpu": "4", "memory": "10000"}), ("b", {"cpu": "6", "memory": "10000"})],
         [], None, {"a": 68, "b": 75}),
        # 30 -> 60% cpu, 0 -> 25% mem: 85 -> 82 = 73; 30 -> 60 / 25 -> 50: 97 -> 95 = 74
        ({"cpu": "3", "memory": "5000"},
         [("a", {"cpu": "10", "memory": "20000"}), ("b", {"cpu": "10", "memory": "20000"})],
         [("a", {"cpu": "3"}), ("b", {"cpu": "3", "memory": "5000"})], None, {"a": 73, "b": 74}),
        # memory only; 100% cpu already: 50 -> 100 = 100; empty node: 100 -> 50 = 50
        ({"memory": "5000"},
         [("a", {"cpu": "3", "memory": "5000"}), ("b", {"cpu": "3", "memory": "5000"})],
         [("a", {"cpu": "3"})], None, {"a": 100, "b": 50}),
        # at capacity: 75 -> 50 = 62 and 100 -> 75 = 62
        ({"cpu": "3"},
         [("a", {"cpu": "6", "memory": "10000"}), ("b", {"cpu": "6", "memory": "10000"})],
         [("a", {"cpu": "3"}), ("b", {"cpu": "3", "memory": "5000"})], None, {"a": 62, "b": 62}),
        # a requested scalar resource counts (three fractions: population std):
        # 69 -> 70 = 75 and 62 -> 65 = 76
        ({"example.com/gpu": "1"},
         [("a", {"cpu": "3500m", "memory": "40000", "example.com/gpu": "8"}),
          ("b", {"cpu": "3500m", "memory": "40000", "example.com/gpu": "8"})],
         [("a", {"cpu": "3", "memory": "5000", "example.com/gpu": "3"}),
          ("b", {"cpu": "3", "memory": "5000"})],
         ["cpu", "memory", "example.com/gpu"], {"a": 75, "b": 76}),
        # a scalar resource the pod does not request is left out: 100 -> 63 = 56
        ({"cpu": "3", "memory": "5000"},
         [("a", {"cpu": "3500m", "memory": "40000", "example.com/gpu": "8"}),
          ("b", {"cpu": "3500m", "memory": "40000"})],
         [], ["cpu", "memory", "example.com/gpu"], {"a": 56, "b": 56}),
        # a worse balance: 100 -> 93, 50 + (50 - 7) / 2 = 71 (Go truncation of 21.5)
        ({"cpu": "1", "memory": "1Gi"},
         [("a", {"cpu": "4", "memory": "8Gi"})], [], None, {"a": 71}),
        # balanced before, lopsided after: cpu 1/8 -> 7/8, mem 1/4: 93 -> 68,
        # 50 + (50 + 68 - 93) / 2 = 62 (12.5 truncated)
        ({"cpu": "3"},
         [("a", {"cpu": "4", "memory": "4"})], [("a", {"cpu": "500m", "memory": "1"})],
         None, {"a": 62}),
    ],
)  # fmt: skip
def test_balanced_allocation(
    pod: dict[str, str],
    nodes: list[tuple[str, dict[str, str]]],
    existing: list[tuple[str, dict[str, str]]],
    resources: list[str] | None,
    expected: dict[str, int],
) -> None:
    args = None
    if resources is not None:
        args = {"NodeResourcesBalancedAllocation": {
            "resources": [{"name": r, "weight": 1} for r in resources]}}  # fmt: skip
    got = _score("NodeResourcesBalancedAllocation", make_pod("p").requests(**pod),
                 [make_node(n).capacity(**c) for n, c in nodes],
                 [make_pod(f"e{i}").requests(**r).node(n) for i, (n, r) in enumerate(existing)],
                 args)  # fmt: skip
    assert got == expected


def test_balanced_allocation_skips_best_effort_pods() -> None:
    assert _score("NodeResourcesBalancedAllocation", make_pod("p"), [make_node("a")]) is None


def test_taint_toleration_prefers_fewer_untolerated_prefer_no_schedule_taints() -> None:
    got = _score("TaintToleration", make_pod("p").toleration("ok", effect="PreferNoSchedule",
                                                             operator="Exists"),
                 [make_node("a"), make_node("b").taint("x", "", "PreferNoSchedule"),
                  make_node("c").taint("x", "", "PreferNoSchedule").taint("y", "", "PreferNoSchedule"),
                  make_node("d").taint("ok", "", "PreferNoSchedule")])  # fmt: skip
    assert got == {"a": 100, "b": 50, "c": 0, "d": 100}


def test_node_affinity_preferred_terms() -> None:
    got = _score("NodeAffinity",
                 make_pod("p").preferred_node_affinity(10, "disk", "ssd").preferred_node_affinity(30, ZONE, "z1"),
                 [make_node("a").label("disk", "ssd").zone("z1"), make_node("b").label("disk", "ssd"),
                  make_node("c")])  # fmt: skip
    assert got == {"a": 100, "b": 25, "c": 0}


def test_image_locality() -> None:
    got = _score("ImageLocality", make_pod("p").image("big:1"),
                 [make_node("a").image("big:1", 500 * MI), make_node("b")])  # fmt: skip
    # 500Mi * 1/2 nodes = 250Mi; 100 * (250 - 23) / (1000 - 23) = 23
    assert got == {"a": 23, "b": 0}


def test_image_locality_normalises_the_pods_image_names_only() -> None:
    """upstream normalizedImageName applies to the pod's images; the node's names are
    looked up as the node reports them (backend/cache/cache.go addNodeImageStates): a
    node listing "big" does not hold the pod's "big" ("big:latest"); one listing
    "big:latest" does."""
    got = _score("ImageLocality", make_pod("p").image("big"),
                 [make_node("a").image("big", 500 * MI), make_node("b").image("big:latest", 500 * MI),
                  make_node("c")])  # fmt: skip
    # b: int(500Mi * 1/3) = 174762666; 100 * (174762666 - 23Mi) / (1000Mi - 23Mi) = 14
    assert got == {"a": 0, "b": 14, "c": 0}


def test_image_locality_keeps_the_size_of_the_node_that_brought_the_name() -> None:
    """upstream's cache keeps one ImageStateSummary per name, sized by the first node
    that reported it while no other did (addNodeImageStates); a node's second listing
    of a name does not change it."""
    big, small = make_node("x").image("img:1", 800 * MI), make_node("y").image("img:1", 100 * MI)
    got = _score("ImageLocality", make_pod("p").image("img:1"), [big, small])
    # 800Mi * 2/2 for both: 100 * (800 - 23) / (1000 - 23) = 79
    assert got == {"x": 79, "y": 79}
    twice = make_node("z").image("img:2", 600 * MI).image("img:2", 50 * MI)
    got = _score("ImageLocality", make_pod("p").image("img:2"), [twice, make_node("w")])
    # the first listing's 600Mi: 100 * (300 - 23) / (1000 - 23) = 28
    assert got == {"z": 28, "w": 0}


def test_inter_pod_affinity_preferred_terms_and_existing_pods() -> None:
    nodes = [make_node("a").zone("z1"), make_node("b").zone("z1"), make_node("c").zone("z2"),
             make_node("d").zone("z3")]  # fmt: skip
    got = _score("InterPodAffinity",
                 make_pod("p").labels(app="web").pod_affinity(ZONE, {"app": "db"}, weight=50)
                 .pod_affinity(ZONE, {"app": "cache"}, weight=100, anti=True),
                 nodes,
                 [make_pod("db").labels(app="db").node("a"),
                  make_pod("cache").labels(app="cache").node("d")])  # fmt: skip
    # z1 +50, z2 0, z3 -100 -> min-max to 0..100
    assert got == {"a": 100, "b": 100, "c": 66, "d": 0}
    # an existing pod's required affinity to the incoming pod counts with hardPodAffinityWeight
    got = _score("InterPodAffinity", make_pod("p").labels(app="web"), nodes,
                 [make_pod("fan").pod_affinity(ZONE, {"app": "web"}).node("c")])  # fmt: skip
    assert got == {"a": 0, "b": 0, "c": 100, "d": 0}


def test_topology_spread_score_prefers_emptier_domains() -> None:
    nodes = [make_node("a").zone("z1"), make_node("b").zone("z2"), make_node("c").zone("z3")]
    pods = [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("a"),
            make_pod("w3").labels(app="web").node("b")]  # fmt: skip
    got = _score("PodTopologySpread",
                 make_pod("p").labels(app="web").spread(1, ZONE, {"app": "web"}, when="ScheduleAnyway"),
                 nodes, pods)  # fmt: skip
    assert got is not None
    assert got["c"] == 100 and got["a"] < got["b"] < got["c"]


def test_system_default_spreading_uses_the_workload_selector() -> None:
    from scheduler.framework import Handle, InMemoryListers
    from scheduler.model.selectors import parse_label_selector

    listers = InMemoryListers()
    listers.selectors["default/p"] = parse_label_selector({"matchLabels": {"app": "web"}}, "")
    fw = make_framework(["PodTopologySpread"], handle=Handle.from_listers(listers))
    snap = make_snapshot([make_node("a").zone("z1"), make_node("b").zone("z2")],
                         [make_pod("w").labels(app="web").node("a")])  # fmt: skip
    got = scores(fw, make_pod("p").labels(app="web").obj(), snap)["PodTopologySpread"]
    assert got["b"] == 100 and got["a"] < 100
    # no selector: the system defaults do not apply
    assert "PodTopologySpread" not in scores(fw, make_pod("q").labels(app="web").obj(), snap)


@pytest.mark.parametrize(
    "plugin", ["NodeResourcesFit", "TaintToleration", "NodeAffinity", "ImageLocality"]
)
def test_scores_stay_in_range(plugin: str) -> None:
    got = _score(plugin, make_pod("p").requests(cpu="8").preferred_node_affinity(1, "x", "y"),
                 [make_node("a").capacity(cpu="1"), make_node("b").label("x", "y")])  # fmt: skip
    assert got is not None
    assert all(0 <= v <= 100 for v in got.values())


# upstream helper.BuildBrokenLinearFunction (v1.37.2 plugins/helper/shape_score.go), with
# the shape's 0..10 scores scaled by 10 as requested_to_capacity_ratio.go does.
@pytest.mark.parametrize(
    ("shape", "cases"),
    [
        ([(10, 1), (90, 9)],
         {-10: 10, 0: 10, 10: 10, 15: 15, 20: 20, 89: 89, 90: 90, 100: 90, 110: 90}),
        # falling slope: Go's division truncates toward zero, 100 - 100*1/60 -> 99 (not 98)
        ([(0, 2), (40, 10), (100, 0)],
         {-10: 20, 0: 20, 20: 60, 30: 80, 40: 100, 41: 99, 70: 50, 99: 2, 100: 0, 110: 0}),
        ([(0, 2), (40, 2), (100, 2)], {0: 20, 40: 20, 70: 20, 110: 20}),
    ],
)  # fmt: skip
def test_broken_linear_function(shape: list[tuple[int, int]], cases: dict[int, int]) -> None:
    from scheduler.config.args import UtilizationShapePoint
    from scheduler.plugins.node_resources_fit import _broken_linear

    points = tuple(UtilizationShapePoint(u, s) for u, s in shape)
    util = np.array(list(cases), dtype=np.int64)
    assert dict(zip(cases, _broken_linear(util, points).tolist(), strict=True)) == cases


def test_requested_to_capacity_ratio_counts_only_resources_scoring_above_zero() -> None:
    # shape 0 -> 0, 100 -> 10: cpu 2/4 -> 50, memory 0/8Gi -> 0 (left out with its
    # weight), so the node scores 50, not (50 + 0) / 2 (requested_to_capacity_ratio.go)
    rtcr = {"NodeResourcesFit": {"scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                               {"utilization": 100, "score": 10}]}}}}  # fmt: skip
    got = _score("NodeResourcesFit", make_pod("p").requests(cpu="2", memory="0"),
                 [make_node("a").capacity(cpu="4", memory="8Gi")], args=rtcr)  # fmt: skip
    assert got == {"a": 50}


# upstream requested_to_capacity_ratio_test.go, shape (0, 10) -> (100, 0): node1 cpu 75%,
# memory 50% -> round((25 + 50) / 2) = 38; node2 50% / 50% -> 50
def test_requested_to_capacity_ratio_falling_shape() -> None:
    rtcr = {"NodeResourcesFit": {"scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                               {"utilization": 100, "score": 0}]}}}}  # fmt: skip
    got = _score("NodeResourcesFit", make_pod("p").requests(cpu="3", memory="5000"),
                 [make_node("a").capacity(cpu="4", memory="10000"),
                  make_node("b").capacity(cpu="6", memory="10000")], args=rtcr)  # fmt: skip
    assert got == {"a": 38, "b": 50}


def test_topology_spread_score_with_an_empty_selector_counts_no_pod() -> None:
    # upstream scoring.go: countPodsMatchSelector is 0 for an empty selector, so every
    # zone scores the same raw value and normalizes to 100 (a real selector would not)
    nodes = [make_node("a").zone("z1"), make_node("b").zone("z2")]
    existing = [make_pod(f"w{i}").labels(app="web").node("a") for i in range(3)]
    empty = _score("PodTopologySpread",
                   make_pod("p").labels(app="web").spread(1, ZONE, {}, when="ScheduleAnyway"),
                   nodes, existing)  # fmt: skip
    assert empty == {"a": 100, "b": 100}
    real = _score("PodTopologySpread",
                  make_pod("p").labels(app="web").spread(1, ZONE, {"app": "web"},
                                                         when="ScheduleAnyway"),
                  nodes, existing)  # fmt: skip
    # raw: a = 3 * log(4) = 4.16 -> 4, b = 0; 100 * (4 + 0 - s) / 4
    assert real == {"a": 0, "b": 100}


# Figures from upstream v1.37.2 noderesources/least_allocated_test.go and
# most_allocated_test.go (capacities in cores / bytes; integer division at each step).
@pytest.mark.parametrize(
    ("strategy", "pod", "nodes", "existing", "expected"),
    [
        # least: cpu (4-3)/4 -> 25, mem 5000/10000 -> 50: 37; 50 / 50: 50
        ("LeastAllocated", {"cpu": "3", "memory": "5000"},
         [("a", {"cpu": "4", "memory": "10000"}), ("b", {"cpu": "6", "memory": "10000"})],
         [], {"a": 37, "b": 50}),
        # least with existing pods: cpu 3+3 of 10 -> 40; memory 10000 of 20000 -> 50: 45;
        # of 50000 -> 80: 60
        ("LeastAllocated", {"cpu": "3", "memory": "5000"},
         [("a", {"cpu": "10", "memory": "20000"}), ("b", {"cpu": "10", "memory": "50000"})],
         [("a", {"cpu": "3", "memory": "5000"}), ("b", {"cpu": "3", "memory": "5000"})],
         {"a": 45, "b": 60}),
        # most: 3/4 -> 75, 5000/10000 -> 50: 62; 50 / 50: 50
        ("MostAllocated", {"cpu": "3", "memory": "5000"},
         [("a", {"cpu": "4", "memory": "10000"}), ("b", {"cpu": "6", "memory": "10000"})],
         [], {"a": 62, "b": 50}),
        # most, requested above capacity is capped: 100 and 5000/10000 -> 50: 75
        ("MostAllocated", {"cpu": "3", "memory": "5000"},
         [("a", {"cpu": "2", "memory": "10000"})], [], {"a": 75}),
    ],
)  # fmt: skip
def test_least_and_most_allocated_tables(
    strategy: str,
    pod: dict[str, str],
    nodes: list[tuple[str, dict[str, str]]],
    existing: list[tuple[str, dict[str, str]]],
    expected: dict[str, int],
) -> None:
    args = {"NodeResourcesFit": {"scoringStrategy": {"type": strategy}}}
    got = _score("NodeResourcesFit", make_pod("p").requests(**pod),
                 [make_node(n).capacity(**c) for n, c in nodes],
                 [make_pod(f"e{i}").requests(**r).node(n) for i, (n, r) in enumerate(existing)],
                 args)  # fmt: skip
    assert got == expected
