"""InterPodAffinity and PodTopologySpread filters (per-node and batch forms agree)."""

from __future__ import annotations

import pytest

from scheduler.framework import Handle, InMemoryListers
from scheduler.framework.status import Code
from scheduler.model.namespace import NamespaceInfo
from tests.unit.helpers.builders import (
    NodeBuilder,
    PodBuilder,
    filter_statuses,
    make_framework,
    make_node,
    make_pod,
    make_snapshot,
    reasons_of,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING = SPREAD + " (missing required label)"


def three_zones() -> list[NodeBuilder]:
    return [make_node("a").zone("z1"), make_node("b").zone("z1"), make_node("c").zone("z2"),
            make_node("d").zone("z3"), make_node("nolabel")]  # fmt: skip


AFFINITY_CASES = [
    ("affinity to a zone holding a matching pod",
     make_pod("p").pod_affinity(ZONE, {"app": "db"}),
     [make_pod("db").labels(app="db").node("b")],
     {"c": AFF, "d": AFF, "nolabel": AFF}),
    ("first pod of a self-affine group may go anywhere with the topology key",
     make_pod("p").labels(app="web").pod_affinity(ZONE, {"app": "web"}),
     [],
     {"nolabel": AFF}),
    ("self-affinity does not apply once a matching pod exists",
     make_pod("p").labels(app="web").pod_affinity(ZONE, {"app": "web"}),
     [make_pod("w").labels(app="web").node("d")],
     {"a": AFF, "b": AFF, "c": AFF, "nolabel": AFF}),
    ("affinity in another namespace does not count",
     make_pod("p").pod_affinity(ZONE, {"app": "db"}),
     [make_pod("db", "other").labels(app="db").node("b")],
     {"a": AFF, "b": AFF, "c": AFF, "d": AFF, "nolabel": AFF}),
    ("affinity with an explicit namespace list",
     make_pod("p").pod_affinity(ZONE, {"app": "db"}, namespaces=["other"]),
     [make_pod("db", "other").labels(app="db").node("c")],
     {"a": AFF, "b": AFF, "d": AFF, "nolabel": AFF}),
    ("anti-affinity by hostname",
     make_pod("p").pod_affinity(HOST, {"app": "web"}, anti=True),
     [make_pod("w").labels(app="web").node("a")],
     {"a": ANTI}),
    ("anti-affinity by zone with matchExpressions",
     make_pod("p").pod_affinity(ZONE, exprs=[{"key": "app", "operator": "In", "values": ["x", "y"]}],
                                anti=True),
     [make_pod("w").labels(app="y").node("c")],
     {"c": ANTI}),
    ("existing pod's anti-affinity rejects the incoming pod",
     make_pod("p").labels(app="web"),
     [make_pod("e").pod_affinity(ZONE, {"app": "web"}, anti=True).node("a")],
     {"a": EXISTING, "b": EXISTING}),
    ("existing pod's anti-affinity on another app does not matter",
     make_pod("p").labels(app="api"),
     [make_pod("e").pod_affinity(ZONE, {"app": "web"}, anti=True).node("a")],
     {}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "pod", "pods", "expected"), AFFINITY_CASES,
                         ids=[c[0] for c in AFFINITY_CASES])  # fmt: skip
def test_inter_pod_affinity(
    name: str, pod: PodBuilder, pods: list[PodBuilder], expected: dict[str, str]
) -> None:
    fw = make_framework()
    snap = make_snapshot(three_zones(), pods)
    assert reasons_of(filter_statuses(fw, pod.obj(), snap)) == expected


def test_affinity_rejection_is_unresolvable_anti_affinity_is_not() -> None:
    fw = make_framework()
    snap = make_snapshot(three_zones(), [make_pod("w").labels(app="web").node("a")])
    st = filter_statuses(fw, make_pod("p").pod_affinity(ZONE, {"app": "nope"}).obj(), snap)
    assert st["a"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    st = filter_statuses(
        fw, make_pod("p").pod_affinity(HOST, {"app": "web"}, anti=True).obj(), snap
    )
    assert st["a"].code == Code.UNSCHEDULABLE


def test_namespace_selector_uses_the_namespace_lister() -> None:
    listers = InMemoryListers()
    listers.set_namespace(NamespaceInfo(name="team-a", labels={"team": "a"}))
    listers.set_namespace(NamespaceInfo(name="team-b", labels={"team": "b"}))
    fw = make_framework(handle=Handle.from_listers(listers))
    snap = make_snapshot(
        three_zones(),
        [make_pod("x", "team-a").labels(app="db").node("c"),
         make_pod("y", "team-b").labels(app="db").node("d")],
    )  # fmt: skip
    pod = make_pod("p").pod_affinity(
        ZONE, {"app": "db"}, namespace_selector={"matchLabels": {"team": "a"}}
    )
    assert reasons_of(filter_statuses(fw, pod.obj(), snap)) == {
        "a": AFF, "b": AFF, "d": AFF, "nolabel": AFF}  # fmt: skip
    # an existing pod's anti-affinity with a namespaceSelector matching the incoming pod's namespace
    listers.set_namespace(NamespaceInfo(name="default", labels={"env": "prod"}))
    snap = make_snapshot(
        three_zones(),
        [
            make_pod("e", "team-a")
            .pod_affinity(
                HOST, {"app": "web"}, anti=True, namespace_selector={"matchLabels": {"env": "prod"}}
            )
            .node("a")
        ],
    )
    assert reasons_of(filter_statuses(fw, make_pod("p").labels(app="web").obj(), snap)) == {
        "a": EXISTING
    }


SPREAD_CASES = [
    ("zone spread maxSkew 1: only the emptiest zones",
     make_pod("p").labels(app="web").spread(1, ZONE, {"app": "web"}),
     [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("c")],
     {"a": SPREAD, "b": SPREAD, "c": SPREAD, "nolabel": MISSING}),
    ("a pod not matching its own selector adds no self-count",
     make_pod("p").labels(app="other").spread(1, ZONE, {"app": "web"}),
     [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("c")],
     {"nolabel": MISSING}),
    ("terminating pods and pods of other namespaces are not counted",
     make_pod("p").labels(app="web").spread(1, ZONE, {"app": "web"}),
     [make_pod("w1").labels(app="web").node("a").terminating(),
      make_pod("w2", "other").labels(app="web").node("c")],
     {"nolabel": MISSING}),
    ("minDomains above the domain count makes the global minimum 0",
     make_pod("p").labels(app="web").spread(1, ZONE, {"app": "web"}, min_domains=5),
     [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("c"),
      make_pod("w3").labels(app="web").node("d")],
     {"a": SPREAD, "b": SPREAD, "c": SPREAD, "d": SPREAD, "nolabel": MISSING}),
    ("nodeAffinityPolicy Honor leaves zones the pod cannot use out of the minimum",
     make_pod("p").labels(app="web").node_affinity_in(ZONE, "z1", "z2").spread(1, ZONE, {"app": "web"}),
     [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("c")],
     {"d": "node(s) didn't match Pod's node affinity/selector",
      "nolabel": "node(s) didn't match Pod's node affinity/selector"}),
    ("nodeAffinityPolicy Ignore counts the zone the pod cannot use",
     make_pod("p").labels(app="web").node_affinity_in(ZONE, "z1", "z2")
     .spread(1, ZONE, {"app": "web"}, node_affinity_policy="Ignore"),
     [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("c")],
     {"a": SPREAD, "b": SPREAD, "c": SPREAD, "d": "node(s) didn't match Pod's node affinity/selector",
      "nolabel": "node(s) didn't match Pod's node affinity/selector"}),
    # upstream countPodsMatchSelector: an empty selector (labels.Everything()) counts no
    # pod at all; the pod matches itself, so the skew is 0 + 1 - 0 everywhere
    ("an empty labelSelector counts no pod, only the pod itself",
     make_pod("p").labels(app="web").spread(1, ZONE, {}),
     [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("a"),
      make_pod("w3").labels(app="web").node("b")],
     {"nolabel": MISSING}),
    # mergeLabelSetWithSelector: the pod's matchLabelKeys values make the empty selector
    # a real one, which counts
    ("an empty labelSelector with matchLabelKeys counts the pod's label values",
     make_pod("p").labels(app="web").spread(1, ZONE, {}, match_label_keys=["app"]),
     [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("c")],
     {"a": SPREAD, "b": SPREAD, "c": SPREAD, "nolabel": MISSING}),
    ("matchLabelKeys the pod lacks leave the empty selector empty",
     make_pod("p").labels(app="web").spread(1, ZONE, {}, match_label_keys=["rev"]),
     [make_pod("w1").labels(app="web").node("a"), make_pod("w2").labels(app="web").node("c")],
     {"nolabel": MISSING}),
    ("ScheduleAnyway constraints never filter",
     make_pod("p").labels(app="web").spread(1, ZONE, {"app": "web"}, when="ScheduleAnyway"),
     [make_pod("w1").labels(app="web").node("a")],
     {}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "pod", "pods", "expected"), SPREAD_CASES, ids=[c[0] for c in SPREAD_CASES]
)
def test_topology_spread(
    name: str, pod: PodBuilder, pods: list[PodBuilder], expected: dict[str, str]
) -> None:
    fw = make_framework()
    snap = make_snapshot(three_zones(), pods)
    assert reasons_of(filter_statuses(fw, pod.obj(), snap)) == expected


def test_node_taints_policy_honor_excludes_tainted_domains() -> None:
    nodes = [make_node("a").zone("z1"), make_node("b").zone("z2").taint("k")]
    pod = make_pod("p").labels(app="web").toleration("k", effect="NoSchedule", operator="Exists")
    fw = make_framework()
    snap = make_snapshot(nodes, [make_pod("w").labels(app="web").node("a")])
    # Ignore (default): z2 counts with 0 pods -> z1 is skewed
    got = reasons_of(filter_statuses(fw, make_pod("q").labels(app="web").spread(1, ZONE, {"app": "web"})
                                     .toleration("k", operator="Exists").obj(), snap))  # fmt: skip
    assert got == {"a": SPREAD}
    got = reasons_of(filter_statuses(
        fw, make_pod("q").labels(app="web").spread(1, ZONE, {"app": "web"}, node_taints_policy="Honor")
        .obj(), snap))  # fmt: skip
    assert got == {"b": "node(s) had untolerated taint(s)"}
    assert pod  # keeps the builder used


def test_absent_label_selector_matches_nothing_not_even_the_pod() -> None:
    pod = make_pod("p").labels(app="web").spread(1, ZONE, {}).raw()
    del pod["spec"]["topologySpreadConstraints"][0]["labelSelector"]
    from scheduler.model.pod import pod_from_dict

    snap = make_snapshot(three_zones(), [make_pod("w1").labels(app="web").node("a")])
    got = reasons_of(filter_statuses(make_framework(), pod_from_dict(pod), snap))
    assert got == {"nolabel": MISSING}


def test_empty_selector_counts_pods_added_in_a_dry_run() -> None:
    """upstream updateWithPod (AddPod/RemovePod, used by preemption dry runs) has no
    Empty() check: with `labelSelector: {}` an added pod of the namespace counts."""
    from scheduler.framework import CycleState

    fw = make_framework()
    snap = make_snapshot([make_node("a").zone("z1"), make_node("b").zone("z2")])
    pod = make_pod("p").labels(app="web").spread(1, ZONE, {}).obj()
    state = CycleState()
    assert fw.run_pre_filter(state, pod, snap)[1].ok
    view_a = snap.get("a")
    assert fw.run_filter(state, pod, view_a).ok
    for name in ("x1", "x2"):
        other = make_pod(name).labels(anything="1").node("a").obj()
        view_a.add_pod(other)
        assert fw.filter_runner.add_pod(state, pod, other, view_a).ok
    # z1 now counts 2 (+1 self) against z2's 0
    assert fw.run_filter(state, pod, view_a).message() == SPREAD
    assert fw.run_filter(state, pod, snap.get("b")).ok


def test_match_label_keys_split_the_count_by_revision() -> None:
    fw = make_framework()
    snap = make_snapshot(
        three_zones(),
        [
            make_pod("old").labels(app="web", rev="1").node("a"),
            make_pod("old2").labels(app="web", rev="1").node("c"),
        ],
    )
    pod = (
        make_pod("p")
        .labels(app="web", rev="2")
        .spread(1, ZONE, {"app": "web"}, match_label_keys=["rev"])
    )
    assert reasons_of(filter_statuses(fw, pod.obj(), snap)) == {"nolabel": MISSING}
