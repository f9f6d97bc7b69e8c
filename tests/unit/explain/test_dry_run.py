"""explain's dry run writes nothing shared: its own snapshot (Cache.refresh_snapshot keeps
the cache's tombstones for the loop's snapshot), DefaultPreemption's `what_if` (PostFilter's
decision with no nomination, no task, no metric, no policy bookkeeping)."""

from __future__ import annotations

import asyncio

from scheduler.algorithm import schedule_pod
from scheduler.cache import Cache, Snapshot
from scheduler.explain.evaluation import DryRunner
from scheduler.framework import CycleState, FitError
from scheduler.model.pod import PodInfo
from scheduler.preemption.default_preemption import DefaultPreemption
from scheduler.preemption.victim_policy import VictimRules
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.preemption.test_default_preemption import high, world


def _names(snapshot: Snapshot) -> list[str]:
    return sorted(snapshot.node_names())


def _two_nodes_two_snapshots() -> tuple[Cache, Snapshot, Snapshot]:
    """Nodes "keep" and "gone"; the loop's snapshot and explain's, both up to date."""
    cache = Cache()
    for name in ("keep", "gone"):
        cache.add_node(make_node(name).capacity(cpu="4").obj())
    loops = cache.new_snapshot()
    explains = Snapshot()
    cache.refresh_snapshot(explains)
    return cache, loops, explains


def test_a_refresh_keeps_the_tombstones_for_the_loops_snapshot() -> None:
    """The ghost-node order: an empty node deleted, explain's refresh before the loop's
    next update, then the loop's update: the node must leave the loop's snapshot."""
    cache, loops, explains = _two_nodes_two_snapshots()
    assert _names(explains) == ["gone", "keep"]
    cache.remove_node(make_node("gone").obj())
    assert cache.refresh_snapshot(explains) == 0
    assert _names(explains) == ["keep"]
    cache.update_snapshot(loops)
    assert _names(loops) == ["keep"]


def test_a_refresh_after_the_loop_purged_a_tombstone_drops_the_node() -> None:
    cache, loops, explains = _two_nodes_two_snapshots()
    cache.remove_node(make_node("gone").obj())
    cache.update_snapshot(loops)  # the loop purges the tombstone first
    cache.refresh_snapshot(explains)
    assert _names(explains) == _names(loops) == ["keep"]
    cache.add_node(make_node("gone").capacity(cpu="2").obj())  # back under the same name
    cache.refresh_snapshot(explains)
    assert _names(explains) == ["gone", "keep"]


def test_a_refresh_in_steps_ends_equal_to_a_snapshot_built_at_once() -> None:
    cache = Cache()
    for i in range(25):
        cache.add_node(make_node(f"n{i:02}").capacity(cpu="8").obj())
        cache.add_pod(make_pod(f"p{i}").node(f"n{i:02}").requests(cpu="1").obj())
    stepwise = Snapshot()
    steps = 0
    while cache.refresh_snapshot(stepwise, 4):
        steps += 1
        # the loop keeps changing the cache between steps
        if steps == 2:
            cache.add_pod(make_pod("late").node("n00").requests(cpu="2").obj())
            cache.remove_node(make_node("n24").obj())
    whole = cache.new_snapshot()
    assert steps >= 6
    assert _names(stepwise) == _names(whole)
    for view in whole.node_views():
        mine = stepwise.get(view.name)
        assert mine is not None and set(mine.pods) == set(view.pods)
        assert mine.requested == view.requested


class AllowAll:
    """The rules of one policy, "p", that refuses nothing."""

    policies = ("p",)

    def refusal(self, victim: PodInfo, /) -> str | None:
        return None

    def over_cap(self, victims: int, /) -> str | None:
        return None

    def refusing_policies(self) -> tuple[str, ...]:
        return ()

    def refusal_summary(self) -> str:
        return ""


class Recorder:
    """A VictimPolicy whose rules allow everything; notes every record() call."""

    def __init__(self) -> None:
        self.records: list[str] = []

    def refuse_all(self, preemptor: PodInfo, /) -> str | None:
        return None

    def note_refused_all(self, preemptor: PodInfo, /) -> None:
        self.records.append(f"refused {preemptor.key}")

    def rules_for(self, preemptor: PodInfo, /) -> VictimRules | None:
        return AllowAll()

    def record(
        self, preemptor: PodInfo, rules: VictimRules, victims: tuple[PodInfo, ...] | None, /
    ) -> None:
        self.records.append(preemptor.key)


async def test_what_if_decides_as_post_filter_and_does_none_of_it() -> None:
    w = world()
    pod = high()
    snapshot = w.cache.new_snapshot()
    state = CycleState()
    fit = schedule_pod(w.framework, state, pod, snapshot, w.nominator)
    assert isinstance(fit, FitError)
    evaluation, status = w.plugin.what_if(state, pod, snapshot, fit.diagnosis)
    assert evaluation is not None and evaluation.decision is not None
    assert status.ok and "preempting 3 victims" in status.message()
    # nothing happened: no nomination, no task, no metric, no Diagnosis message
    assert w.nominator.nominated_node(pod) is None
    assert not w.executor.is_running(pod.uid) and w.api.calls == []
    assert w.sample("scheduler_preemption_attempts_total") in (None, 0)
    assert fit.diagnosis.post_filter_msg == ""
    # PostFilter, asked the same question, decides the same
    result, real = w.cycle(pod, direct=True)
    assert real.ok and result is not None
    assert result.nominated_node_name == evaluation.decision.node
    await asyncio.gather(*w.executor._tasks)


def test_what_if_records_no_policy_outcome() -> None:
    w = world()
    recorder = Recorder()
    w.plugin.services.victim_policy = recorder
    # the evaluators take the services' policy when built: build the plugin anew
    plugin = DefaultPreemption(w.plugin.args, w.plugin.handle, w.plugin.services)
    pod = high()
    snapshot = w.cache.new_snapshot()
    state = CycleState()
    fit = schedule_pod(w.framework, state, pod, snapshot, w.nominator)
    assert isinstance(fit, FitError)
    evaluation, _ = plugin.what_if(state, pod, snapshot, fit.diagnosis)
    assert evaluation is not None and evaluation.decision is not None
    assert recorder.records == [] and plugin.policies_for(pod) == ("p",)
    # PostFilter's evaluator, on the same question, records the outcome
    plugin._evaluate(plugin.evaluator, state, pod, snapshot, fit.diagnosis)
    assert recorder.records == [pod.key]


async def test_the_dry_run_leaves_the_cache_and_the_loops_snapshot_as_they_were() -> None:
    w = world(nodes=3)
    loops = w.cache.new_snapshot()
    w.cache.add_node(make_node("empty").capacity(cpu="4").obj())
    w.cache.update_snapshot(loops)
    w.cache.remove_node(make_node("empty").obj())  # deleted: a tombstone until the loop's update
    runner = DryRunner(w.cache, w.nominator, step_entries=2)
    timed = await runner.evaluate(w.framework, high())
    now = timed.value
    assert now.result == "Unschedulable" and now.preemption is not None
    assert now.preemption.node is not None and len(now.preemption.victims) == 3
    assert now.statuses is not None and "empty" not in now.statuses
    assert timed.busy > 0
    assert w.nominator.nominated_node(high()) is None and not w.executor._tasks
    w.cache.update_snapshot(loops)
    assert "empty" not in loops.node_names()
    await asyncio.sleep(0)


async def test_the_copy_is_dropped_after_keep_idle_and_built_again_when_asked() -> None:
    w = world(nodes=3)
    runner = DryRunner(w.cache, w.nominator, keep_idle=0.05)
    await runner.evaluate(w.framework, high())
    assert runner.snapshot.num_nodes == 3
    dropped = asyncio.Event()
    asyncio.get_running_loop().call_later(0.2, dropped.set)
    await dropped.wait()
    assert runner.snapshot.num_nodes == 0
    timed = await runner.evaluate(w.framework, high())
    assert runner.snapshot.num_nodes == 3 and timed.value.result == "Unschedulable"


async def test_what_if_while_the_pods_preemption_runs_says_postfilter_would_wait() -> None:
    w = world()
    pod = high()
    w.api.hold[("delete", "v0-0")] = asyncio.Event()  # the task stays on its last victim
    _, status = w.cycle(pod)
    assert status.ok and w.preempting(pod)
    snapshot = w.cache.new_snapshot()
    state = CycleState()
    fit = schedule_pod(w.framework, state, pod, snapshot, w.nominator)
    assert isinstance(fit, FitError)
    evaluation, waiting = w.plugin.what_if(state, pod, snapshot, fit.diagnosis)
    assert evaluation is None and "waiting for the preemption" in waiting.message()
    w.api.hold[("delete", "v0-0")].set()
    await asyncio.gather(*w.executor._tasks)
