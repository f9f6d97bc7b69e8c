"""The PodGroup record (scheduling.k8s.io/v1beta1): policy, minCount, disruption mode,
priority, as k8s.io/api@v0.37.2 scheduling/v1beta1/types.go defines them."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.model.errors import InvalidObject
from scheduler.model.pod_group import PodGroupInfo, pod_group_from_dict


def _raw(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "trainers", "namespace": "ml", "uid": "u1", "resourceVersion": "7"},
        "spec": spec,
    }


def test_a_gang_with_everything_the_api_server_stores() -> None:
    g = pod_group_from_dict(
        _raw(
            schedulingPolicy={"gang": {"minCount": 8}},
            disruptionMode={"all": {}},
            priorityClassName="high",
            priority=1000,
            workloadRef={"workloadName": "job-1", "templateName": "workers"},
        )
    )
    assert g == PodGroupInfo(
        namespace="ml", name="trainers", uid="u1", policy="gang", min_count=8,
        disruption_mode="all", priority=1000, priority_class_name="high",
        workload_name="job-1", workload_template="workers", resource_version="7",
    )  # fmt: skip
    assert g.is_gang and g.key == "ml/trainers"


def test_a_basic_group_is_a_gang_of_one_and_the_defaults_hold() -> None:
    # basic: minCount 1 (gangscheduling.go); disruption single and priority 0 when absent
    g = pod_group_from_dict(_raw(schedulingPolicy={"basic": {}}))
    assert (g.policy, g.min_count, g.is_gang) == ("basic", 1, False)
    assert (g.disruption_mode, g.priority, g.workload_name) == ("single", 0, "")


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({}, "spec.schedulingPolicy"),
        ({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}, "spec.schedulingPolicy"),
        ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount"),
        ({"schedulingPolicy": {"gang": {"minCount": "2"}}}, "spec.schedulingPolicy.gang.minCount"),
        ({"schedulingPolicy": {"gang": []}}, "spec.schedulingPolicy.gang"),
        ({"schedulingPolicy": {"basic": {}}, "disruptionMode": {}}, "spec.disruptionMode"),
        ({"schedulingPolicy": {"basic": {}}, "priority": True}, "spec.priority"),
        ({"schedulingPolicy": {"basic": {}}, "workloadRef": "w"}, "spec.workloadRef"),
    ],
)
def test_a_shape_the_api_server_never_stores_names_the_field(spec: Any, path: str) -> None:
    with pytest.raises(InvalidObject) as info:
        pod_group_from_dict(_raw(**spec))
    assert info.value.path == path
