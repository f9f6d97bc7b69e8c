"""PreemptionPolicy: reading objects, combining policies, and the evaluator's hook."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from scheduler.cache.node_view import NodeView
from scheduler.config.args import DefaultPreemptionArgs
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo
from scheduler.policy.spec import PolicyError, parse_policy
from scheduler.policy.store import PolicyStore
from scheduler.preemption.policy_evaluator import PolicyEvaluator
from scheduler.preemption.victim_policy import recording_nothing
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.preemption_fakes import MemoryNominator, ResourceFit

NOW = dt.datetime(2024, 1, 1, 0, 10, tzinfo=dt.UTC).timestamp()
NS_LABELS = {"prod": {"tier": "prod"}, "batch": {"tier": "batch"}, "kube-system": {}}


def policy(name: str, generation: int = 1, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "generation": generation}, "spec": spec}


def victim(
    name: str, prio: int = 0, ns: str = "batch", started_ago: int = 600, cpu: str = "1", **kw: str
) -> PodInfo:
    start = dt.datetime.fromtimestamp(NOW - started_ago, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    b = make_pod(name, ns).priority(prio).requests(cpu=cpu).node("n1").started(start)
    if "owner" in kw:
        b = b.owner("ReplicaSet", kw["owner"])
    return dataclasses.replace(b.obj(), priority_class_name=kw.get("cls", ""))


def preemptor(ns: str = "batch", prio: int = 1000, cpu: str = "4") -> PodInfo:
    return make_pod("hi", ns).priority(prio).requests(cpu=cpu).obj()


def store(*policies: dict[str, Any]) -> PolicyStore:
    s = PolicyStore(NS_LABELS.get, wall=lambda: NOW)
    for p in policies:
        s.apply(p)
    return s


def evaluate(s: PolicyStore, pods: list[PodInfo], pre: PodInfo | None = None) -> Any:
    view = NodeView(make_node("n1").capacity(cpu="4", pods="110").obj())
    for p in pods:
        view.add_pod(p)
    ev = PolicyEvaluator(DefaultPreemptionArgs(), {"default-scheduler"}, s, rand=lambda n: 0)
    nominator = MemoryNominator()
    return ev.evaluate(
        pre or preemptor(),
        {"n1": Status.unschedulable("Insufficient cpu")},
        {"n1": view},
        nominator,
        (),
        ResourceFit(nominator),
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"victims": {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}},
         "spec.victims.labelSelector.matchExpressions[0].values"),
        ({"victims": {"namespaceSelector": {"matchLabels": {"bad key!": "x"}}}},
         "spec.victims.namespaceSelector"),
        ({"protectedNamespaces": ["Not_A_Namespace"]}, "spec.protectedNamespaces"),
        ({"maxVictimsPerPreemption": 0}, "spec.maxVictimsPerPreemption"),
        ({"tolerationSeconds": -1}, "spec.tolerationSeconds"),
    ],
)  # fmt: skip
def test_an_invalid_policy_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_policy(policy("p", **spec))


def test_kube_system_is_protected_by_default_and_an_empty_list_protects_nothing() -> None:
    assert parse_policy(policy("p")).protected_namespaces == {"kube-system"}
    assert parse_policy(policy("p", protectedNamespaces=[])).protected_namespaces == set()


def test_an_invalid_update_keeps_the_last_valid_version_in_force() -> None:
    s = store(policy("p", 1, maxVictimsPerPreemption=2))
    state = s.apply(policy("p", 2, maxVictimsPerPreemption=0))
    assert not state.ready and "generation 1 stays in force" in state.message
    assert s.in_force()["p"].max_victims == 2
    assert s.apply(policy("p", 3, maxVictimsPerPreemption=5)).ready
    assert s.in_force()["p"].max_victims == 5
    s.delete("p")  # in force until the watcher's CRD check says it was an operator's
    assert s.pending_deletions == {"p"} and s.in_force()["p"].max_victims == 5
    s.confirm_deletions()
    assert s.in_force() == {}


def test_a_protected_pod_is_never_a_victim_and_the_message_names_the_policy() -> None:
    s = store(policy("guard", protectedNamespaces=["prod"]))
    result = evaluate(s, [victim("a", ns="prod", cpu="4")])
    assert result.decision is None
    assert "refused by PreemptionPolicy guard: 1 pod(s) in a protected namespace" in (
        result.status.message()
    )
    state = s.state("guard")
    assert state is not None and state.preemptions_refused == 1
    assert s.metrics.refusals.labels(policy="guard")._value.get() == 1


def test_every_applying_policy_must_allow_a_victim_the_first_by_name_is_reported() -> None:
    pods = [victim("young", started_ago=5, cpu="4")]
    s = store(policy("b-tolerate", tolerationSeconds=10), policy("a-tolerate", tolerationSeconds=3))
    # a-tolerate allows a pod started 5 s ago, b-tolerate does not: the larger one wins
    msg = evaluate(s, pods).status.message()
    assert "PreemptionPolicy b-tolerate: 1 pod(s) started less than tolerationSeconds ago" in msg
    assert "a-tolerate" not in msg


def test_a_policy_applies_only_to_its_preemptors() -> None:
    s = store(
        policy("prod-only", preemptors={"namespaceSelector": {"matchLabels": {"tier": "prod"}}},
               protectedNamespaces=["batch"])
    )  # fmt: skip
    pods = [victim("a", cpu="4")]
    assert evaluate(s, pods, preemptor(ns="batch")).decision is not None
    assert evaluate(s, pods, preemptor(ns="prod")).decision is None


def test_the_victim_cap_is_the_smallest_and_refuses_a_node_needing_more() -> None:
    pods = [victim(f"v{i}", cpu="1") for i in range(4)]
    s = store(policy("cap3", maxVictimsPerPreemption=3), policy("cap4", maxVictimsPerPreemption=4))
    result = evaluate(s, pods)
    assert result.decision is None
    assert "PreemptionPolicy cap3: 1 node(s) needed more victims" in result.status.message()
    s.apply(policy("cap3", 2, maxVictimsPerPreemption=5))
    result = evaluate(s, pods)
    assert result.decision is not None and len(result.decision.victims) == 4
    assert s.state("cap4").victims_chosen == 4  # type: ignore[union-attr]


def test_cooldown_spares_the_other_pods_of_a_preempted_owner() -> None:
    s = store(policy("cool", cooldownSeconds=60))
    first = evaluate(s, [victim("a1", cpu="4", owner="rs-a")])
    assert first.decision is not None
    # b1 started first, so without the cooldown a2 (the less important) would be the victim
    pods = [
        victim("a2", cpu="2", owner="rs-a", started_ago=100),
        victim("b1", cpu="2", owner="rs-b", started_ago=200),
    ]
    second = evaluate(s, pods, preemptor(cpu="2"))
    assert second.decision is not None
    assert [v.name for v in second.decision.victims] == ["b1"]


def test_victim_selectors_priority_class_and_floor() -> None:
    s = store(
        policy("sel", victims={"priorityClassNames": ["batch-low"], "minPreemptablePriority": 10})
    )
    pods = [
        victim("wrong-class", prio=50, cls="other", cpu="1"),
        victim("too-low", prio=5, cls="batch-low", cpu="1"),
        victim("ok", prio=50, cls="batch-low", cpu="2"),
    ]
    result = evaluate(s, pods, preemptor(cpu="2"))
    assert result.decision is not None
    assert [v.name for v in result.decision.victims] == ["ok"]


def test_a_dry_run_records_nothing() -> None:
    s = store(policy("guard", protectedNamespaces=["batch"]))
    ev = PolicyEvaluator(DefaultPreemptionArgs(), {"default-scheduler"}, recording_nothing(s))
    view = NodeView(make_node("n1").capacity(cpu="4", pods="110").obj())
    view.add_pod(victim("a", cpu="4"))
    nominator = MemoryNominator()
    result = ev.evaluate(
        preemptor(), {"n1": Status.unschedulable("x")}, {"n1": view}, nominator, (),
        ResourceFit(nominator),
    )  # fmt: skip
    assert result.decision is None and "guard" in result.status.message()
    assert s.state("guard").preemptions_refused == 0  # type: ignore[union-attr]
