"""Opportunistic batching (algorithm/batch.py, signature.py): the signature rules per
plugin, the state machine (when a stored list is used, and why it is dropped), and that
a hint is what a full evaluation would have picked."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler.algorithm import ProfileAlgorithm, schedule_pod
from scheduler.algorithm import batch as batching
from scheduler.cache import Cache, Nominator
from scheduler.catalog import profile_for
from scheduler.config import names
from scheduler.config.args import parse_plugin_args
from scheduler.framework import CycleState, FitError, Framework, ScheduleResult, SearchState, Status
from scheduler.framework.signature import batchable
from scheduler.framework.status import Code
from scheduler.metrics import SchedulerMetrics
from scheduler.model.pod import PodInfo
from scheduler.plugins.registry import in_tree_registry
from tests.unit.helpers.builders import make_node, make_pod

PROFILE = "default-scheduler"
# the profile batching needs: PodTopologySpread without default constraints
LIST_DEFAULTING = {"PodTopologySpread": {"defaultingType": "List"}}


def framework(
    args: dict[str, Any] | None = None, percentage: int | None = None
) -> tuple[Framework, SchedulerMetrics]:
    refs = tuple(r for r in names.DEFAULT_MULTI_POINT if r.name != names.DEFAULT_PREEMPTION)
    parsed = {n: parse_plugin_args(n, a, n) for n, a in (args or {}).items()}
    profile = profile_for(refs, plugin_args=parsed, percentage_of_nodes_to_score=percentage)
    metrics = SchedulerMetrics()
    return Framework(profile, in_tree_registry()), metrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cluster:
    """A cache and the loop's part of a cycle: count the cycle, update the snapshot,
    schedule with the profile's batching, assume the pod."""

    def __init__(
        self, fw: Framework, metrics: SchedulerMetrics, nodes: list[Any], seed: int = 1
    ) -> None:
        self.fw = fw
        self.cache = Cache()
        for n in nodes:
            self.cache.add_node(n.obj())
        self.snapshot = self.cache.new_snapshot()
        self.search = SearchState(rng=random.Random(seed))
        self.nominator = Nominator()
        self.clock = Clock()
        # the loop's ProfileAlgorithm keeps one of these per profile; here with a test clock
        self.batch = batching.OpportunisticBatch(fw, metrics, self.clock)

    def schedule(self, pod: PodInfo, *, skip_cycles: int = 0) -> ScheduleResult | FitError:
        self.search.cycle += 1 + skip_cycles
        self.cache.update_snapshot(self.snapshot)
        result = schedule_pod(
            self.fw, CycleState(), pod, self.snapshot, self.nominator,
            search=self.search, batch=self.batch,
        )  # fmt: skip
        if isinstance(result, ScheduleResult):
            self.cache.assume_pod(pod, result.node)
        return result

    def best_nodes(self, pod: PodInfo) -> set[str]:
        """The nodes a full evaluation (every node, no batching) scores highest now."""
        self.cache.update_snapshot(self.snapshot)
        state = CycleState()
        _, st = self.fw.run_pre_filter(state, pod, self.snapshot)
        assert st.ok
        feasible = np.asarray(
            [
                s
                for s in self.snapshot.live_slots().tolist()
                if self.fw.run_filter(state, pod, self.snapshot.view(s)).ok
            ],
            dtype=np.int64,
        )
        assert self.fw.run_pre_score(state, pod, self.snapshot, feasible).ok
        total, _, st = self.fw.run_score(state, pod, self.snapshot, feasible)
        assert st.ok
        return {self.snapshot.view(int(s)).name for s in feasible[total == total.max()]}


def replica(i: int, cpu: str = "500m") -> PodInfo:
    return make_pod(f"web-{i}").labels(app="web").owner("ReplicaSet", "web").requests(
        cpu=cpu, memory="256Mi"
    ).obj()


def attempts(m: SchedulerMetrics, result: str) -> float:
    v = m.registry.get_sample_value(
        "scheduler_batch_attempts_total", {"profile": PROFILE, "result": result}
    )
    return v or 0.0


def flushed(m: SchedulerMetrics, reason: str) -> float:
    v = m.registry.get_sample_value(
        "scheduler_batch_cache_flushed_total", {"profile": PROFILE, "reason": reason}
    )
    return v or 0.0


def sized_nodes(n: int) -> list[Any]:
    # distinct sizes, so scores rarely tie
    return [make_node(f"n{i}").capacity(cpu=str(4 + i), memory=f"{8 + 3 * i}Gi") for i in range(n)]


# ------------------------------------------------------------------ signatures


def test_no_pod_is_signed_under_system_defaulting() -> None:
    # upstream's default profile: PodTopologySpread with System defaulting has default
    # constraints, and its SignPod refuses every pod, so nothing is ever batched
    fw, _ = framework()
    assert fw.signatures_enabled  # every plugin of the profile signs...
    assert fw.sign_pod(replica(0)) is None  # ...but PodTopologySpread refuses the pod


def test_list_defaulting_with_default_constraints_signs_nothing() -> None:
    constraint = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    fw, _ = framework(
        {"PodTopologySpread": {"defaultingType": "List", "defaultConstraints": [constraint]}}
    )
    assert fw.sign_pod(replica(0)) is None


def test_replicas_of_one_owner_share_a_signature() -> None:
    fw, _ = framework(LIST_DEFAULTING)
    a, b = fw.sign_pod(replica(0)), fw.sign_pod(replica(1))
    assert a is not None
    assert a == b


@pytest.mark.parametrize(
    ("other", "same"),
    [
        (lambda p: p.requests(cpu="600m", memory="256Mi"), False),
        (lambda p: p.label("tier", "x"), False),  # InterPodAffinity signs the labels
        (lambda p: p.toleration("k", "v"), False),
        (lambda p: p.node_selector(disk="ssd"), False),
        (lambda p: p.node_affinity_in("zone", "a"), False),
        (lambda p: p.preferred_node_affinity(5, "zone", "a"), False),
        (lambda p: p.host_port(8080), False),
        (lambda p: p.image("other:1"), False),
        (lambda p: p.pvc("data"), False),
        (lambda p: p.scheduler("other"), False),
        (lambda p: p.priority(100), True),  # no Filter/Score plugin reads it
        (lambda p: p.owner("ReplicaSet", "elsewhere"), True),
    ],
)
def test_what_changes_a_signature(other: Any, same: bool) -> None:
    fw, _ = framework(LIST_DEFAULTING)

    def base(name: str) -> Any:
        return make_pod(name).labels(app="web").requests(cpu="500m", memory="256Mi")

    a = fw.sign_pod(base("a").obj())
    b = fw.sign_pod(other(base("b")).obj())
    assert a is not None and b is not None
    assert (a == b) is same


def test_order_that_does_not_matter_does_not_change_a_signature() -> None:
    fw, _ = framework(LIST_DEFAULTING)
    a = make_pod("a").toleration("k1", "v").toleration("k2", "v").node_affinity_in("z", "a", "b")
    b = make_pod("b").toleration("k2", "v").toleration("k1", "v").node_affinity_in("z", "b", "a")
    assert fw.sign_pod(a.obj()) == fw.sign_pod(b.obj())


def test_pods_with_their_own_spread_or_pod_affinity_are_not_signed() -> None:
    fw, _ = framework(LIST_DEFAULTING)
    spread = make_pod("s").labels(app="web").spread(1, "zone", {"app": "web"}).obj()
    affinity = make_pod("a").labels(app="web").pod_affinity("zone", {"app": "db"}).obj()
    preferred = make_pod("p").pod_affinity("zone", {"app": "db"}, anti=True, weight=5).obj()
    assert fw.sign_pod(spread) is None
    assert fw.sign_pod(affinity) is None
    assert fw.sign_pod(preferred) is None


def test_labels_are_left_out_when_existing_pods_preferred_terms_are_ignored() -> None:
    fw, _ = framework(
        {**LIST_DEFAULTING, "InterPodAffinity": {"ignorePreferredTermsOfExistingPods": True}}
    )
    a = fw.sign_pod(make_pod("a").labels(app="web").obj())
    b = fw.sign_pod(make_pod("b").labels(app="db").obj())
    assert a is not None and a == b


def test_a_plugin_that_does_not_sign_turns_signatures_off() -> None:
    class Unsigned:
        name = "Unsigned"

    fw, _ = framework(LIST_DEFAULTING)
    signers, unsigned = batchable([*fw.filter_plugins, Unsigned()])
    assert unsigned == ["Unsigned"]
    assert {p.name for p in signers} == {p.name for p in fw.filter_plugins}


# ------------------------------------------------------------------ the state machine


def test_identical_pods_take_the_hint_and_each_is_a_best_node() -> None:
    fw, m = framework(LIST_DEFAULTING)
    c = Cluster(fw, m, sized_nodes(12))
    for i in range(10):
        pod = replica(i)
        best = c.best_nodes(pod)
        result = c.schedule(pod)
        assert isinstance(result, ScheduleResult)
        assert result.node in best, (i, result.node, best)
    assert attempts(m, batching.NO_HINT) == 1  # only the first pod searched
    assert attempts(m, batching.HINT_USED) == 9
    assert c.batch.batched_pods == 9
    # each cycle re-filtered and re-scored the node the previous pod took
    rescores = m.registry.get_sample_value(
        "scheduler_batch_rescore_attempts_total", {"profile": PROFILE}
    )
    assert rescores == 9
    assert m.registry.get_sample_value(
        "scheduler_get_node_hint_duration_seconds_count", {"hinted": "hint", "profile": PROFILE}
    ) == 9


def test_a_hinted_cycle_does_not_move_the_node_search_on() -> None:
    fw, m = framework(LIST_DEFAULTING)
    c = Cluster(fw, m, sized_nodes(6))
    c.schedule(replica(0))
    start = c.search.next_start
    result = c.schedule(replica(1))
    assert isinstance(result, ScheduleResult)
    assert (result.evaluated, result.feasible) == (1, 1)
    assert c.search.next_start == start


def test_a_full_last_node_is_left_out_not_rescored() -> None:
    fw, m = framework(LIST_DEFAULTING)
    # the biggest node takes the first pod and is then full (1 cpu left of 4.5)
    nodes = [make_node("big").capacity(cpu="4500m", memory="64Gi")]
    nodes += [make_node(f"s{i}").capacity(cpu="4", memory="8Gi") for i in range(3)]
    c = Cluster(fw, m, nodes)
    first = c.schedule(replica(0, cpu="3500m"))
    assert isinstance(first, ScheduleResult) and first.node == "big"
    second = c.schedule(replica(1, cpu="3500m"))
    assert isinstance(second, ScheduleResult) and second.node.startswith("s")
    assert attempts(m, batching.HINT_USED) == 1
    assert not m.registry.get_sample_value(
        "scheduler_batch_rescore_attempts_total", {"profile": PROFILE}
    )


def test_unsigned_pods_are_never_batched() -> None:
    fw, m = framework()  # System defaulting
    c = Cluster(fw, m, sized_nodes(5))
    for i in range(3):
        assert isinstance(c.schedule(replica(i)), ScheduleResult)
    assert attempts(m, batching.HINT_USED) == 0
    assert flushed(m, batching.FLUSH_POD_NOT_BATCHABLE) == 3
    assert c.batch.remaining() == 0


def test_one_feasible_node_leaves_nothing_to_keep() -> None:
    fw, m = framework(LIST_DEFAULTING)
    c = Cluster(fw, m, [make_node("only").capacity(cpu="8", memory="16Gi")])
    c.schedule(replica(0))
    assert flushed(m, batching.FLUSH_EMPTY_LIST) == 1
    assert c.batch.remaining() == 0


@pytest.mark.parametrize(
    ("reason", "between"),
    [
        (batching.FLUSH_POD_SKIPPED, "skip"),
        (batching.FLUSH_POD_INCOMPATIBLE, "other-pod"),
        (batching.FLUSH_EXPIRED, "late"),
        (batching.FLUSH_POD_NOMINATED, "nominated"),
        (batching.FLUSH_NODE_MISSING, "node-gone"),
    ],
)
def test_why_a_stored_list_is_not_used(reason: str, between: str) -> None:
    fw, m = framework(LIST_DEFAULTING)
    c = Cluster(fw, m, sized_nodes(6))
    first = c.schedule(replica(0))
    assert isinstance(first, ScheduleResult)
    assert c.batch.remaining() == 5
    pod, skip = replica(1), 0
    if between == "skip":
        skip = 1  # another pod (any profile) had the cycle in between
    elif between == "other-pod":
        pod = replica(1, cpu="700m")
    elif between == "late":
        c.clock.now += batching.MAX_BATCH_AGE + 0.01
    elif between == "nominated":
        pod = make_pod("web-1").labels(app="web").owner("ReplicaSet", "web").requests(
            cpu="500m", memory="256Mi"
        ).nominated("n0").obj()
    elif between == "node-gone":
        node = c.cache.node(first.node)
        assert node is not None
        c.cache.remove_node(node)
    result = c.schedule(pod, skip_cycles=skip)
    assert isinstance(result, ScheduleResult)
    assert flushed(m, reason) == 1
    assert attempts(m, batching.HINT_USED) == 0
    assert attempts(m, batching.NO_HINT) == 2
    # the full search's results are stored afresh for the next pod (all signed here);
    # the nominated pod's node passed alone, which leaves nothing to store
    assert c.batch.remaining() == (0 if between == "nominated" else len(c.snapshot.live_slots()) - 1)


def test_a_hint_that_fails_with_nominated_pods_is_not_used() -> None:
    fw, m = framework(LIST_DEFAULTING)
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi") for i in range(4)]
    c = Cluster(fw, m, nodes)
    first = c.schedule(replica(0))
    assert isinstance(first, ScheduleResult)
    # a higher-priority pod nominated to every other node takes it whole: the refresh
    # (plain Filter) keeps the list, the hint's check (with nominated pods) fails
    for n in nodes:
        name = n.obj().name
        if name != first.node:
            big = make_pod(f"big-{name}").priority(1000).requests(cpu="4").obj()
            c.nominator.add(big, name)
    result = c.schedule(replica(1))
    assert isinstance(result, ScheduleResult)
    assert result.node == first.node  # the only node the nominations leave
    assert attempts(m, batching.HINT_NOT_USED) == 1


def test_a_fit_error_breaks_the_chain() -> None:
    fw, m = framework(LIST_DEFAULTING)
    c = Cluster(fw, m, sized_nodes(4))
    c.schedule(replica(0))
    too_big = make_pod("huge").requests(cpu="64").obj()
    assert isinstance(c.schedule(too_big), FitError)
    c.schedule(replica(1))
    # the failed cycle stored nothing, so the next pod's cycle does not follow the stored one
    assert flushed(m, batching.FLUSH_POD_SKIPPED) == 1
    assert attempts(m, batching.HINT_USED) == 0


@pytest.mark.parametrize(
    ("method", "reason"),
    [
        ("run_filter", batching.FLUSH_FILTER_ERROR),
        ("run_pre_score", batching.FLUSH_PRESCORE_ERROR),
        ("run_raw_scores", batching.FLUSH_RESCORE_ERROR),
        ("normalize_scores", batching.FLUSH_NORMALIZE_ERROR),
    ],
)
def test_errors_while_refreshing_drop_the_hint(
    method: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fw, m = framework(LIST_DEFAULTING)
    c = Cluster(fw, m, sized_nodes(5))
    c.schedule(replica(0))
    error = Status(Code.ERROR, ("boom",), "Test")

    def failing(*args: Any) -> Any:
        if method == "run_filter" or method == "run_pre_score":
            return error
        if method == "run_raw_scores":
            return {}, error
        return np.zeros(0, dtype=np.int64), {}, error

    # only the batch's own calls fail: it holds the framework as its handle
    class Handle:
        def __getattr__(self, name: str) -> Any:
            return failing if name == method else getattr(fw, name)

    c.batch._handle = Handle()  # type: ignore[assignment]
    result = c.schedule(replica(1))
    assert isinstance(result, ScheduleResult)  # the full search still places the pod
    assert flushed(m, reason) == 1
    assert attempts(m, batching.HINT_USED) == 0


def test_a_dry_run_leaves_the_batch_alone() -> None:
    fw, m = framework(LIST_DEFAULTING)
    c = Cluster(fw, m, sized_nodes(5))
    c.schedule(replica(0))
    before = c.batch.remaining()
    # explain's dry run calls schedule_pod without the batch
    schedule_pod(fw, CycleState(), replica(1), c.snapshot, c.nominator, search=SearchState())
    assert c.batch.remaining() == before
    assert isinstance(c.schedule(replica(1)), ScheduleResult)
    assert attempts(m, batching.HINT_USED) == 1


def test_the_stored_list_runs_out() -> None:
    fw, m = framework(LIST_DEFAULTING)
    # each node fits one pod: no last node comes back, the list shrinks to nothing
    nodes = [make_node(f"n{i}").capacity(cpu="1", memory="2Gi") for i in range(3)]
    c = Cluster(fw, m, nodes)
    placed = [c.schedule(replica(i, cpu="800m")) for i in range(3)]
    assert all(isinstance(r, ScheduleResult) for r in placed)
    assert sorted(r.node for r in placed if isinstance(r, ScheduleResult)) == ["n0", "n1", "n2"]
    assert attempts(m, batching.HINT_USED) == 2
    assert c.batch.remaining() == 0
    assert isinstance(c.schedule(replica(3, cpu="800m")), FitError)


def test_a_node_added_between_cycles_is_not_a_candidate_but_the_list_still_holds() -> None:
    # upstream's stored list knows only the nodes the search saw; a new node (which also
    # moves every slot lookup onto the by-name path here) changes nothing else
    fw, m = framework(LIST_DEFAULTING)
    c = Cluster(fw, m, sized_nodes(4))
    c.schedule(replica(0))
    c.cache.add_node(make_node("huge").capacity(cpu="64", memory="256Gi").obj())
    result = c.schedule(replica(1))
    assert isinstance(result, ScheduleResult)
    assert result.node != "huge"
    assert attempts(m, batching.HINT_USED) == 1


async def test_the_loop_counts_every_popped_pod_as_a_cycle() -> None:
    # upstream's cycle count is the queue's Pop count: a pod popped and skipped (being
    # deleted) still takes a cycle, so the next replica finds no consecutive batch
    from scheduler.loop import SchedulingLoop
    from scheduler.queue import SchedulingQueue
    from scheduler.status_writer import StatusWriter
    from tests.unit.helpers.fake_clock import FakeClock

    async def no_patch(namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return {}

    class Events:
        def event(self, *args: Any, **kw: Any) -> None:
            pass

    fw, m = framework(LIST_DEFAULTING)
    cache = Cache()
    for n in sized_nodes(6):
        cache.add_node(n.obj())
    queue: SchedulingQueue[PodInfo] = SchedulingQueue(clock=FakeClock(), metrics=m)
    loop = SchedulingLoop(
        cache=cache,
        queue=queue,
        nominator=Nominator(),
        frameworks={fw.profile_name: fw},
        algorithms={fw.profile_name: ProfileAlgorithm(fw, m)},
        events=Events(),  # type: ignore[arg-type]
        status_writer=StatusWriter(no_patch, metrics=m),
        metrics=m,
        clock=FakeClock(),
    )

    async def cycle(pod: PodInfo) -> None:
        queue.add(pod)
        info = await queue.pop()
        assert info is not None
        loop.schedule_one(info)

    await cycle(replica(0))
    await cycle(replica(1))
    assert attempts(m, batching.HINT_USED) == 1
    leaving = make_pod("web-x").labels(app="web").terminating().obj()
    await cycle(leaving)
    await cycle(replica(2))
    assert loop.search.cycle == 4
    assert flushed(m, batching.FLUSH_POD_SKIPPED) == 1
    assert attempts(m, batching.HINT_USED) == 1
    await loop.drain_binds(0)


def test_a_refusal_reorders_the_signers_but_changes_no_signature() -> None:
    fw, _ = framework(LIST_DEFAULTING)
    before = fw.sign_pod(replica(0))
    spread = make_pod("s").labels(app="web").spread(1, "zone", {"app": "web"}).obj()
    assert fw.sign_pod(spread) is None
    assert fw.signers[0].name == "PodTopologySpread"  # asked first from now on
    assert fw.sign_pod(replica(1)) == before
