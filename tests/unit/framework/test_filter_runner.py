"""The one Filter rule (framework/filter_runner.py): its parts as upstream's
RunFilterPlugins / RunFilterPluginsWithNominatedPods / RunPreFilterExtensionAddPod, and a
planted change to it that scheduling, preemption's dry run and explain all observe."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from scheduler.algorithm import SchedulingError, schedule_pod
from scheduler.cache import Nominator
from scheduler.explain.evaluation import DryRunner
from scheduler.framework import CycleState, FitError, filter_runner
from scheduler.framework.dry_run import NodeDryRun
from scheduler.framework.filter_runner import (
    FilterRunner,
    active,
    passes,
    run_filter_plugins,
)
from scheduler.framework.status import Code, Status
from tests.unit.helpers.builders import make_framework, make_node, make_pod, make_snapshot
from tests.unit.preemption.test_default_preemption import high, world


class Scripted:
    """A Filter plugin answering `status` on every node; counts its calls."""

    def __init__(self, name: str, status: Status) -> None:
        self.name = name
        self.status = status
        self.calls = 0

    def filter(self, state: Any, pod: Any, view: Any) -> Status:
        self.calls += 1
        return self.status


class Extension:
    """A PreFilter extension whose AddPod answers `status`."""

    def __init__(self, name: str, status: Status) -> None:
        self.name = name
        self.status = status

    def add_pod(self, state: Any, pod: Any, other: Any, view: Any) -> Status:
        return self.status

    def remove_pod(self, state: Any, pod: Any, other: Any, view: Any) -> Status:
        return self.status


def _view() -> Any:
    return make_snapshot([make_node("n1").capacity(cpu="4")]).get("n1")


def test_the_first_status_in_profile_order_decides_and_skipped_plugins_do_not_run() -> None:
    skipped = Scripted("Skipped", Status.unresolvable("never asked"))
    first = Scripted("First", Status.unschedulable("first says no"))
    later = Scripted("Later", Status.unresolvable("later says no"))
    state = CycleState()
    state.skip_filter.add("Skipped")
    runner = FilterRunner([skipped, first, later], [])  # type: ignore[list-item]
    st = runner.run(state, make_pod("p").obj(), _view())
    assert (st.code, st.reasons, st.plugin) == (Code.UNSCHEDULABLE, ("first says no",), "First")
    assert (skipped.calls, first.calls, later.calls) == (0, 1, 0)
    assert active(runner.plugins, state) == [first, later]


@pytest.mark.parametrize("code", [Code.ERROR, Code.WAIT, Code.SKIP])
def test_a_status_that_is_not_a_rejection_is_the_plugins_error_in_upstreams_words(
    code: Code,
) -> None:
    # upstream RunFilterPlugins: "Filter plugins are not supposed to return any status
    # other than Success or Unschedulable"; anything else is wrapped as an error
    odd = Scripted("Odd", Status(code, ("boom",)))
    st = run_filter_plugins([odd], CycleState(), make_pod("p").obj(), _view())
    assert st.code == Code.ERROR and st.plugin == "Odd"
    assert st.message() == 'running "Odd" filter plugin: boom'


def test_the_verdict_alone_agrees_with_the_rule_over_every_outcome() -> None:
    # `passes` is the rule's verdict without the Status (the dry run's reprieve steps)
    codes = list(Code)
    view, pod = _view(), make_pod("p").obj()
    for a in codes:
        for b in codes:
            plugins = [Scripted("A", Status(a, ("a",))), Scripted("B", Status(b, ("b",)))]
            full = run_filter_plugins(plugins, CycleState(), pod, view)
            assert passes(plugins, CycleState(), pod, view) == (full.code == Code.SUCCESS)


def test_an_add_pod_error_ends_the_nominated_pods_rule_in_upstreams_words() -> None:
    runner = FilterRunner(
        [Scripted("Fit", Status.success())],
        [Extension("Spread", Status.from_error(RuntimeError("bad state")))],  # type: ignore[list-item]
    )
    nominator = Nominator()
    nominated = make_pod("other").priority(10).obj()
    nominator.add(nominated, "n1")
    st = runner.run_with_nominated_pods(CycleState(), make_pod("p").obj(), _view(), nominator)
    assert st.code == Code.ERROR and st.plugin == "Spread"
    assert st.message() == 'running AddPod on PreFilter plugin "Spread": bad state'


def test_the_nominated_pods_rule_runs_twice_only_when_pods_were_added() -> None:
    fit = Scripted("Fit", Status.success())
    runner = FilterRunner([fit], [])  # type: ignore[list-item]
    pod = make_pod("p").priority(5).obj()
    nominator = Nominator()
    assert runner.run_with_nominated_pods(CycleState(), pod, _view(), nominator).ok
    assert fit.calls == 1
    nominator.add(make_pod("lower").priority(1).obj(), "n1")  # below the pod: not counted
    assert runner.run_with_nominated_pods(CycleState(), pod, _view(), nominator).ok
    assert fit.calls == 2
    nominator.add(make_pod("equal").priority(5).obj(), "n1")
    assert runner.run_with_nominated_pods(CycleState(), pod, _view(), nominator).ok
    assert fit.calls == 4  # with the nominated pod, then without it


async def test_a_planted_change_to_the_rule_is_seen_by_scheduling_dry_run_and_explain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rule is one function: change how it words a rejection and every caller (the
    scheduling algorithm's batch and per-node passes, preemption's dry run, explain)
    reports the changed words."""
    real = filter_runner.decided_by

    def planted(status: Status, plugin: str) -> Status:
        st = real(status, plugin)
        if st.code == Code.SUCCESS:
            return st
        return dataclasses.replace(st, reasons=tuple(f"planted: {r}" for r in st.reasons))

    monkeypatch.setattr(filter_runner, "decided_by", planted)
    w = world()  # two full nodes; the high pod fits nowhere (NodeResourcesFit, a batch plugin)
    pod = high()

    # scheduling: the batch plugin's rejections
    snapshot = w.cache.new_snapshot()
    state = CycleState()
    fit = schedule_pod(w.framework, state, pod, snapshot, w.nominator)
    assert isinstance(fit, FitError)
    messages = {s.message() for s in fit.diagnosis.node_to_status().values()}
    assert messages and all(m.startswith("planted: ") for m in messages), messages

    # preemption's dry run of one node, before any victim is removed
    view = snapshot.get("n0")
    assert view is not None
    st = NodeDryRun(w.framework.filter_runner, state, pod, view, w.nominator).filter()
    assert st.is_rejected and st.message().startswith("planted: "), st

    # explain's evaluation of the same pod
    now = (await DryRunner(w.cache, w.nominator).evaluate(w.framework, pod)).value
    assert now.statuses is not None and now.statuses
    assert all(s.message().startswith("planted: ") for s in now.statuses.values())


def test_a_planted_change_is_seen_by_the_per_node_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    real = filter_runner.decided_by
    monkeypatch.setattr(
        filter_runner,
        "decided_by",
        lambda status, plugin: dataclasses.replace(
            real(status, plugin), reasons=("planted",), code=Code.ERROR
        ),
    )
    fw = make_framework()
    # NodePorts filters node by node: a taken host port is its rejection
    snap = make_snapshot([make_node("n1")], [make_pod("holder").node("n1").host_port(8080)])
    with pytest.raises(SchedulingError, match="planted"):
        schedule_pod(fw, CycleState(), make_pod("p").host_port(8080).obj(), snap, Nominator())
