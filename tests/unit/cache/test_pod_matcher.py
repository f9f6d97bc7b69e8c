"""The pod matcher (cache/pod_matcher.py): its answers equal a plain count over every pod
whatever the groups and projections went through, and its memo answers a query again
without asking the selectors, across groups that empty and come back and projections
dropped and rebuilt, while a moved pod is asked afresh in its new group."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

import scheduler.cache.pod_matcher as pod_matcher_module
from scheduler.cache import Cache
from scheduler.cache.pod_matcher import PodMatcher, PodQuery
from scheduler.cache.snapshot import Snapshot
from scheduler.model.pod import PodInfo
from scheduler.model.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    IN,
    NOT_IN,
    LabelSelector,
    Requirement,
)
from tests.unit.helpers.builders import make_node, make_pod


def _in(key: str, *values: str) -> Requirement:
    return Requirement(key, IN, frozenset(values))


def _sel(*requirements: Requirement) -> LabelSelector:
    return LabelSelector(requirements)


def _answer(matcher: PodMatcher, snap: Snapshot, query: PodQuery) -> dict[str, int]:
    """The matcher's counts per node name."""
    slots, counts = matcher.matching(query)
    out: dict[str, int] = {}
    for s, n in zip(slots.tolist(), counts.tolist(), strict=True):
        name = snap.view(s).name
        out[name] = out.get(name, 0) + n
    return {k: v for k, v in out.items() if v}


def _plain(pods: Iterator[PodInfo], query: PodQuery) -> dict[str, int]:
    """The same count, one pod at a time."""
    out: dict[str, int] = {}
    for p in pods:
        if query.admits(p.namespace, p.labels, p.is_terminating):
            out[p.node_name] = out.get(p.node_name, 0) + 1
    return out


class _Counting:
    """Counts LabelSelector.matches calls (the work the memo saves)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = LabelSelector.matches

        def counted(sel: LabelSelector, labels: object) -> bool:
            self.calls += 1
            return real(sel, labels)  # type: ignore[arg-type]

        monkeypatch.setattr(LabelSelector, "matches", counted)


def _queries() -> list[PodQuery]:
    app = [_in("app", f"x{i}") for i in range(3)]
    return [
        PodQuery((_sel(app[0]),), frozenset(("a",)), False),
        PodQuery((_sel(app[1]),), frozenset(("a", "b")), True),
        PodQuery((_sel(app[0]), _sel(_in("tier", "web"))), frozenset(("b",)), True),
        PodQuery((_sel(Requirement("app", NOT_IN, frozenset(("x1",)))),), frozenset("ab"), False),
        PodQuery((_sel(Requirement("tier", EXISTS)),), frozenset(("a",)), True),
        PodQuery((_sel(app[2], Requirement("tier", DOES_NOT_EXIST)),), frozenset("ab"), True),
        PodQuery((_sel(_in("app", "x0", "x2")),), frozenset(("b",)), False),
        PodQuery((LabelSelector.everything(),), frozenset(("a",)), False),
        PodQuery((LabelSelector.nothing(),), frozenset("ab"), True),
    ]


@pytest.mark.parametrize("seed", range(20))
def test_answers_equal_a_plain_count_through_moves_projections_and_evictions(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pods come, go, change labels and start terminating (some with a label of their
    own, so projections answer); few projections and memos are kept so they are dropped
    and rebuilt; every answer, memoised or not, equals the plain count."""
    monkeypatch.setattr(pod_matcher_module, "MAX_PROJECTIONS", 2)
    monkeypatch.setattr(pod_matcher_module, "SMALL_CANDIDATE_SET", 3)
    monkeypatch.setattr(pod_matcher_module, "MEMO_PER_GROUP", 3)
    monkeypatch.setattr(pod_matcher_module, "QUERIES_KEPT", 4)
    monkeypatch.setattr(pod_matcher_module, "MEMO_SLACK", 8)
    rng = random.Random(seed)
    cache = Cache()
    nodes = [f"n{i}" for i in range(5)]
    for n in nodes:
        cache.add_node(make_node(n).obj())
    snap = cache.new_snapshot()
    live: dict[str, PodInfo] = {}
    queries = _queries()

    def pod(name: str, node: str) -> PodInfo:
        b = make_pod(name, rng.choice("ab")).uid(name).labels(app=f"x{rng.randrange(3)}")
        if rng.random() < 0.5:
            b.label("id", name)
        if rng.random() < 0.4:
            b.label("tier", rng.choice(["web", "db"]))
        if rng.random() < 0.15:
            b.terminating()
        return b.node(node).obj()

    for step in range(200):
        r = rng.random()
        if r < 0.5 or not live:
            p = pod(f"p{step}", rng.choice(nodes))
            cache.add_pod(p)
            live[p.uid] = p
        elif r < 0.75:
            old = live[rng.choice(sorted(live))]
            new = pod(old.name, old.node_name)
            cache.update_pod(old, new)
            live[new.uid] = new
        else:
            cache.remove_pod(live.pop(rng.choice(sorted(live))))
        if step % 7 == 6:
            cache.update_snapshot(snap)
            for q in rng.sample(queries, 5):
                assert _answer(snap.pod_matcher, snap, q) == _plain(iter(live.values()), q), q
    cache.update_snapshot(snap)
    for q in queries:
        assert _answer(snap.pod_matcher, snap, q) == _plain(iter(live.values()), q), q


def test_equal_queries_share_answers_and_a_repeat_asks_no_selector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = Cache()
    cache.add_node(make_node("n0").obj())
    for i in range(10):
        cache.add_pod(make_pod(f"p{i}").labels(app=f"x{i % 5}").node("n0").obj())
    snap = cache.new_snapshot()
    counting = _Counting(monkeypatch)
    query = PodQuery((_sel(_in("app", "x1", "x2")),), frozenset(("default",)), True)
    assert _answer(snap.pod_matcher, snap, query) == {"n0": 4}
    first = counting.calls
    assert first == 5, "one call per group (5 label sets), not per pod"
    # an equal query built anew (another cycle's term object) is answered from the memo
    again = PodQuery((_sel(_in("app", "x1", "x2")),), frozenset(("default",)), True)
    assert again is not query and _answer(snap.pod_matcher, snap, again) == {"n0": 4}
    assert counting.calls == first
    # a query of another value is asked afresh
    other = PodQuery((_sel(_in("app", "x1", "x2")),), frozenset(("other",)), True)
    assert _answer(snap.pod_matcher, snap, other) == {}
    assert counting.calls == first  # the namespace alone rules the groups out


def test_the_memo_survives_a_group_emptied_and_refilled_and_a_moved_pod_is_asked_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = Cache()
    cache.add_node(make_node("n0").obj())
    cache.add_node(make_node("n1").obj())
    web = make_pod("web").uid("w").labels(app="web").node("n0").obj()
    cache.add_pod(web)
    snap = cache.new_snapshot()
    counting = _Counting(monkeypatch)
    query = PodQuery((_sel(_in("app", "web")),), frozenset(("default",)), False)
    assert _answer(snap.pod_matcher, snap, query) == {"n0": 1}
    assert counting.calls == 1
    # the group empties (its only pod deleted) and comes back on another node
    cache.remove_pod(web)
    cache.update_snapshot(snap)
    assert _answer(snap.pod_matcher, snap, query) == {}
    back = make_pod("web").uid("w2").labels(app="web").node("n1").obj()
    cache.add_pod(back)
    cache.update_snapshot(snap)
    assert _answer(snap.pod_matcher, snap, query) == {"n1": 1}
    assert counting.calls == 1, "the new group of the same content found the old answer"
    # the pod's labels change: it moves to another group, whose answer is not the old one
    relabelled = make_pod("web").uid("w2").labels(app="db").node("n1").obj()
    cache.update_pod(back, relabelled)
    cache.update_snapshot(snap)
    assert _answer(snap.pod_matcher, snap, query) == {}
    # and terminating: the same labels, another group (terminating pods not admitted)
    cache.update_pod(relabelled, make_pod("web").uid("w2").labels(app="web").node("n1")
                     .terminating().obj())  # fmt: skip
    cache.update_snapshot(snap)
    assert _answer(snap.pod_matcher, snap, query) == {}


def test_what_is_learnt_on_a_projection_outlives_the_projection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pod has a label of its own, so the answer comes from a projection onto the
    selector's keys; when that projection is dropped (others asked for) and rebuilt, its
    groups find their answers; the counts stay right as pods move meanwhile."""
    monkeypatch.setattr(pod_matcher_module, "MAX_PROJECTIONS", 1)
    monkeypatch.setattr(pod_matcher_module, "SMALL_CANDIDATE_SET", 4)
    cache = Cache()
    for n in ("n0", "n1"):
        cache.add_node(make_node(n).obj())
    for i in range(40):
        cache.add_pod(
            make_pod(f"p{i}").uid(f"p{i}").labels(app=f"x{i % 4}", id=f"p{i}", tier="t")
            .node(f"n{i % 2}").obj()
        )  # fmt: skip
    snap = cache.new_snapshot()
    matcher = snap.pod_matcher
    counting = _Counting(monkeypatch)
    by_app = PodQuery((_sel(Requirement("app", EXISTS)),), frozenset(("default",)), True)
    assert _answer(matcher, snap, by_app) == {"n0": 20, "n1": 20}
    assert counting.calls == 4, "one call per projected group (4 apps), not per pod"
    by_tier = PodQuery((_sel(Requirement("tier", EXISTS)),), frozenset(("default",)), True)
    assert _answer(matcher, snap, by_tier) == {"n0": 20, "n1": 20}
    assert matcher.projections_kept == 1  # the app projection was dropped
    calls = counting.calls
    cache.add_pod(make_pod("q").uid("q").labels(app="x1", id="q").node("n0").obj())
    cache.update_snapshot(snap)
    assert _answer(matcher, snap, by_app) == {"n0": 21, "n1": 20}
    assert counting.calls == calls, "the rebuilt projection's groups remembered"


def test_memos_of_dead_groups_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Churn of pods with labels of their own leaves no memo and no empty group behind
    beyond a bound."""
    monkeypatch.setattr(pod_matcher_module, "MEMO_SLACK", 16)
    monkeypatch.setattr(pod_matcher_module, "EMPTY_SLACK", 8)
    cache = Cache()
    cache.add_node(make_node("n0").obj())
    snap = cache.new_snapshot()
    query = PodQuery((_sel(_in("app", "web")),), frozenset(("default",)), True)
    for i in range(500):
        p = make_pod(f"p{i}").uid(f"p{i}").labels(app="web", id=f"p{i}").node("n0").obj()
        cache.add_pod(p)
        cache.update_snapshot(snap)
        assert _answer(snap.pod_matcher, snap, query) == {"n0": 1}
        cache.remove_pod(p)
        cache.update_snapshot(snap)
    assert len(snap.pod_matcher._memos) <= 2 * 1 + 16 + 1
    assert len(snap.pod_matcher._groups) <= 8 + 1


def test_pods_taken_off_and_put_back_keep_their_groups_and_answers() -> None:
    """A dry run's removal and return of pods with labels of their own (a preemption's
    victims) finds each pod's group again instead of rebuilding it, and the answers
    stay a plain count at every step."""
    cache = Cache()
    for n in range(3):
        cache.add_node(make_node(f"n{n}").obj())
    pods = [
        make_pod(f"p{i}").uid(f"p{i}").labels(app="web", id=f"p{i}").node(f"n{i % 3}").obj()
        for i in range(30)
    ]
    for p in pods:
        cache.add_pod(p)
    snap = cache.new_snapshot()
    cache.update_snapshot(snap)
    matcher = snap.pod_matcher
    query = PodQuery((_sel(_in("app", "web")),), frozenset(("default",)), True)
    before = {id(g) for g in matcher.groups()}
    infos = [v for view in snap.node_views() for v in view.pods.values()]
    for n in range(3):
        snap.remove_pods([p for p in infos if p.node_name == f"n{n}"], f"n{n}")
    assert _answer(matcher, snap, query) == {}
    assert matcher.groups() == []
    snap.add_pods([p for p in infos if p.node_name == "n1"], "n1")
    assert _answer(matcher, snap, query) == {"n1": 10}
    snap.restore_mutations()
    assert _answer(matcher, snap, query) == _plain(iter(infos), query)
    assert {id(g) for g in matcher.groups()} == before
