import pytest

from scheduler.model.errors import InvalidObject
from scheduler.model.node import UNREADABLE_TAINTS, node_from_dict
from scheduler.model.selectors import parse_label_selector, parse_node_selector
from scheduler.model.taints import Taint, Toleration, find_untolerated
from tests.unit.helpers.builders import make_node


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
    assert n.allocatable["pods"] == 110
    assert n.labels["topology.kubernetes.io/zone"] == "a"
    assert n.taints == (Taint("dedicated", "gpu", "NoSchedule"),)
    assert n.images == {"nginx": 100}  # as reported: only the pod side is normalised
    assert n.unschedulable and n.ready


def test_node_not_ready() -> None:
    assert not make_node("n").not_ready().obj().ready


def test_malformed_taint_keeps_the_node_and_keeps_pods_off_it() -> None:
    raw = make_node("n").capacity(cpu="4").raw()
    raw["spec"]["taints"] = [{"key": "k", "effect": "Sometimes"}]
    n = node_from_dict(raw)
    assert n.allocatable["cpu"] == 4000  # still visible, capacity counted
    assert n.problems == ("spec.taints[0].effect: unknown effect 'Sometimes'",)
    assert n.taints == UNREADABLE_TAINTS  # the unknown taint may have repelled pods


# Each input below once crashed node_from_dict with something else than InvalidObject
# (found by `python -m tests.faults --only parse_fuzz`): the line it crashed at is named.


@pytest.mark.parametrize("metadata", [True, [], "n", 0])
def test_unreadable_metadata_raises_invalid_object(metadata: object) -> None:
    # node.py:57 (AttributeError: 'bool' object has no attribute 'get')
    raw = make_node("n").raw()
    raw["metadata"] = metadata
    with pytest.raises(InvalidObject, match=r"^metadata: must be an object"):
        node_from_dict(raw)


@pytest.mark.parametrize("raw", [None, [], "node", 7])
def test_a_node_that_is_no_object_raises_invalid_object(raw: object) -> None:
    with pytest.raises(InvalidObject, match="node must be an object"):
        node_from_dict(raw)


@pytest.mark.parametrize("part", ["spec", "status"])
@pytest.mark.parametrize("value", [True, [], "x", 0])
def test_unreadable_spec_or_status_is_a_problem_not_a_crash(part: str, value: object) -> None:
    # node.py:66 (AttributeError: 'bool' object has no attribute 'get')
    raw = make_node("n").capacity(cpu="2").zone("a").raw()
    raw[part] = value
    n = node_from_dict(raw)
    assert n.problems == (f"{part}: must be an object",)
    assert n.labels["topology.kubernetes.io/zone"] == "a"
    # the safe side: an unreadable spec may have had taints or unschedulable
    assert set(UNREADABLE_TAINTS) <= set(n.taints)
    if part == "spec":
        assert n.allocatable["cpu"] == 2000 and n.unschedulable
    else:
        assert n.allocatable == {} and not n.ready


@pytest.mark.parametrize("effect", [["NoSchedule"], {"a": 1}, None, 3])
def test_unhashable_or_missing_taint_effect_is_a_problem(effect: object) -> None:
    # node.py:70 (TypeError: unhashable type: 'list', from `effect not in EFFECTS`)
    raw = make_node("n").raw()
    raw["spec"]["taints"] = [{"key": "k", "effect": effect}]
    n = node_from_dict(raw)
    assert n.problems and n.problems[0].startswith("spec.taints[0].effect: unknown effect")
    assert n.taints == UNREADABLE_TAINTS


@pytest.mark.parametrize("size", [[1], "1000", 1.5, True, -1, {}])
def test_unreadable_image_size_leaves_out_that_image_only(size: object) -> None:
    # node.py:86 (TypeError: int() argument must be ... not 'list')
    raw = make_node("n").image("good", 7).raw()
    raw["status"]["images"].append({"names": ["bad"], "sizeBytes": size})
    n = node_from_dict(raw)
    assert n.images == {"good": 7}
    assert len(n.problems) == 1 and n.problems[0].startswith("status.images[1].sizeBytes:")


def test_unreadable_allocatable_amount_reads_as_none_of_it() -> None:
    raw = make_node("n").capacity(cpu="4", memory="1Gi").raw()
    raw["status"]["allocatable"]["memory"] = ["1Gi"]
    n = node_from_dict(raw)
    assert n.allocatable.get("cpu") == 4000 and "memory" not in n.allocatable
    assert n.problems[0].startswith("status.allocatable.memory:")


@pytest.mark.parametrize("value", ["true", 1, [], {}])
def test_unreadable_unschedulable_reads_as_unschedulable(value: object) -> None:
    raw = make_node("n").raw()
    raw["spec"]["unschedulable"] = value
    n = node_from_dict(raw)
    assert n.unschedulable and n.problems[0].startswith("spec.unschedulable:")


@pytest.mark.parametrize("labels", [[], "a=b", {"a": 1}, {"a": ["b"]}, 0, False])
def test_unreadable_labels_are_a_problem(labels: object) -> None:
    raw = make_node("n").raw()
    raw["metadata"]["labels"] = labels
    n = node_from_dict(raw)
    assert n.labels == {} and n.problems == ("metadata.labels: must be a map of strings",)


def test_a_node_with_problems_takes_only_pods_that_tolerate_everything() -> None:
    raw = make_node("n").raw()
    raw["status"]["conditions"] = "Ready"
    n = node_from_dict(raw)
    assert n.problems == ("status.conditions: must be a list",)
    picky = (Toleration("k", "Exists", "", ""),)
    everything = (Toleration("", "Exists", "", ""),)
    effects = frozenset({"NoSchedule", "NoExecute"})
    assert find_untolerated(n.taints, picky, effects) is not None
    assert find_untolerated(n.taints, everything, effects) is None


def test_a_readable_node_has_no_problems_and_no_extra_taints() -> None:
    n = make_node("n").taint("k", "v").obj()
    assert n.problems == () and n.taints == (Taint("k", "v", "NoSchedule"),)


@pytest.mark.parametrize(
    ("expr", "field"),
    [
        ({"key": "a", "operator": ["In"], "values": ["x"]}, "operator"),
        ({"key": "a", "operator": {"In": 1}}, "operator"),
        ({"key": "a", "operator": "In", "values": 0}, "values"),
        ({"key": "a", "operator": "In", "values": "x"}, "values"),
        ({"key": ["a"], "operator": "Exists"}, "key"),
    ],
)
def test_label_selector_requirement_of_wrong_shape_raises_invalid_object(
    expr: dict[str, object], field: str
) -> None:
    # selectors.py:154 (TypeError: unhashable type: 'list', from `op not in ops`)
    with pytest.raises(InvalidObject, match=rf"^sel\.matchExpressions\[0\]\.{field}:"):
        parse_label_selector({"matchExpressions": [expr]}, "sel")


@pytest.mark.parametrize(
    "raw",
    [
        {"matchLabels": []},
        {"matchLabels": {"a": ["b"]}},
        {"matchLabels": 0},
        {"matchExpressions": {}},
        {"matchExpressions": False},
    ],
)
def test_label_selector_parts_of_wrong_type_are_not_taken_for_absent(raw: object) -> None:
    with pytest.raises(InvalidObject, match=r"^sel\.match"):
        parse_label_selector(raw, "sel")


@pytest.mark.parametrize(
    "raw",
    [
        {"nodeSelectorTerms": {}},
        {"nodeSelectorTerms": [{"matchExpressions": 0}]},
        {"nodeSelectorTerms": [{"matchFields": ""}]},
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": ["Gt"]}]}]},
    ],
)
def test_node_selector_of_wrong_shape_raises_invalid_object(raw: object) -> None:
    with pytest.raises(InvalidObject, match=r"^x\.nodeSelectorTerms"):
        parse_node_selector(raw, "x", strict=False)


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
