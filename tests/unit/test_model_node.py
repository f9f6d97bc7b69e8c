import pytest
from builders import make_node

from scheduler.model.errors import InvalidObject
from scheduler.model.node import node_from_dict
from scheduler.model.selectors import parse_label_selector, parse_node_selector
from scheduler.model.taints import Taint, Toleration


def test_node_record() -> None:
    n = (
        make_node("n1")
        .capacity(cpu="8", memory="16Gi", **{"nvidia.com/gpu": "2"})
        .zone("a")
        .taint("dedicated", "gpu")
        .image("nginx", 100)
        .unschedulable()
        .obj()
    )
    assert n.name == "n1"
    assert n.allocatable["cpu"] == 8000
    assert n.allocatable["memory"] == 16 * 2**30
    assert n.allocatable["nvidia.com/gpu"] == 2
    assert n.allowed_pods == 110
    assert n.labels["topology.kubernetes.io/zone"] == "a"
    assert n.taints == (Taint("dedicated", "gpu", "NoSchedule"),)
    assert n.images == {"nginx:latest": 100}
    assert n.unschedulable and n.ready


def test_node_not_ready() -> None:
    assert not make_node("n").not_ready().obj().ready


def test_malformed_node() -> None:
    raw = make_node("n").raw()
    raw["spec"]["taints"] = [{"key": "k", "effect": "Sometimes"}]
    with pytest.raises(InvalidObject, match=r"spec\.taints"):
        node_from_dict(raw)


@pytest.mark.parametrize(
    ("tol", "taint", "ok"),
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "v", ""), Taint("k", "v", "NoExecute"), True),
        (Toleration("k", "Equal", "w", ""), Taint("k", "v", "NoSchedule"), False),
        (Toleration("k", "Exists", "", "NoSchedule"), Taint("k", "any", "NoSchedule"), True),
        (Toleration("", "Exists", "", ""), Taint("x", "y", "NoExecute"), True),
        (Toleration("k", "Exists", "", "NoExecute"), Taint("k", "", "NoSchedule"), False),
        (Toleration("", "Equal", "", ""), Taint("k", "", "NoSchedule"), False),
    ],
)
def test_toleration_matching(tol: Toleration, taint: Taint, ok: bool) -> None:
    assert tol.tolerates(taint) is ok


@pytest.mark.parametrize(
    ("raw", "labels", "ok"),
    [
        ({}, {"a": "1"}, True),
        (None, {"a": "1"}, False),
        ({"matchLabels": {"a": "1"}}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
    ],
)
def test_label_selector(raw: object, labels: dict[str, str], ok: bool) -> None:
    assert parse_label_selector(raw, "sel").matches(labels) is ok


@pytest.mark.parametrize(
    ("terms", "labels", "name", "ok"),
    [
        (
            [{"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["4"]}]}],
            {"cpu": "8"},
            "n",
            True,
        ),
        (
            [{"matchExpressions": [{"key": "cpu", "operator": "Lt", "values": ["4"]}]}],
            {"cpu": "8"},
            "n",
            False,
        ),
        (
            [{"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["4"]}]}],
            {"cpu": "x"},
            "n",
            False,
        ),
        (
            [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}],
            {},
            "n",
            True,
        ),
        ([{}], {"a": "b"}, "n", False),  # an empty term matches nothing
        (
            [
                {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]},
                {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
            ],
            {"b": "1"},
            "n",
            True,
        ),
    ],
)
def test_node_selector_terms_are_ored(
    terms: list[object], labels: dict[str, str], name: str, ok: bool
) -> None:
    sel = parse_node_selector({"nodeSelectorTerms": terms}, "x")
    assert sel.matches(labels, name) is ok
