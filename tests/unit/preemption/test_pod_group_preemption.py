"""Pod-group preemption's pieces (upstream framework/preemption types.go, util.go): victim
units over the whole cluster, their importance order, the PDB split by unit."""

from __future__ import annotations

import dataclasses

from scheduler.cache import Cache
from scheduler.model.pdb import pdb_from_dict
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from scheduler.preemption import go_sort
from scheduler.preemption.pod_group_preemption import (
    POD,
    POD_GROUP,
    VictimUnit,
    more_important,
    split_units_by_pdb,
    victim_units,
)
from tests.unit.helpers.builders import make_node, make_pod


def _member(name: str, group: str, node: str, priority: int = 0) -> PodInfo:
    pod = make_pod(name).labels(app="x").priority(priority).node(node).obj()
    return dataclasses.replace(pod, pod_group=group)


def test_an_all_members_group_is_one_unit_wherever_its_members_run() -> None:
    cache = Cache()
    for n in ("n0", "n1"):
        cache.add_node(make_node(n).obj())
    cache.set_pod_group(
        PodGroupInfo(namespace="default", name="all", disruption_mode="all", priority=50)
    )
    cache.set_pod_group(PodGroupInfo(namespace="default", name="single", priority=70))
    pods = [
        _member("a0", "all", "n0", 50), _member("a1", "all", "n1", 50),
        _member("s0", "single", "n0", 70), make_pod("solo").priority(5).node("n1").obj(),
    ]  # fmt: skip
    for p in pods:
        cache.add_pod(p)
    units = victim_units(cache.new_snapshot(), cache.gang)
    by_first = {u.pods[0].name: u for u in units}
    assert sorted(len(u.pods) for u in units) == [1, 1, 2]
    group = next(u for u in units if len(u.pods) == 2)
    assert {p.name for p in group.pods} == {"a0", "a1"}
    assert (group.kind, group.priority) == (POD_GROUP, 50)
    # a single-mode member is a unit of its own, but ranks as a pod group (upstream TODO)
    assert (by_first["s0"].kind, by_first["s0"].priority) == (POD_GROUP, 70)
    assert (by_first["solo"].kind, by_first["solo"].priority) == (POD, 5)


def test_importance_priority_then_kind_then_size_then_start() -> None:
    def unit(priority: int, kind: int, n: int, start: float | None) -> VictimUnit:
        pods = tuple(make_pod(f"p{priority}{kind}{n}{i}").obj() for i in range(n))
        return VictimUnit(pods, priority, kind, start)

    high, low = unit(10, POD, 1, 5.0), unit(1, POD_GROUP, 9, 1.0)
    assert more_important(high, low) and not more_important(low, high)
    assert more_important(unit(1, POD_GROUP, 1, 9.0), unit(1, POD, 1, 1.0))
    assert more_important(unit(1, POD_GROUP, 3, 9.0), unit(1, POD_GROUP, 2, 1.0))
    assert more_important(unit(1, POD, 1, 1.0), unit(1, POD, 1, 2.0))
    # Go's (*metav1.Time).Before with a nil side is false both ways
    assert not more_important(unit(1, POD, 1, None), unit(1, POD, 1, 2.0))
    assert not more_important(unit(1, POD, 1, 2.0), unit(1, POD, 1, None))
    units = [unit(1, POD, 1, 3.0), unit(2, POD, 1, 3.0), unit(1, POD_GROUP, 2, 3.0)]
    go_sort.sort_slice(units, more_important)
    assert [(u.priority, u.kind) for u in units] == [(2, POD), (1, POD_GROUP), (1, POD)]


def test_a_unit_violates_when_any_of_its_pods_would_take_a_budget_below_zero() -> None:
    pdb = pdb_from_dict(
        {
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}},
            "status": {"disruptionsAllowed": 1},
        }
    )
    a = VictimUnit((_member("a0", "g", "n0"), _member("a1", "g", "n0")), 0, POD_GROUP, None)
    b = VictimUnit((make_pod("other").labels(app="y").obj(),), 0, POD, None)
    violating, rest = split_units_by_pdb([a, b], [pdb])
    assert [(u.pods[0].name, n) for u, n in violating] == [("a0", 1)]
    assert [u.pods[0].name for u in rest] == ["other"]
