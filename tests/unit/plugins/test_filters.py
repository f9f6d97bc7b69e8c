"""Filter plugins as case tables. Every case runs through both the per-node and the
batch form (builders.filter_statuses asserts they agree)."""

from __future__ import annotations

import pytest

from scheduler.framework.status import Code
from tests.unit.helpers.builders import (
    NodeBuilder,
    PodBuilder,
    filter_statuses,
    make_framework,
    make_node,
    make_pod,
    reasons_of,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _run(
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    pods: list[PodBuilder] | None = None,
    plugins: list[str] | None = None,
    args: dict[str, object] | None = None,
) -> dict[str, str]:
    from tests.unit.helpers.builders import make_snapshot

    fw = make_framework(plugins, args)
    return reasons_of(filter_statuses(fw, pod.obj(), make_snapshot(nodes, pods)))


CASES = [
    (
        "unschedulable node is rejected unless tolerated",
        make_pod("p"),
        [make_node("a").unschedulable(), make_node("b")],
        [],
        {"a": "node(s) were unschedulable"},
    ),
    (
        "unschedulable toleration lets the pod in",
        make_pod("p").toleration("node.kubernetes.io/unschedulable", effect="NoSchedule",
                                 operator="Exists"),
        [make_node("a").unschedulable()],
        [],
        {},
    ),
    (
        "untolerated NoSchedule and NoExecute taints; PreferNoSchedule is not a filter",
        make_pod("p").toleration("t1", "v", "NoSchedule"),
        [make_node("a").taint("t1", "v"), make_node("b").taint("t2", "x", "NoExecute"),
         make_node("c").taint("t3", "", "PreferNoSchedule")],
        [],
        {"b": "node(s) had untolerated taint(s)"},
    ),
    (
        "nodeSelector and required node affinity",
        make_pod("p").node_selector(disk="ssd").node_affinity_in(ZONE, "z1", "z2"),
        [make_node("a").label("disk", "ssd").zone("z1"), make_node("b").label("disk", "hdd").zone("z1"),
         make_node("c").label("disk", "ssd").zone("z3")],
        [],
        {"b": "node(s) didn't match Pod's node affinity/selector",
         "c": "node(s) didn't match Pod's node affinity/selector"},
    ),
    (
        "node affinity Gt / DoesNotExist",
        make_pod("p").node_affinity_term([{"key": "cores", "operator": "Gt", "values": ["4"]},
                                          {"key": "spot", "operator": "DoesNotExist"}]),
        [make_node("a").label("cores", "8"), make_node("b").label("cores", "2"),
         make_node("c").label("cores", "16").label("spot", "true")],
        [],
        {"b": "node(s) didn't match Pod's node affinity/selector",
         "c": "node(s) didn't match Pod's node affinity/selector"},
    ),
    (
        "node name",
        make_pod("p").node("b"),
        [make_node("a"), make_node("b")],
        [],
        {"a": "node(s) didn't match the requested node name"},
    ),
    (
        "host port conflicts",
        make_pod("p").host_port(80).host_port(53, "UDP", "10.0.0.1"),
        [make_node("a"), make_node("b"), make_node("c")],
        [make_pod("e1").host_port(80, host_ip="10.0.0.9").node("a"),
         make_pod("e2").host_port(53, "UDP", "10.0.0.2").node("b"),
         make_pod("e3").host_port(80, "UDP").node("c")],
        {"a": "node(s) didn't have free ports for the requested pod ports"},
    ),
    (
        "insufficient resources and too many pods",
        make_pod("p").requests(cpu="2", memory="1Gi", **{"example.com/gpu": "1"}),
        [make_node("a").capacity(cpu="4", **{"example.com/gpu": "1"}),
         make_node("b").capacity(cpu="1", **{"example.com/gpu": "1"}),
         make_node("c").capacity(cpu="8", memory="512Mi"),
         make_node("d").capacity(pods="1", **{"example.com/gpu": "2"})],
        [make_pod("e").requests(cpu="3").node("a"), make_pod("f").node("d")],
        {"a": "Insufficient cpu",
         "b": "Insufficient cpu",
         "c": "Insufficient memory, Insufficient example.com/gpu",
         "d": "Too many pods"},
    ),
    (
        "terminating pods still hold their resources",
        make_pod("p").requests(cpu="2"),
        [make_node("a").capacity(cpu="3")],
        [make_pod("e").requests(cpu="2").node("a").terminating()],
        {"a": "Insufficient cpu"},
    ),
    (
        "a best-effort pod is only checked for pod count",
        make_pod("p"),
        [make_node("a").capacity(cpu="1")],
        [make_pod("e").requests(cpu="1").node("a")],
        {},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "pod", "nodes", "pods", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_filter_cases(
    name: str,
    pod: PodBuilder,
    nodes: list[NodeBuilder],
    pods: list[PodBuilder],
    expected: dict[str, str],
) -> None:
    assert _run(pod, nodes, pods) == expected


def test_ignored_resources_are_not_checked() -> None:
    got = _run(
        make_pod("p").requests(**{"example.com/foo": "1", "ignored.io/bar": "2"}),
        [make_node("a")],
        args={"NodeResourcesFit": {"ignoredResources": ["example.com/foo"],
                                   "ignoredResourceGroups": ["ignored.io"]}},
    )  # fmt: skip
    assert got == {}


def test_added_affinity_is_enforced_first() -> None:
    got = _run(
        make_pod("p").node_selector(disk="ssd"),
        [make_node("a").label("pool", "x").label("disk", "ssd"), make_node("b").label("disk", "ssd")],
        args={"NodeAffinity": {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "pool", "operator": "In", "values": ["x"]}]}]}}}},
    )  # fmt: skip
    assert got == {"b": "node(s) didn't match scheduler-enforced node affinity"}


def test_taint_and_affinity_rejections_are_unresolvable_resources_are_not() -> None:
    from tests.unit.helpers.builders import make_snapshot

    fw = make_framework()
    snap = make_snapshot(
        [make_node("a").taint("k"), make_node("b").capacity(cpu="3")],
        [make_pod("used").node("b").requests(cpu="2")],
    )
    statuses = filter_statuses(fw, make_pod("p").requests(cpu="2").obj(), snap)
    assert statuses["a"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    # short only because of what runs there: evicting it would help
    assert statuses["b"].code == Code.UNSCHEDULABLE
    assert statuses["a"].plugin == "TaintToleration"
    assert statuses["b"].plugin == "NodeResourcesFit"


@pytest.mark.parametrize(
    ("requests", "code", "reasons"),
    [
        # beyond the whole allocatable: preemption cannot help (upstream fitsRequest)
        ({"cpu": "5"}, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient cpu",)),
        ({"memory": "5Gi"}, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient memory",)),
        ({"example.com/gpu": "1"}, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         ("Insufficient example.com/gpu",)),
        # one short resource beyond allocatable makes the whole status unresolvable
        ({"cpu": "2", "memory": "5Gi"}, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
         ("Insufficient cpu", "Insufficient memory")),
        # short only because of the running pod: preemption may help
        ({"cpu": "2"}, Code.UNSCHEDULABLE, ("Insufficient cpu",)),
    ],
)  # fmt: skip
def test_request_beyond_allocatable_is_unresolvable(
    requests: dict[str, str], code: Code, reasons: tuple[str, ...]
) -> None:
    from tests.unit.helpers.builders import make_snapshot

    fw = make_framework()
    snap = make_snapshot(
        [make_node("n").capacity(cpu="4", memory="4Gi")],
        [make_pod("used").node("n").requests(cpu="3")],
    )
    st = filter_statuses(fw, make_pod("p").requests(**requests).obj(), snap)["n"]
    assert st.code == code
    assert st.reasons == reasons
    assert st.plugin == "NodeResourcesFit"
