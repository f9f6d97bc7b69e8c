"""PodDisruptionBudget and PriorityClass records from raw JSON."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.model.errors import InvalidObject
from scheduler.model.pdb import pdb_from_dict
from scheduler.model.priority_class import priority_class_from_dict, resolve_priority
from tests.unit.helpers.builders import make_pod


def raw_pdb(selector: Any = None, **status: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "prod", "resourceVersion": "7"},
        "spec": {"minAvailable": 2},
        "status": status,
    }
    if selector is not None:
        raw["spec"]["selector"] = selector
    return raw


def test_pdb_record_keeps_what_preemption_reads() -> None:
    pdb = pdb_from_dict(
        raw_pdb(
            {"matchLabels": {"app": "db"}},
            disruptionsAllowed=1,
            disruptedPods={"db-0": "2024-01-01T00:00:00Z"},
        )
    )
    assert (pdb.key, pdb.disruptions_allowed, pdb.disrupted_pods) == ("prod/db", 1, {"db-0"})
    assert pdb.resource_version == "7"
    assert pdb.matches(make_pod("db-1", "prod").labels(app="db").obj())
    assert not pdb.matches(make_pod("db-1", "other").labels(app="db").obj())
    assert not pdb.matches(make_pod("web", "prod").labels(app="web").obj())


@pytest.mark.parametrize(
    ("case", "selector"),
    [
        ("absent selector", None),
        ("empty selector (upstream preemption: matches nothing)", {}),
        ("invalid selector (upstream: skipped)", {"matchExpressions": [{"key": "a"}]}),
    ],
)
def test_pdb_selectors_that_match_no_pod(case: str, selector: Any) -> None:
    pdb = pdb_from_dict(raw_pdb(selector))
    assert not pdb.matches(make_pod("p", "prod").labels(app="db").obj()), case


def test_pdb_without_status_has_no_budget() -> None:
    assert pdb_from_dict(raw_pdb({"matchLabels": {"a": "b"}})).disruptions_allowed == 0


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"metadata": {}}, "metadata.name"),
        (raw_pdb(disruptionsAllowed="1"), "status.disruptionsAllowed"),
        (raw_pdb(disruptedPods=["a"]), "status.disruptedPods"),
    ],
)
def test_malformed_pdb_names_the_field(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidObject) as err:
        pdb_from_dict(raw)
    assert err.value.path == path


def test_priority_class_record_and_resolution() -> None:
    high = priority_class_from_dict(
        {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"}
    )
    default = priority_class_from_dict(
        {"metadata": {"name": "std"}, "value": 10, "globalDefault": True}
    )
    assert (high.value, high.preemption_policy, high.global_default) == (1000, "Never", False)
    assert default.preemption_policy == "PreemptLowerPriority"
    assert resolve_priority("high", [high, default]) == 1000
    assert resolve_priority("", [high, default]) == 10
    assert resolve_priority("missing", [high]) == 0


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"metadata": {"name": "x"}, "value": "1"}, "value"),
        ({"metadata": {"name": "x"}, "globalDefault": "yes"}, "globalDefault"),
        ({"metadata": {"name": "x"}, "preemptionPolicy": "Sometimes"}, "preemptionPolicy"),
    ],
)
def test_malformed_priority_class_names_the_field(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidObject) as err:
        priority_class_from_dict(raw)
    assert err.value.path == path
