"""The preemption evaluator, as case tables: eligibility, candidate sampling, victim
selection with reprieve, the PDB split and pickOneNode's criteria one by one."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scheduler.cache.node_view import NodeView
from scheduler.config.args import SCOPE_ALL, DefaultPreemptionArgs
from scheduler.framework.status import Code, Status
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import IN, LabelSelector, Requirement
from scheduler.preemption.evaluator import (
    MSG_NEVER,
    MSG_TERMINATING,
    Candidate,
    Evaluator,
    NodeLike,
    calculate_num_candidates,
    eligible_to_preempt,
    pick_one_node,
    select_victims,
    split_by_pdb,
)
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.preemption_fakes import MemoryNominator, ResourceDryRun, ResourceFit

T0 = "2024-01-01T00:00:%02dZ"


def node(name: str, cpu: str = "4", *pods: PodInfo) -> NodeView:
    view = NodeView(make_node(name).capacity(cpu=cpu, pods="110").obj())
    for p in pods:
        view.add_pod(p)
    return view


def victim(
    name: str, prio: int, cpu: str = "1", start: int | None = 0, on: str = "n1", **labels: str
) -> PodInfo:
    b = make_pod(name).priority(prio).requests(cpu=cpu).node(on)
    if start is not None:
        b = b.started(T0 % start)
    if labels:
        b = b.labels(**labels)
    return b.obj()


def preemptor(prio: int = 100, cpu: str = "2", name: str = "hi") -> PodInfo:
    return make_pod(name).priority(prio).requests(cpu=cpu).obj()


def pdb(name: str, allowed: int, disrupted: Sequence[str] = (), ns: str = "default", **sel: str):
    selector = LabelSelector(tuple(Requirement(k, IN, frozenset((v,))) for k, v in sel.items()))
    return PDBInfo(
        namespace=ns,
        name=name,
        selector=selector,
        disruptions_allowed=allowed,
        disrupted_pods=frozenset(disrupted),
    )


def everyone(_pod: PodInfo) -> bool:
    return True


# ---------------------------------------------------------------- eligibility

preempted_low = (
    make_pod("low")
    .priority(1)
    .node("n1")
    .terminating()
    .condition("DisruptionTarget", "True", "PreemptionByScheduler")
    .obj()
)
terminating_plain = make_pod("low").priority(1).node("n1").terminating().obj()
preempted_high = (
    make_pod("big")
    .priority(1000)
    .node("n1")
    .terminating()
    .condition("DisruptionTarget", "True", "PreemptionByScheduler")
    .obj()
)


@pytest.mark.parametrize(
    ("case", "pod", "nominated", "on_node", "nominated_code", "eligible", "why"),
    [
        ("policy Never never preempts",
         make_pod("p").priority(100).preemption_policy("Never").obj(), "", [], None, False,
         MSG_NEVER),
        ("a pod without nomination may preempt", preemptor(), "", [], None, True, ""),
        ("nominated, a lower pod terminating by preemption: wait", preemptor(), "n1",
         [preempted_low], Code.UNSCHEDULABLE, False, MSG_TERMINATING),
        ("nominated node now unresolvable: preempt again", preemptor(), "n1",
         [preempted_low], Code.UNSCHEDULABLE_AND_UNRESOLVABLE, True, ""),
        ("nominated node absent from the diagnosis counts as unresolvable", preemptor(), "n1",
         [preempted_low], None, True, ""),
        ("terminating but not by preemption does not hold it back", preemptor(), "n1",
         [terminating_plain], Code.UNSCHEDULABLE, True, ""),
        ("a higher-priority pod terminating by preemption does not count", preemptor(), "n1",
         [preempted_high], Code.UNSCHEDULABLE, True, ""),
    ],
)  # fmt: skip
def test_eligibility(
    case: str,
    pod: PodInfo,
    nominated: str,
    on_node: list[PodInfo],
    nominated_code: Code | None,
    eligible: bool,
    why: str,
) -> None:
    nodes = {"n1": node("n1", "4", *on_node)}
    diagnosis = {} if nominated_code is None else {"n1": Status(nominated_code)}
    assert eligible_to_preempt(pod, nominated, nodes, diagnosis) == (eligible, why), case


# ---------------------------------------------------------------- sampling bounds


@pytest.mark.parametrize(
    ("nodes", "pct", "absolute", "expected"),
    [
        (500, 10, 100, 100),  # absolute wins
        (5000, 10, 100, 500),  # the percentage wins
        (50, 10, 100, 50),  # capped at the count
        (1000, 0, 5, 5),
        (7, 50, 1, 3),  # integer division
        (1, 10, 100, 1),
    ],
)
def test_number_of_candidates(nodes: int, pct: int, absolute: int, expected: int) -> None:
    assert calculate_num_candidates(nodes, pct, absolute) == expected


def _cluster(
    n: int, violating: set[int] | None = None
) -> tuple[dict[str, NodeView], list[PDBInfo]]:
    """n nodes of 2 cpu, each full with one low pod of 2 cpu; pods on `violating`
    nodes are covered by a PDB with no budget."""
    nodes = {}
    for i in range(n):
        labels = {"pdb": "tight"} if violating and i in violating else {}
        nodes[f"n{i}"] = node(f"n{i}", "2", victim(f"v{i}", 1, "2", on=f"n{i}", **labels))
    return nodes, [pdb("tight", 0, pdb="tight")]


def _evaluate(
    nodes: dict[str, NodeView],
    pdbs: Sequence[PDBInfo] = (),
    *,
    offset: int = 0,
    pct: int = 10,
    absolute: int = 100,
    pod: PodInfo | None = None,
    nominator: MemoryNominator | None = None,
    diagnosis: dict[str, Status] | None = None,
    scope: str = "OwnProfiles",
    own: frozenset[str] = frozenset({"default-scheduler"}),
):
    nominator = nominator or MemoryNominator()
    args = DefaultPreemptionArgs(pct, absolute, victim_scope=scope)
    ev = Evaluator(args, own, rand=lambda n: offset % n)
    if diagnosis is None:
        diagnosis = {name: Status.unschedulable("Insufficient cpu") for name in nodes}
    return ev.evaluate(
        pod or preemptor(cpu="2"), diagnosis, nodes, nominator, pdbs, ResourceFit(nominator)
    )


@pytest.mark.parametrize(
    ("case", "n", "violating", "offset", "absolute", "checked"),
    [
        ("stops once the wanted number is reached", 10, set(), 0, 3, ["n0", "n1", "n2"]),
        ("starts at the random offset", 10, set(), 4, 3, ["n4", "n5", "n6"]),
        ("wraps around", 10, set(), 8, 3, ["n8", "n9", "n0"]),
        ("goes on until one candidate violates no PDB", 10, {8, 9, 0, 1}, 8, 3,
         ["n8", "n9", "n0", "n1", "n2"]),
        ("all violating: every node is checked", 4, {0, 1, 2, 3}, 1, 1,
         ["n1", "n2", "n3", "n0"]),
        ("capped at the number of candidate nodes", 3, set(), 2, 100, ["n2", "n0", "n1"]),
    ],
)  # fmt: skip
def test_sampling(
    case: str, n: int, violating: set[int], offset: int, absolute: int, checked: list[str]
) -> None:
    nodes, pdbs = _cluster(n, violating)
    result = _evaluate(nodes, pdbs, offset=offset, pct=10, absolute=absolute)
    assert result.status.ok, case
    assert list(result.node_statuses) == checked, case
    assert result.nodes_checked == len(checked)
    # non-violating candidates come first, each group in the order found
    found = [c.node for c in result.candidates]
    ok_first = [x for x in checked if int(x[1:]) not in violating]
    assert found == ok_first + [x for x in checked if int(x[1:]) in violating], case


def test_only_nodes_with_status_unschedulable_are_candidates() -> None:
    nodes, _ = _cluster(3)
    diagnosis = {
        "n0": Status.unresolvable("node(s) didn't match Pod's node affinity/selector"),
        "n1": Status.unschedulable("Insufficient cpu"),
        "n2": Status(Code.ERROR, ("boom",)),
    }
    result = _evaluate(nodes, diagnosis=diagnosis)
    assert [c.node for c in result.candidates] == ["n1"]
    assert result.decision is not None and result.decision.node == "n1"


def test_no_node_where_preemption_helps_clears_the_nomination() -> None:
    nodes, _ = _cluster(2)
    diagnosis = {name: Status.unresolvable("untolerated taint") for name in nodes}
    result = _evaluate(nodes, diagnosis=diagnosis)
    assert result.decision is None
    assert result.status.code == Code.UNSCHEDULABLE
    assert result.clear_nomination
    assert result.nodes_checked == 0


def test_no_candidate_after_the_dry_run_clears_the_nomination() -> None:
    nodes, _ = _cluster(2)
    result = _evaluate(nodes, pod=preemptor(cpu="3"))  # 3 cpu never fits on a 2-cpu node
    assert result.decision is None and result.clear_nomination
    assert result.status.code == Code.UNSCHEDULABLE
    assert set(result.node_statuses) == {"n0", "n1"}


def test_not_eligible_keeps_the_nomination() -> None:
    nodes, _ = _cluster(1)
    result = _evaluate(nodes, pod=make_pod("p").priority(9).preemption_policy("Never").obj())
    assert result.decision is None and not result.clear_nomination
    assert result.status.message() == MSG_NEVER


def test_a_fit_that_raises_is_an_error_for_that_node_only() -> None:
    nodes, _ = _cluster(2)
    ok = ResourceFit()

    def flaky(pod: PodInfo, n: NodeLike) -> ResourceDryRun:
        if n.name == "n0":
            raise RuntimeError("plugin crashed")
        return ok(pod, n)

    ev = Evaluator(DefaultPreemptionArgs(), {"default-scheduler"}, rand=lambda n: 0)
    diagnosis = {name: Status.unschedulable() for name in nodes}
    result = ev.evaluate(preemptor(), diagnosis, nodes, MemoryNominator(), [], flaky)
    assert result.decision is not None and result.decision.node == "n1"
    assert result.node_statuses["n0"].code == Code.ERROR

    nodes.pop("n1")
    result = ev.evaluate(
        preemptor(), {"n0": Status.unschedulable()}, nodes, MemoryNominator(), [], flaky
    )
    assert result.decision is None and result.status.code == Code.ERROR
    assert not result.clear_nomination


# ---------------------------------------------------------------- victims on one node


def _names(pods: Sequence[PodInfo]) -> list[str]:
    return [p.name for p in pods]


@pytest.mark.parametrize(
    ("case", "pods", "pod", "expected", "violations", "code"),
    [
        ("reprieve most important first, keep the rest as victims",
         [victim("high", 1000, "1"), victim("v3", 3, "1"), victim("v2", 2, "1"),
          victim("v1", 1, "1")],
         preemptor(cpu="2"), ["v2", "v1"], 0, Code.SUCCESS),
        ("equal priority: the earlier-started pod is reprieved first",
         [victim("late", 5, "2", start=30), victim("early", 5, "2", start=10)],
         preemptor(cpu="2"), ["late"], 0, Code.SUCCESS),
        ("a pod without start time counts as started now",
         [victim("unstarted", 5, "2", start=None), victim("started", 5, "2", start=50)],
         preemptor(cpu="2"), ["unstarted"], 0, Code.SUCCESS),
        ("equal or higher priority pods are never victims",
         [victim("same", 100, "2"), victim("low", 1, "2")],
         preemptor(cpu="2"), ["low"], 0, Code.SUCCESS),
        ("no lower-priority pod: unresolvable",
         [victim("same", 100, "4")], preemptor(cpu="2"), [], 0,
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
        ("removing all lower pods is not enough: not a candidate",
         [victim("big", 1000, "3"), victim("low", 1, "1")], preemptor(cpu="2"), [], 0,
         Code.UNSCHEDULABLE),
    ],
)  # fmt: skip
def test_select_victims(
    case: str,
    pods: list[PodInfo],
    pod: PodInfo,
    expected: list[str],
    violations: int,
    code: Code,
) -> None:
    n = node("n1", "4", *pods)
    victims, v, status = select_victims(pod, n, [], ResourceFit(), everyone)
    assert status.code == code, case
    assert _names(victims) == expected, case
    assert v == violations, case


def test_dry_run_never_modifies_the_node() -> None:
    n = node("n1", "4", victim("a", 1, "2"), victim("b", 2, "2"))
    before = (dict(n.pods), dict(n.requested))
    select_victims(preemptor(cpu="3"), n, [], ResourceFit(), everyone)
    assert (dict(n.pods), dict(n.requested)) == before


def test_pdb_violating_pods_are_reprieved_first() -> None:
    # 4 cpu: filler 2 (high), guarded 1 (prio 1, PDB with no budget), free 1 (prio 5).
    # The preemptor needs 1: only one of the two low pods must go.
    pods = [victim("filler", 1000, "2"), victim("guarded", 1, "1", app="db"),
            victim("free", 5, "1")]  # fmt: skip
    n = node("n1", "4", *pods)
    no_budget = [pdb("db", 0, app="db")]
    victims, violations, _ = select_victims(
        preemptor(cpu="1"), n, no_budget, ResourceFit(), everyone
    )
    assert _names(victims) == ["free"] and violations == 0
    # without the PDB the more important pod is reprieved first instead
    victims, violations, _ = select_victims(preemptor(cpu="1"), n, [], ResourceFit(), everyone)
    assert _names(victims) == ["guarded"] and violations == 0


def test_violating_victims_are_counted_and_victims_stay_sorted() -> None:
    pods = [victim("g1", 3, "1", app="db"), victim("g2", 2, "1", app="db"),
            victim("f", 4, "2")]  # fmt: skip
    n = node("n1", "4", *pods)
    victims, violations, _ = select_victims(
        preemptor(cpu="4"), n, [pdb("db", 0, app="db")], ResourceFit(), everyone
    )
    assert _names(victims) == ["f", "g1", "g2"]  # most important first
    assert violations == 2


@pytest.mark.parametrize(
    ("case", "scope", "own", "expected"),
    [
        ("own profiles: another scheduler's pods are no victims", "OwnProfiles",
         frozenset({"kas"}), ["mine"]),
        ("own profiles: several profile names", "OwnProfiles",
         frozenset({"kas", "default-scheduler"}), ["mine", "theirs"]),
        ("All: any lower-priority pod", SCOPE_ALL, frozenset({"kas"}), ["mine", "theirs"]),
    ],
)  # fmt: skip
def test_victim_scope(case: str, scope: str, own: frozenset[str], expected: list[str]) -> None:
    mine = make_pod("mine").priority(2).requests(cpu="2").node("n1").scheduler("kas")
    theirs = make_pod("theirs").priority(1).requests(cpu="2").node("n1")
    nodes = {"n1": node("n1", "4", mine.started(T0 % 1).obj(), theirs.started(T0 % 2).obj())}
    result = _evaluate(nodes, pod=preemptor(cpu="4"), scope=scope, own=own)
    if expected == ["mine"]:
        assert result.decision is None, case  # 2 cpu of "theirs" cannot be freed
    else:
        assert result.decision is not None, case
        assert _names(result.decision.victims) == expected, case


def test_nominated_pods_of_equal_or_higher_priority_count_in_the_dry_run() -> None:
    nominator = MemoryNominator()
    nominator.add(make_pod("waiting").priority(100).requests(cpu="2").obj(), "n0")
    nominator.add(make_pod("lesser").priority(50).requests(cpu="2").obj(), "n1")
    nodes = {
        "n0": node("n0", "4", victim("a", 1, "4", on="n0")),
        "n1": node("n1", "4", victim("b", 1, "4", on="n1")),
    }
    # n0 has room for the preemptor only if the equal-priority nominated pod is ignored;
    # n1's nominated pod has lower priority and does not count
    result = _evaluate(nodes, pod=preemptor(cpu="3"), nominator=nominator)
    assert [c.node for c in result.candidates] == ["n1"]
    assert result.decision is not None
    assert _names(result.decision.lower_priority_nominated) == ["lesser"]


def test_the_preemptor_is_not_among_the_lower_nominated_pods() -> None:
    nominator = MemoryNominator()
    me = preemptor(cpu="2")
    nominator.add(me, "n0")
    nodes, _ = _cluster(1)
    result = _evaluate(nodes, pod=me, nominator=nominator)
    assert result.decision is not None
    assert result.decision.lower_priority_nominated == ()


# ---------------------------------------------------------------- PDB split


@pytest.mark.parametrize(
    ("case", "pods", "pdbs", "violating"),
    [
        ("the budget is spent in list order",
         [victim("a", 1, app="x"), victim("b", 1, app="x"), victim("c", 1, app="x")],
         [pdb("x", 1, app="x")], ["b", "c"]),
        ("pods in disruptedPods do not spend the budget",
         [victim("a", 1, app="x"), victim("b", 1, app="x"), victim("c", 1, app="x")],
         [pdb("x", 1, ["a"], app="x")], ["c"]),
        ("another namespace's PDB does not match",
         [victim("a", 1, app="x")], [pdb("x", 0, ns="other", app="x")], []),
        ("a pod without labels matches no PDB",
         [victim("a", 1)], [pdb("any", 0, ns="default")], []),
        ("one exhausted PDB among several is enough",
         [victim("a", 1, app="x", tier="db")],
         [pdb("x", 5, app="x"), pdb("db", 0, tier="db")], ["a"]),
        ("a negative budget makes every matching pod violating",
         [victim("a", 1, app="x")], [pdb("x", -1, app="x")], ["a"]),
    ],
)  # fmt: skip
def test_split_by_pdb(
    case: str, pods: list[PodInfo], pdbs: list[PDBInfo], violating: list[str]
) -> None:
    bad, good = split_by_pdb(pods, pdbs)
    assert _names(bad) == violating, case
    assert _names(good) == [p.name for p in pods if p.name not in violating], case


# ---------------------------------------------------------------- pickOneNode


def cand(name: str, *victims: tuple[int, int | None], violations: int = 0) -> Candidate:
    pods = tuple(
        victim(f"{name}-{i}", prio, start=start, on=name) for i, (prio, start) in enumerate(victims)
    )
    return Candidate(name, pods, violations)


MIN_INT32 = -(2**31)


@pytest.mark.parametrize(
    ("case", "candidates", "winner"),
    [
        ("fewest PDB violations",
         [cand("a", (1, 0), violations=1), cand("b", (9, 0), (9, 0))], "b"),
        ("lowest highest-victim priority",
         [cand("a", (5, 0)), cand("b", (3, 0), (2, 0), (1, 0))], "b"),
        ("smallest sum of priorities",
         [cand("a", (3, 0), (2, 0)), cand("b", (3, 0), (1, 0))], "b"),
        ("negative priorities: more victims is not a smaller sum",
         [cand("a", (-10, 0), (-10, 0), (-10, 0)), cand("b", (-10, 0))], "b"),
        ("fewest victims when the sums tie",
         [cand("a", (0, 0), (MIN_INT32, 0)), cand("b", (0, 0))], "b"),
        ("latest start among the highest-priority victims",
         [cand("a", (3, 10), (1, 50)), cand("b", (3, 20), (1, 5))], "b"),
        ("a victim not yet started counts as the latest",
         [cand("a", (3, 59)), cand("b", (3, None))], "b"),
        ("a full tie goes to the first candidate",
         [cand("a", (3, 10)), cand("b", (3, 10))], "a"),
    ],
)  # fmt: skip
def test_pick_one_node(case: str, candidates: list[Candidate], winner: str) -> None:
    best = pick_one_node(candidates)
    assert best is not None and best.node == winner, case
    best = pick_one_node(list(reversed(candidates)))
    if case != "a full tie goes to the first candidate":
        assert best is not None and best.node == winner, f"{case} (reversed)"


def test_pick_one_node_without_candidates() -> None:
    assert pick_one_node([]) is None


def test_evaluate_returns_the_best_node_with_its_victims() -> None:
    nodes = {
        "n0": node("n0", "4", victim("a", 5, "4", on="n0")),
        "n1": node("n1", "4", victim("b", 1, "2", on="n1"), victim("c", 2, "2", on="n1")),
    }
    result = _evaluate(nodes, pod=preemptor(cpu="2"))
    assert result.decision is not None
    assert result.decision.node == "n1"
    assert _names(result.decision.victims) == ["b"]
    assert result.decision.num_pdb_violations == 0


def test_a_failing_prefilter_extension_is_an_error_for_that_node() -> None:
    class Broken(ResourceDryRun):
        def remove_pod(self, pod: PodInfo, /) -> Status:
            return Status(Code.ERROR, ("remove_pod failed",))

    base = ResourceFit()

    def fit(pod: PodInfo, n: NodeLike) -> ResourceDryRun:
        run = base(pod, n)
        if n.name == "n0":
            run.__class__ = Broken
        return run

    nodes, _ = _cluster(2)
    ev = Evaluator(DefaultPreemptionArgs(), {"default-scheduler"}, rand=lambda n: 0)
    diagnosis = {name: Status.unschedulable() for name in nodes}
    result = ev.evaluate(preemptor(), diagnosis, nodes, MemoryNominator(), [], fit)
    assert result.node_statuses["n0"].code == Code.ERROR
    assert result.decision is not None and result.decision.node == "n1"


def test_the_dry_run_filters_once_plus_once_per_potential_victim() -> None:
    fit = ResourceFit()
    n = node("n1", "4", victim("a", 1, "1"), victim("b", 2, "1"), victim("c", 3, "2"))
    select_victims(preemptor(cpu="2"), n, [], fit, everyone)
    assert (fit.runs, fit.filters) == (1, 4)
