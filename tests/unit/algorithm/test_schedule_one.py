"""schedule_pod, the runtime and NodeDryRun."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

import pytest

from scheduler.algorithm import num_feasible_nodes_to_find, schedule_pod
from scheduler.cache import Nominator
from scheduler.catalog import profile_for
from scheduler.config import ConfigError, names
from scheduler.framework import (
    CycleState,
    FitError,
    Framework,
    FrameworkError,
    Handle,
    NodeDryRun,
    ScheduleResult,
    SearchState,
    build_profile,
)
from scheduler.framework.interfaces import NormalizeScorePlugin, ScorePlugin
from scheduler.framework.status import Code, Status
from scheduler.plugins.registry import in_tree_registry
from tests.unit.helpers.builders import make_framework, make_node, make_pod, make_snapshot

ZONE = "topology.kubernetes.io/zone"


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [(0, 50, 50), (0, 100, 100), (0, 1000, 420), (0, 5000, 500), (0, 10000, 500),
     (0, 20000, 1000), (20, 1000, 200), (100, 1000, 1000), (1, 1000, 100), (50, 99, 99)],
)  # fmt: skip
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def _schedule(fw: Any, pod: Any, snap: Any, nominator: Nominator | None = None, **kw: Any) -> Any:
    return schedule_pod(fw, CycleState(), pod, snap, nominator or Nominator(), **kw)


def test_fit_error_message_is_upstreams() -> None:
    fw = make_framework()
    nodes = [make_node(f"c{i}").capacity(cpu="1") for i in range(3)]
    nodes += [make_node(f"t{i}").taint("k", "v") for i in range(2)]
    result = _schedule(fw, make_pod("p").requests(cpu="2").obj(), make_snapshot(nodes))
    assert isinstance(result, FitError)
    assert result.message() == (
        "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu."
    )
    d = result.diagnosis
    assert d.unschedulable_plugins == {"TaintToleration", "NodeResourcesFit"}
    # 2 cpu asked of a 1-cpu node: no eviction can help (upstream fitsRequest)
    statuses = d.node_to_status()
    assert statuses["c0"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert sorted(n for n, st in statuses.items() if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE) == [
        "c0", "c1", "c2", "t0", "t1",
    ]  # fmt: skip


def test_a_node_failing_two_resources_counts_in_both_reasons() -> None:
    fw = make_framework()
    snap = make_snapshot(
        [make_node("a").capacity(cpu="1", memory="1Gi"), make_node("b").capacity(cpu="1")]
    )
    result = _schedule(fw, make_pod("p").requests(cpu="2", memory="2Gi").obj(), snap)
    assert isinstance(result, FitError)
    assert result.message() == "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu."


def test_pre_filter_rejection_and_no_nodes() -> None:
    from scheduler.framework import InMemoryListers

    fw = make_framework(handle=Handle.from_listers(InMemoryListers()))
    result = _schedule(fw, make_pod("p").pvc("data").obj(), make_snapshot([make_node("a")]))
    assert isinstance(result, FitError)
    assert result.message() == '0/1 nodes are available: persistentvolumeclaim "data" not found.'
    assert result.diagnosis.node_to_status()["a"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    empty = _schedule(fw, make_pod("p").obj(), make_snapshot([]))
    assert isinstance(empty, FitError) and empty.message() == "no nodes available to schedule pods"


def test_post_filter_message_is_appended() -> None:
    fw = make_framework()
    result = _schedule(fw, make_pod("p").requests(cpu="9").obj(), make_snapshot([make_node("a")]))
    assert isinstance(result, FitError)
    # upstream appends the PostFilter message as is: no period of its own
    result.diagnosis.post_filter_msg = "preemption: not eligible due to preemptionPolicy=Never."
    assert result.message() == (
        "0/1 nodes are available: 1 Insufficient cpu."
        " preemption: not eligible due to preemptionPolicy=Never."
    )


def test_picks_the_least_allocated_node() -> None:
    fw = make_framework()
    snap = make_snapshot([make_node("a"), make_node("b"), make_node("c")],
                         [make_pod("x").requests(cpu="3").node("a"),
                          make_pod("y").requests(cpu="1").node("c")])  # fmt: skip
    result = _schedule(fw, make_pod("p").requests(cpu="500m").obj(), snap)
    assert result == ScheduleResult("b", 3, 3)


def test_search_rotates_and_stops_at_enough_feasible_nodes() -> None:
    fw = make_framework(percentage=50)
    snap = make_snapshot([make_node(f"n{i:03}") for i in range(300)])
    search = SearchState()
    r1 = _schedule(fw, make_pod("p").obj(), snap, search=search)
    assert isinstance(r1, ScheduleResult) and (r1.evaluated, r1.feasible) == (150, 150)
    assert search.next_start == 150
    r2 = _schedule(fw, make_pod("p").obj(), snap, search=search)
    assert isinstance(r2, ScheduleResult) and search.next_start == 0
    assert int(r1.node[1:]) < 150 <= int(r2.node[1:])


def test_rotation_counts_rejected_nodes_as_processed() -> None:
    fw = make_framework(percentage=1)  # at least 100 feasible
    nodes = [
        make_node(f"n{i:03}").taint("k") if i < 50 else make_node(f"n{i:03}") for i in range(300)
    ]
    search = SearchState()
    r = _schedule(fw, make_pod("p").obj(), make_snapshot(nodes), search=search)
    assert isinstance(r, ScheduleResult)
    assert (r.evaluated, r.feasible) == (150, 100)
    assert search.next_start == 150


def test_ties_are_broken_at_random() -> None:
    fw = make_framework()
    snap = make_snapshot([make_node("a"), make_node("b")])
    seen = set()
    for seed in range(40):
        r = _schedule(fw, make_pod("p").obj(), snap, search=SearchState(rng=random.Random(seed)))
        assert isinstance(r, ScheduleResult)
        seen.add(r.node)
    assert seen == {"a", "b"}


def test_nominated_pods_of_higher_or_equal_priority_hold_their_space() -> None:
    fw = make_framework()
    snap = make_snapshot([make_node("a").capacity(cpu="2")])
    nom = Nominator()
    big = make_pod("big").priority(100).requests(cpu="2").obj()
    nom.add(big, "a")
    low = make_pod("low").priority(10).requests(cpu="1").obj()
    result = _schedule(fw, low, snap, nom)
    assert isinstance(result, FitError)
    assert result.message() == "0/1 nodes are available: 1 Insufficient cpu."
    # a pod of higher priority ignores the lower nomination
    high = make_pod("high").priority(200).requests(cpu="1").obj()
    assert _schedule(fw, high, snap, nom) == ScheduleResult("a", 1, 1)
    # the nominated pod itself is not counted twice
    assert _schedule(fw, big, snap, nom) == ScheduleResult("a", 1, 1)


def test_nominated_pods_rule_needs_both_passes() -> None:
    """Affinity satisfied only by a nominated pod: passes with it, fails without it."""
    fw = make_framework()
    snap = make_snapshot([make_node("a").zone("z1"), make_node("b").zone("z2")],
                         [make_pod("db").labels(app="db").node("b")])  # fmt: skip
    nom = Nominator()
    nom.add(make_pod("db2").labels(app="db").priority(5).obj(), "a")
    pod = make_pod("p").pod_affinity(ZONE, {"app": "db"}).obj()
    assert _schedule(fw, pod, snap, nom) == ScheduleResult("b", 2, 1)


def test_nominated_node_is_tried_first() -> None:
    fw = make_framework()
    snap = make_snapshot([make_node("a"), make_node("b"), make_node("c")])
    assert _schedule(fw, make_pod("p").nominated("c").obj(), snap) == ScheduleResult("c", 1, 1)
    snap2 = make_snapshot([make_node("a"), make_node("b"), make_node("c").taint("k")])
    r = _schedule(fw, make_pod("p").nominated("c").obj(), snap2)
    assert isinstance(r, ScheduleResult) and r.node != "c"


def test_pre_filter_result_narrows_candidates() -> None:
    fw = make_framework()
    snap = make_snapshot([make_node("a"), make_node("b")])
    pod = (
        make_pod("p")
        .node_affinity_term([], [{"key": "metadata.name", "operator": "In", "values": ["b"]}])
        .requests(cpu="9")
    )
    r = _schedule(fw, pod.obj(), snap)
    assert isinstance(r, FitError)
    assert r.message() == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
    ok = make_pod("p").node_affinity_term(
        [], [{"key": "metadata.name", "operator": "In", "values": ["b"]}]
    )
    assert _schedule(fw, ok.obj(), snap) == ScheduleResult("b", 1, 1)


def test_node_dry_run_removes_victims_and_keeps_pre_filter_state_in_step() -> None:
    fw = make_framework()
    victim = make_pod("v").labels(app="web").requests(cpu="3").priority(1).node("a").obj()
    other = make_pod("o").requests(cpu="500m").node("b").obj()
    from scheduler.cache import Cache

    cache = Cache()
    cache.add_node(make_node("a").zone("z1").obj())
    cache.add_node(make_node("b").zone("z2").obj())
    cache.add_pod(victim)
    cache.add_pod(other)
    snap = cache.new_snapshot()
    pod = make_pod("p").priority(100).requests(cpu="2").pod_affinity(
        "kubernetes.io/hostname", {"app": "web"}, anti=True).obj()  # fmt: skip
    state = CycleState()
    assert fw.run_pre_filter(state, pod, snap)[1].ok
    view = snap.get("a")
    assert view is not None
    assert not fw.run_filter(state, pod, view).ok
    run = NodeDryRun(fw.filter_runner, state, pod, view, Nominator())
    assert run.remove_pod(victim).ok
    assert run.filter().ok
    # the original view and state are untouched
    assert len(view.pods) == 1 and not fw.run_filter(state, pod, view).ok
    assert run.add_pod(victim).ok
    st = run.filter()
    assert st.code == Code.UNSCHEDULABLE and st.plugin == "NodeResourcesFit"


def test_multi_point_expansion_weights_and_errors() -> None:
    fw = make_framework()
    assert [p.name for p in fw.score_plugins] == [
        "TaintToleration", "NodeAffinity", "NodeResourcesFit", "VolumeBinding",
        "PodTopologySpread", "InterPodAffinity", "NodeResourcesBalancedAllocation",
        "ImageLocality",
    ]  # fmt: skip
    assert fw.weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                          "VolumeBinding": 1, "PodTopologySpread": 2, "InterPodAffinity": 2,
                          "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}  # fmt: skip
    assert [p.name for p in fw.filter_plugins][:3] == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
    ]
    assert fw.queue_sort_plugin.name == "PrioritySort"
    assert [p.name for p in fw.pre_enqueue_plugins] == ["SchedulingGates"]
    specific = Framework(
        profile_for(
            (names.PluginRef("NodeResourcesFit"), names.PluginRef("ImageLocality")),
            points={names.SCORE: (names.PluginRef("ImageLocality", 5),)},
        ),
        in_tree_registry(),
    )
    assert [p.name for p in specific.score_plugins] == ["ImageLocality", "NodeResourcesFit"]
    assert specific.weights == {"ImageLocality": 5, "NodeResourcesFit": 1}
    with pytest.raises(FrameworkError, match="not registered"):
        Framework(profile_for(), in_tree_registry())  # DefaultPreemption: another layer
    # the configuration's table refuses a plugin at a point it does not serve...
    with pytest.raises(ConfigError, match="does not implement the score extension point"):
        profile_for((), points={names.SCORE: (names.PluginRef("NodePorts"),)})
    # ...and the framework refuses a plugin whose class does not declare the point's
    # Protocol, whatever a profile says
    wrong = dataclasses.replace(
        profile_for(()),
        extension_points={names.SCORE: (names.PluginRef("NodePorts", 1),)},
    )
    with pytest.raises(FrameworkError, match="does not extend"):
        Framework(wrong, in_tree_registry())


def test_every_rejecting_plugin_registers_events() -> None:
    fw = make_framework()
    events = fw.events_to_register()
    for p in fw.filter_plugins + fw.pre_enqueue_plugins:
        assert events.get(p.name), p.name


def test_pre_enqueue_and_queue_sort() -> None:
    fw = make_framework()
    st = fw.run_pre_enqueue(make_pod("p").gate("a").gate("b").obj())
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message() == "waiting for scheduling gates: [a b]"
    assert fw.run_pre_enqueue(make_pod("p").obj()).ok

    class Q:
        def __init__(self, priority: int, ts: float) -> None:
            self.pod = make_pod("q").priority(priority).obj()
            self.timestamp = ts

    assert fw.queue_sort_less(Q(10, 5.0), Q(1, 1.0))
    assert fw.queue_sort_less(Q(1, 1.0), Q(1, 2.0))
    assert not fw.queue_sort_less(Q(1, 2.0), Q(1, 1.0))


def test_default_binder_calls_the_handle_binder() -> None:
    calls: list[tuple[str, str]] = []

    async def binder(pod: Any, node: str) -> None:
        calls.append((pod.key, node))
        if node == "bad":
            raise RuntimeError("conflict")

    fw = make_framework(handle=Handle(binder=binder))
    pod = make_pod("p").obj()
    assert asyncio.run(fw.run_bind(CycleState(), pod, "n1")).ok
    st = asyncio.run(fw.run_bind(CycleState(), pod, "bad"))
    assert st.code == Code.ERROR and "conflict" in st.message()
    assert calls == [("default/p", "n1"), ("default/p", "bad")]


def test_debug_log_has_one_final_score_line_per_feasible_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fw = make_framework()
    snap = make_snapshot([make_node("a"), make_node("b")],
                         [make_pod("x").requests(cpu="3").node("a")])  # fmt: skip
    with caplog.at_level("DEBUG", logger="scheduler.algorithm.schedule_one"):
        result = _schedule(fw, make_pod("p").namespace("ns1").requests(cpu="1").obj(), snap)
    assert isinstance(result, ScheduleResult) and result.node == "b"
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "scheduler.algorithm.schedule_one" and r.getMessage().startswith("final score")
    ]
    assert len(lines) == 2
    plugin_lines = [r.getMessage() for r in caplog.records if "plugin score" in r.getMessage()]
    # one weighted score per (score plugin, node), the final score their sum
    assert plugin_lines and len(plugin_lines) % 2 == 0
    summed: dict[str, int] = {}
    for line in plugin_lines:
        fields = dict(f.split("=", 1) for f in line.split()[2:])
        summed[fields["node"]] = summed.get(fields["node"], 0) + int(fields["score"])
    scores = {}
    for line in lines:
        head, node, score = line.rsplit(" ", 2)
        assert head == "final score pod=ns1/p"
        scores[node.removeprefix("node=")] = int(score.removeprefix("score="))
    assert set(scores) == {"a", "b"} and scores["b"] > scores["a"]
    assert summed == scores


def test_debug_log_names_the_single_feasible_node(caplog: pytest.LogCaptureFixture) -> None:
    fw = make_framework()
    snap = make_snapshot([make_node("a").taint("k"), make_node("b")])
    with caplog.at_level("DEBUG", logger="scheduler.algorithm.schedule_one"):
        _schedule(fw, make_pod("p").obj(), snap)
    logged = [r.getMessage() for r in caplog.records]
    assert [m for m in logged if not m.startswith("searched nodes ")] == [
        "single feasible node pod=default/p node=b"
    ]
    assert "searched nodes pod=default/p start=0 processed=2 feasible=1" in logged


def test_no_score_log_at_default_verbosity(caplog: pytest.LogCaptureFixture) -> None:
    fw = make_framework()
    with caplog.at_level("INFO", logger="scheduler.algorithm.schedule_one"):
        _schedule(fw, make_pod("p").obj(), make_snapshot([make_node("a"), make_node("b")]))
    assert not [r for r in caplog.records if r.name == "scheduler.algorithm.schedule_one"]


@pytest.mark.parametrize(("nominated_priority", "fits"), [(100, False), (99, True)])
def test_node_dry_run_counts_nominated_pods_of_equal_or_higher_priority(
    nominated_priority: int, fits: bool
) -> None:
    """The dry run looks at the node's nominated pods once; those at the preemptor's
    priority or above still take their space in every filter() (upstream
    RunFilterPluginsWithNominatedPods), lower ones do not."""
    from scheduler.cache import Cache

    victim = make_pod("v").requests(cpu="3").priority(1).node("a").obj()
    cache = Cache()
    cache.add_node(make_node("a").obj())
    cache.add_pod(victim)
    snap = cache.new_snapshot()
    fw = make_framework()
    pod = make_pod("p").priority(100).requests(cpu="2").obj()
    state = CycleState()
    assert fw.run_pre_filter(state, pod, snap)[1].ok
    nominator = Nominator()
    nominator.add(make_pod("n").priority(nominated_priority).requests(cpu="3").obj(), "a")
    view = snap.get("a")
    assert view is not None
    run = NodeDryRun(fw.filter_runner, state, pod, view, nominator)
    assert run.remove_pod(victim).ok
    assert run.filter().ok is fits


# Upstream's search with one worker (schedule_one.go findNodesThatPassFilters): the walk
# stops at the feasible node one past the number to find; every rejected node before it
# is processed, so the start index moves past them too.


def test_rejected_nodes_after_the_last_feasible_one_needed_are_processed() -> None:
    fw = make_framework(percentage=1)  # 100 to find among 300
    nodes = [
        make_node(f"n{i:03}").taint("k") if 100 <= i < 120 else make_node(f"n{i:03}")
        for i in range(300)
    ]
    search = SearchState()
    r = _schedule(fw, make_pod("p").obj(), make_snapshot(nodes), search=search)
    assert isinstance(r, ScheduleResult)
    assert (r.evaluated, r.feasible) == (120, 100)
    assert int(r.node[1:]) < 100
    assert search.next_start == 120


def test_start_index_moves_modulo_all_nodes_when_pre_filter_narrows() -> None:
    """upstream: node i of the walk is nodes[(next + i) % len(nodes)], and next moves by
    the nodes processed modulo len(allNodes), not of the narrowed list."""
    fw = make_framework()
    snap = make_snapshot([make_node(f"n{i:03}") for i in range(300)])
    pod = make_pod("p")
    for i in range(10):  # one name per term, as validation wants
        pod = pod.node_affinity_term(
            [], [{"key": "metadata.name", "operator": "In", "values": [f"n{i:03}"]}]
        )
    search = SearchState(next_start=295)
    r = _schedule(fw, pod.obj(), snap, search=search)
    assert isinstance(r, ScheduleResult) and r.evaluated == 10
    assert search.next_start == (295 + 10) % 300


def test_a_failed_nominated_node_counts_as_processed() -> None:
    """upstream: evaluateNominatedNode records the nominated node's status in the same
    NodeToStatus, so processedNodes counts it although the walk stops before it."""
    fw = make_framework(percentage=1)
    nodes = [make_node(f"n{i:03}") for i in range(299)] + [make_node("n299").taint("k")]
    search = SearchState()
    r = _schedule(fw, make_pod("p").nominated("n299").obj(), make_snapshot(nodes), search=search)
    assert isinstance(r, ScheduleResult) and (r.evaluated, r.feasible) == (101, 100)
    assert search.next_start == 101


def test_search_walks_the_node_tree_zone_by_zone() -> None:
    fw = make_framework(percentage=1)
    zone = "topology.kubernetes.io/zone"
    # 150 nodes in zone a, then 150 in zone b: the walk alternates a, b, a, b ...
    nodes = [make_node(f"a{i:03}").labels(**{zone: "a"}) for i in range(150)]
    nodes += [make_node(f"b{i:03}").labels(**{zone: "b"}) for i in range(150)]
    nodes[1] = nodes[1].taint("k")  # a001, the third node walked
    search = SearchState()
    snap = make_snapshot(nodes)
    r = _schedule(fw, make_pod("p").obj(), snap, search=search)
    assert isinstance(r, ScheduleResult) and (r.evaluated, r.feasible) == (101, 100)
    # 100 feasible: a000, b000, b001, a002, b002, ... a050, b050 (a001 rejected)
    assert search.next_start == 101
    walked = [snap.view(s).name for s in snap.node_order().tolist()]
    assert walked[:4] == ["a000", "b000", "a001", "b001"]


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize(("failing", "raised", "next_start"), [(50, True, 50), (150, False, 100)])
def test_a_filter_error_stops_the_search_and_still_moves_the_start(
    batch: bool, failing: int, raised: bool, next_start: int
) -> None:
    """upstream findNodesThatFitPod moves nextStartNodeIndex "regardless of whether an
    error has occurred", by the nodes processed before the failing one; a node past the
    stop (enough feasible nodes found) is never filtered, so its error never happens.
    The error comes from a per-node plugin's pass or from a batch plugin's."""
    import numpy as np

    from scheduler.algorithm import SchedulingError
    from scheduler.framework.interfaces import BatchFilterResult
    from scheduler.framework.status import Status

    fw = make_framework(percentage=1)  # 100 to find among 300
    snap = make_snapshot([make_node(f"n{i:03}") for i in range(300)])
    boom = Status.from_error(RuntimeError("boom"))
    bad = snap.slot_of(f"n{failing:03}")
    if batch:
        plugin = fw.filter_runner.batch_plugins[0]
        real_batch = plugin.filter_batch

        def filter_batch(state: Any, pod: Any, snapshot: Any, slots: Any) -> Any:
            res = real_batch(state, pod, snapshot, slots)
            passed = res.passed & (slots != bad)
            return BatchFilterResult(passed, [boom], np.zeros(len(slots), np.int32))

        plugin.filter_batch = filter_batch
    else:
        plugin = next(p for p in fw.filter_runner.node_plugins if p.name == "NodePorts")
        real = plugin.filter

        def node_filter(state: Any, pod: Any, view: Any) -> Any:
            return boom if view.name == f"n{failing:03}" else real(state, pod, view)

        plugin.filter = node_filter  # type: ignore[method-assign]
    pod = make_pod("p").host_port(8080).obj()  # NodePorts filters node by node
    search = SearchState()
    if raised:
        # the message is upstream's RunFilterPlugins wrapping (framework/filter_runner.py)
        failing_plugin = plugin.name
        with pytest.raises(SchedulingError) as raised_error:
            _schedule(fw, pod, snap, search=search)
        assert str(raised_error.value) == f'running "{failing_plugin}" filter plugin: boom'

    else:
        assert isinstance(_schedule(fw, pod, snap, search=search), ScheduleResult)
    assert search.next_start == next_start


def test_a_pre_filter_error_ends_the_cycle_in_upstreams_words() -> None:
    # upstream RunPreFilterPlugins: 'running PreFilter plugin "X": <err>', the pod's
    # FailedScheduling event and condition carry that text
    from scheduler.algorithm import SchedulingError
    from scheduler.framework.status import Status

    fw = make_framework()
    plugin = next(p for p in fw.pre_filter_plugins if p.name == "NodeResourcesFit")
    plugin.pre_filter = lambda state, pod, snapshot: (  # type: ignore[method-assign]
        None,
        Status.from_error(RuntimeError("boom")),
    )
    snap = make_snapshot([make_node("n1")])
    with pytest.raises(SchedulingError) as raised:
        _schedule(fw, make_pod("p").obj(), snap)
    assert str(raised.value) == 'running PreFilter plugin "NodeResourcesFit": boom'
    assert raised.value.status.plugin == "NodeResourcesFit"


class _OddScore(ScorePlugin, NormalizeScorePlugin):
    """A Score plugin that fails at Score, fails at NormalizeScore, or normalizes out of
    range, as told."""

    name = "OddScore"

    def __init__(self, fails_at: str) -> None:
        self.fails_at = fails_at

    def score(self, state: Any, pod: Any, view: Any) -> tuple[int, Status]:
        if self.fails_at == "score" and view.name == "n2":
            return 0, Status.from_error(RuntimeError("no score for n2"))
        return 10, Status.success()

    def normalize_scores(self, state: Any, pod: Any, scores: Any, slots: Any) -> Status:
        if self.fails_at == "normalize":
            return Status.from_error(RuntimeError("cannot normalize"))
        if self.fails_at == "range":
            scores[1] = 101
        return Status.success()


@pytest.mark.parametrize(
    ("fails_at", "message"),
    [
        # framework/runtime/framework.go RunScorePlugins around runRawScorePlugins
        ("score", 'running Score plugins: plugin "OddScore" failed with: no score for n2'),
        # normalizeScores, NormalizeScore step
        ("normalize",
         'running Normalize on Score plugins: plugin "OddScore" failed with: cannot normalize'),
        # normalizeScores, the range check before the weights (MinScore 0, MaxScore 100)
        ("range",
         'applying score defaultWeights on Score plugins: plugin "OddScore" returns an invalid '
         "score 101, it should in the range of [0, 100] after normalizing"),
    ],
)  # fmt: skip
def test_a_score_error_ends_the_cycle_in_upstreams_words(fails_at: str, message: str) -> None:
    from scheduler.algorithm import SchedulingError

    registry = in_tree_registry()
    registry.register("OddScore", _OddScore, lambda args, handle: _OddScore(fails_at))
    multi = tuple(r for r in names.DEFAULT_MULTI_POINT if r.name != names.DEFAULT_PREEMPTION)
    fw = Framework(
        build_profile((*multi, names.PluginRef("OddScore")), implements=registry.implements),
        registry,
    )
    snap = make_snapshot([make_node("n1"), make_node("n2"), make_node("n3")])
    with pytest.raises(SchedulingError) as raised:
        _schedule(fw, make_pod("p").obj(), snap)
    assert str(raised.value) == message
    assert raised.value.status.code == Code.ERROR
    assert raised.value.status.plugin == "OddScore"


def test_a_pre_score_error_ends_the_cycle_in_upstreams_words() -> None:
    from scheduler.algorithm import SchedulingError

    fw = make_framework()
    plugin = next(p for p in fw.pre_score_plugins if p.name == "NodeResourcesFit")
    plugin.pre_score = lambda state, pod, snapshot, slots: Status.from_error(  # type: ignore[method-assign]
        RuntimeError("boom")
    )
    snap = make_snapshot([make_node("n1"), make_node("n2")])
    with pytest.raises(SchedulingError) as raised:
        _schedule(fw, make_pod("p").obj(), snap)
    assert str(raised.value) == 'running PreScore plugin "NodeResourcesFit": boom'
    assert raised.value.status.plugin == "NodeResourcesFit"
