from typing import Any

import numpy as np
import pytest

from scheduler.cache import Cache, CacheError, Nominator
from scheduler.model.selectors import parse_node_selector
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.fake_clock import FakeClock


def _cache(*nodes: str) -> tuple[Cache, FakeClock]:
    clock = FakeClock()
    cache = Cache(clock, ttl=30.0)
    for n in nodes:
        cache.add_node(make_node(n).obj())
    return cache, clock


def _cpu(cache: Cache, node: str) -> int:
    snap = cache.new_snapshot()
    view = snap.get(node)
    assert view is not None
    return view.requested.get("cpu", 0)


def test_pods_of_other_schedulers_and_terminating_pods_count() -> None:
    cache, _ = _cache("n1")
    cache.add_pod(make_pod("a").scheduler("other").requests(cpu="1").node("n1").obj())
    cache.add_pod(make_pod("b").requests(cpu="500m").node("n1").terminating().obj())
    cache.add_pod(make_pod("pending").requests(cpu="3").obj())  # no node: not counted
    assert _cpu(cache, "n1") == 1500


def test_assume_confirm_forget() -> None:
    cache, _ = _cache("n1", "n2")
    pod = make_pod("p").requests(cpu="1").obj()
    assumed = cache.assume_pod(pod, "n1")
    assert assumed.node_name == "n1" and cache.is_assumed(pod)
    assert _cpu(cache, "n1") == 1000
    with pytest.raises(CacheError):
        cache.assume_pod(pod, "n1")
    # the informer's add confirms it (and it landed on n2 in the end)
    cache.add_pod(make_pod("p").uid(pod.uid).requests(cpu="1").node("n2").obj())
    assert not cache.is_assumed(pod)
    assert (_cpu(cache, "n1"), _cpu(cache, "n2")) == (0, 1000)
    with pytest.raises(CacheError):
        cache.forget_pod(pod)


def test_forget_undoes_assumption() -> None:
    cache, _ = _cache("n1")
    pod = make_pod("p").requests(cpu="1").obj()
    cache.assume_pod(pod, "n1")
    cache.forget_pod(pod)
    assert _cpu(cache, "n1") == 0
    assert cache.get_pod(pod.uid) is None


def test_update_confirms_an_assumed_pod() -> None:
    cache, _ = _cache("n1")
    pod = make_pod("p").requests(cpu="1").obj()
    cache.assume_pod(pod, "n1")
    bound = make_pod("p").uid(pod.uid).requests(cpu="1").node("n1").obj()
    cache.update_pod(pod, bound)
    assert not cache.is_assumed(pod)
    assert _cpu(cache, "n1") == 1000


def test_assumed_pod_expires_only_after_binding_finished_and_ttl() -> None:
    cache, clock = _cache("n1")
    pod = make_pod("p").requests(cpu="1").obj()
    cache.assume_pod(pod, "n1")
    clock.advance(1000)
    assert cache.cleanup_assumed_pods() == []  # binding not finished: never expires
    cache.finish_binding(pod)
    clock.advance(29.9)
    assert cache.cleanup_assumed_pods() == []
    clock.advance(0.2)
    expired = cache.cleanup_assumed_pods()
    assert [p.uid for p in expired] == [pod.uid]
    assert _cpu(cache, "n1") == 0


def test_pod_before_node_and_node_removal() -> None:
    cache, _ = _cache()
    cache.add_pod(make_pod("a").requests(cpu="1").node("n1").obj())
    snap = cache.new_snapshot()
    assert snap.num_nodes == 0
    cache.add_node(make_node("n1").obj())
    cache.update_snapshot(snap)
    assert snap.num_nodes == 1
    view = snap.get("n1")
    assert view is not None and view.requested["cpu"] == 1000
    cache.remove_node(make_node("n1").obj())
    cache.update_snapshot(snap)
    assert snap.num_nodes == 0 and snap.get("n1") is None


def test_remove_pod_and_terminal_phase_update() -> None:
    cache, _ = _cache("n1")
    a = make_pod("a").requests(cpu="1").node("n1").obj()
    b = make_pod("b").requests(cpu="1").node("n1").obj()
    cache.add_pod(a)
    cache.add_pod(b)
    cache.remove_pod(a)
    import dataclasses

    cache.update_pod(b, dataclasses.replace(b, phase="Succeeded"))
    assert _cpu(cache, "n1") == 0
    assert cache.pod_count() == 0


def test_snapshot_update_is_incremental() -> None:
    cache, _ = _cache(*[f"n{i}" for i in range(50)])
    snap = cache.new_snapshot()
    assert snap.num_nodes == 50
    assert cache.update_snapshot(snap) == 0
    cache.add_pod(make_pod("a").requests(cpu="1").node("n7").obj())
    assert cache.update_snapshot(snap) == 1
    slot = snap.slot_of("n7")
    assert slot is not None
    assert snap.table.req[slot, snap.table.resources["cpu"]] == 1000
    assert snap.table.pod_count[slot] == 1
    # the snapshot holds clones: later cache changes do not leak in
    cache.add_pod(make_pod("b").requests(cpu="1").node("n7").obj())
    assert snap.view(slot).requested["cpu"] == 1000


def test_node_table_columns_and_vectorised_selectors() -> None:
    cache, _ = _cache()
    cache.add_node(
        make_node("a").zone("z1").label("cores", "8").capacity(**{"ex.com/gpu": "2"}).obj()
    )
    cache.add_node(make_node("b").zone("z2").label("cores", "4").unschedulable().taint("k").obj())
    cache.add_node(make_node("c").obj())
    snap = cache.new_snapshot()
    t = snap.table
    slots = snap.live_slots()
    assert t.alloc[snap.slot_of("a"), t.resources["ex.com/gpu"]] == 2
    assert list(t.unschedulable[slots]) == [False, True, False]
    assert t.taint_sets[t.taint_set_id[snap.slot_of("b")]][0].key == "k"
    sel = parse_node_selector({"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["5"]}]},
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "DoesNotExist"}]},
    ]}, "x")  # fmt: skip
    assert list(t.match_node_selector(sel, slots)) == [True, False, True]
    notin = parse_node_selector(
        {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "NotIn",
                            "values": ["z1"],
                        }
                    ]
                }
            ]
        },
        "x",
    )
    assert list(t.match_node_selector(notin, slots)) == [False, True, True]
    assert list(t.match_label_map({"topology.kubernetes.io/zone": "z2"}, slots)) == [
        False,
        True,
        False,
    ]
    # relabel a node: the old value disappears from its row
    cache.update_node(None, make_node("a").zone("z3").obj())
    cache.update_snapshot(snap)
    assert list(t.match_label_map({"topology.kubernetes.io/zone": "z1"}, slots)) == [False] * 3
    assert not np.any(t.has_all_keys(["cores"], slots)[:1])


def test_slot_reuse_after_node_removal() -> None:
    cache, _ = _cache("a", "b")
    snap = cache.new_snapshot()
    cache.remove_node(make_node("a").obj())
    cache.update_snapshot(snap)
    cache.add_node(make_node("c").obj())
    cache.update_snapshot(snap)
    assert snap.num_nodes == 2
    assert sorted(snap.node_names()) == ["b", "c"]
    assert len(snap.live_slots()) == 2


def test_pod_matcher_follows_removed_pods() -> None:
    from scheduler.cache.pod_matcher import PodQuery
    from scheduler.model.selectors import parse_label_selector

    cache, _ = _cache("n1", "n2")
    a = make_pod("a").labels(app="x").node("n1").obj()
    cache.add_pod(a)
    cache.add_pod(make_pod("b").labels(app="y").node("n2").obj())
    snap = cache.new_snapshot()
    sel = parse_label_selector({"matchLabels": {"app": "x"}}, "")
    query = PodQuery((sel,), frozenset(("default",)), True)
    slots, counts = snap.pod_matcher.matching(query)
    assert (slots.tolist(), counts.tolist()) == ([snap.slot_of("n1")], [1])
    cache.remove_pod(a)
    cache.update_snapshot(snap)
    slots, counts = snap.pod_matcher.matching(query)
    assert len(slots) == len(counts) == 0


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # nominated via status, then bound: gone
        ([("add", make_pod("p").uid("u").nominated("n1")),
          ("update", make_pod("p").uid("u").node("n1"))], {}),
        # re-nominated elsewhere
        ([("add", make_pod("p").uid("u").nominated("n1")),
          ("update", make_pod("p").uid("u").nominated("n2"))], {"n2": ["p"]}),
        # the API cleared it
        ([("add", make_pod("p").uid("u").nominated("n1")),
          ("update", make_pod("p").uid("u"))], {}),
        # deleted
        ([("add", make_pod("p").uid("u").nominated("n1")), ("delete", make_pod("p").uid("u"))], {}),
        # an in-memory nomination survives an unrelated update
        ([("nominate", make_pod("p").uid("u")), ("update", make_pod("p").uid("u").labels(a="b"))],
         {"n9": ["p"]}),
    ],
)  # fmt: skip
def test_nominator_follows_informer_records(
    steps: list[tuple[str, object]], expected: dict[str, list[str]]
) -> None:
    nom = Nominator()
    prev = None
    for action, builder in steps:
        pod = builder.obj()  # type: ignore[attr-defined]
        if action == "add":
            nom.on_pod_add(pod)
        elif action == "update":
            nom.on_pod_update(prev, pod)
        elif action == "delete":
            nom.on_pod_delete(pod)
        else:
            nom.add(pod, "n9")
        prev = pod
    got = {n: [p.name for p in pods.values()] for n, pods in nom.nodes_with_nominations().items()}
    assert got == expected


def by_node_name(snap: Any) -> dict[Any, dict[str, int]]:
    """The snapshot's pod groups with node names for slots (slots differ between a
    snapshot built step by step and one built at once)."""
    names = snap.table.names
    return {
        (g.namespace, frozenset(g.labels.items()), g.terminating): {
            names[slot]: n for slot, n in g.slots.items()
        }
        for g in snap.pod_matcher.groups()
    }


def test_incremental_snapshot_matches_a_fresh_one() -> None:
    # the snapshot's views, table rows and pod groups, brought up to date step by step
    # (each update touching only the changed nodes and, in the pod groups, only the
    # changed pod records) equal a snapshot built from scratch after every step
    import random

    rng = random.Random(7)
    cache, _ = _cache("n0", "n1", "n2", "n3")
    snap = cache.new_snapshot()
    live: dict[str, str] = {}  # pod name -> node
    nodes = ["n0", "n1", "n2", "n3"]
    for step in range(400):
        op = rng.random()
        name = f"p{rng.randrange(30)}"
        labels = {"app": rng.choice(["a", "b"]), "v": str(rng.randrange(3))}
        if op < 0.5:
            node = rng.choice(nodes)
            cache.update_pod(None, make_pod(name).uid(name).labels(**labels).node(node).obj())
            live[name] = node
        elif op < 0.8 and name in live:
            cache.remove_pod(make_pod(name).uid(name).node(live.pop(name)).obj())
        elif op < 0.9:
            pod = make_pod(name).uid(f"assumed-{step}").labels(**labels).obj()
            cache.assume_pod(pod, rng.choice(nodes))
        elif op < 0.95:
            gone = rng.choice(nodes)
            cache.remove_node(make_node(gone).obj())
            if len(nodes) > 1:
                nodes.remove(gone)
        else:
            new = f"n{rng.randrange(4, 8)}"
            cache.add_node(make_node(new).obj())
            if new not in nodes:
                nodes.append(new)
        if rng.random() < 0.5:
            cache.update_snapshot(snap)
            fresh = cache.new_snapshot()
            assert by_node_name(snap) == by_node_name(fresh)
            assert sorted(snap.node_names()) == sorted(fresh.node_names())
            for n in fresh.node_names():
                a, b = snap.get(n), fresh.get(n)
                assert a is not None and b is not None
                assert a.pods == b.pods and a.requested == b.requested
            assert snap.with_affinity == set() and fresh.with_affinity == set()


def test_assumed_record_equals_dataclasses_replace_field_for_field() -> None:
    import dataclasses

    from scheduler.cache.cache import _with_node_name

    pod = (
        make_pod("rich")
        .priority(7)
        .label("app", "web")
        .requests(cpu="250m", memory="1Gi")
        .host_port(8080)
        .image("nginx:1")
        .preferred_node_affinity(3, "zone", "a")
        .pvc("data")
        .owner("ReplicaSet", "rs")
        .gate("g")
        .terminating()
        .obj()
    )
    fast = _with_node_name(pod, "n1")
    slow = dataclasses.replace(pod, node_name="n1")
    assert fast == slow and fast is not pod and pod.node_name != "n1"
    for f in dataclasses.fields(slow):
        assert getattr(fast, f.name) is getattr(slow, f.name) or f.name == "node_name"
    assert fast.node_name == "n1"
