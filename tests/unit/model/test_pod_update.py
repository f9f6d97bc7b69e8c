"""pod_update_from_dict: reading a new version of a pod with the previous record in hand
gives exactly the record pod_from_dict builds, and reuses the parsed spec only when the
inputs it was parsed from are unchanged (model.pod_digest)."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.model import pod as pod_module
from scheduler.model.pod import PodInfo, pod_from_dict, pod_update_from_dict

Raw = dict[str, Any]

FUZZ = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def stored_pod() -> Raw:
    """A pod as the API server stores it after admission (defaults filled in)."""
    return {
        "metadata": {
            "name": "web-1",
            "namespace": "prod",
            "uid": "u-1",
            "resourceVersion": "10",
            "labels": {"app": "web", "tier": "front"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": True}
            ],
            "managedFields": [{"manager": "kubectl", "operation": "Update"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                }
            ],
            "initContainers": [
                {
                    "name": "side",
                    "image": "envoy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}},
                }
            ],
            "schedulerName": "default-scheduler",
            "priority": 10,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            "nodeSelector": {"disk": "ssd"},
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "h"}
                    ]
                }
            },
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "matchLabelKeys": ["tier"],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-1"}}],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def set_path(raw: Raw, path: tuple[Any, ...], value: Any) -> None:
    """Set raw[path] (creating objects on the way), or delete it when value is DELETE."""
    node = raw
    for key in path[:-1]:
        node = node[key] if isinstance(node, list) else node.setdefault(key, {})
    if value is DELETE:
        if isinstance(node, dict):
            node.pop(path[-1], None)
        return
    node[path[-1]] = value


DELETE = object()


def changed(*edits: tuple[tuple[Any, ...], Any]) -> Raw:
    raw = stored_pod()
    for path, value in edits:
        set_path(raw, path, value)
    return raw


def parsed_in_full(raw: Raw) -> PodInfo:
    """pod_from_dict without the templates of earlier pods (the reference)."""
    pod_module._templates.clear()
    return pod_from_dict(raw)


def assert_same_record(new: Raw, previous: PodInfo) -> PodInfo:
    fresh = parsed_in_full(copy.deepcopy(new))
    updated = pod_update_from_dict(copy.deepcopy(new), previous)
    assert updated == fresh
    assert updated.problems == fresh.problems
    assert updated.scheduling_digest == fresh.scheduling_digest
    assert updated.scheduling_problem_count == fresh.scheduling_problem_count
    return updated


RUNNING_STATUS: Raw = {
    "phase": "Running",
    "startTime": "2026-12-01T10:00:00Z",
    "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True"},
    ],
    "containerStatuses": [
        {"name": "app", "ready": True, "restartCount": 0, "state": {"running": {}}}
    ],
}

# each changes one thing a record depends on; the second element says whether the parsed
# scheduling part may be reused for it
EDITS: list[tuple[str, Raw, bool]] = [
    ("bind", changed((("spec", "nodeName"), "n1")), True),
    ("running", changed((("spec", "nodeName"), "n1"), (("status",), RUNNING_STATUS)), True),
    ("resource version", changed((("metadata", "resourceVersion"), "11")), True),
    ("nominated", changed((("status", "nominatedNodeName"), "n2")), True),
    ("phase", changed((("status", "phase"), "Failed")), True),
    (
        "condition",
        changed((("status", "conditions"), [{"type": "PodScheduled", "status": "False"}])),
        True,
    ),
    (
        "deletion",
        changed((("metadata", "deletionTimestamp"), "2026-12-01T10:00:00Z")),
        True,
    ),
    ("owner", changed((("metadata", "ownerReferences"), [])), True),
    ("new uid", changed((("metadata", "uid"), "u-2")), True),
    ("annotation", changed((("metadata", "annotations"), {"a": "b"})), True),
    # "tier" is a matchLabelKeys key of the spread constraint; "app" is not
    ("label", changed((("metadata", "labels", "tier"), "back")), False),
    ("label gone", changed((("metadata", "labels"), DELETE)), False),
    ("other label", changed((("metadata", "labels", "app"), "api")), True),
    (
        "topology labels of the bind",
        changed(
            (("spec", "nodeName"), "n1"),
            (("metadata", "labels", "topology.kubernetes.io/zone"), "a"),
        ),
        True,
    ),
    ("labels unreadable", changed((("metadata", "labels", "app"), 1)), False),
    (
        "spec resize",
        changed((("spec", "containers", 0, "resources", "requests", "cpu"), "500m")),
        False,
    ),
    ("toleration", changed((("spec", "tolerations"), [])), False),
    ("gates", changed((("spec", "schedulingGates"), [{"name": "g"}])), False),
    ("priority", changed((("spec", "priority"), 11)), False),
    ("image", changed((("spec", "containers", 0, "image"), "nginx:1.28")), False),
    (
        "allocated by the kubelet",
        changed(
            (
                ("status", "containerStatuses"),
                [{"name": "app", "allocatedResources": {"cpu": "1"}}],
            )
        ),
        False,
    ),
    (
        "actuated by the kubelet",
        changed(
            (
                ("status", "containerStatuses"),
                [{"name": "app", "resources": {"requests": {"cpu": "2"}}}],
            )
        ),
        False,
    ),
    (
        "sidecar allocated",
        changed(
            (
                ("status", "initContainerStatuses"),
                [{"name": "side", "allocatedResources": {"cpu": "3"}}],
            )
        ),
        False,
    ),
    ("pod-level allocated", changed((("status", "allocatedResources"), {"cpu": "4"})), False),
    (
        "pod-level actuated",
        changed((("status", "resources"), {"requests": {"cpu": "5"}})),
        False,
    ),
    (
        "resize infeasible",
        changed(
            (
                ("status", "conditions"),
                [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
            )
        ),
        False,
    ),
    (
        "bad quantity",
        changed((("spec", "containers", 0, "resources", "requests", "cpu"), "x")),
        False,
    ),
    ("bad start time", changed((("status", "startTime"), "soon")), True),
    ("bad owners", changed((("metadata", "ownerReferences"), "me")), True),
    ("spec not an object", changed((("spec",), ["x"])), False),
    ("status not an object", changed((("status",), "up")), False),
    ("NaN priority", changed((("spec", "priority"), float("nan"))), False),
    ("null priority", changed((("spec", "priority"), None)), False),
]


@pytest.mark.parametrize(("what", "new", "reusable"), EDITS, ids=[e[0] for e in EDITS])
def test_an_update_reads_as_a_fresh_parse(what: str, new: Raw, reusable: bool) -> None:
    previous = pod_from_dict(stored_pod())
    updated = assert_same_record(new, previous)
    # the parsed part is reused exactly when its inputs are unchanged
    assert (updated.requests is previous.requests) == reusable, what
    # and back: from the changed version to the original
    assert_same_record(stored_pod(), pod_from_dict(copy.deepcopy(new)))


def test_the_bind_and_the_running_status_reuse_the_parsed_spec() -> None:
    previous = pod_from_dict(stored_pod())
    bound = pod_update_from_dict(EDITS[1][1], previous)
    assert bound.node_name == "n1" and bound.phase == "Running"
    assert bound.conditions[1].type == "Ready"
    for f in ("tolerations", "required_anti_affinity", "spread_constraints", "volumes"):
        assert getattr(bound, f) is getattr(previous, f), f


def test_problems_of_both_parts_survive_a_reused_parse() -> None:
    raw = changed(
        (("spec", "containers", 0, "resources", "requests", "cpu"), "x"),
        (("status", "startTime"), "soon"),
    )
    previous = pod_from_dict(raw)
    assert len(previous.problems) == 2
    fixed_time = copy.deepcopy(raw)
    fixed_time["status"]["startTime"] = "2026-12-01T10:00:00Z"
    updated = assert_same_record(fixed_time, previous)
    assert updated.problems == previous.problems[:1]
    assert "spec.containers[0].resources.requests.cpu" in updated.refusal()


def test_an_update_from_an_unrelated_record_is_still_exact() -> None:
    # a record built elsewhere (no digest) never lends its parsed part
    previous = pod_from_dict(stored_pod())
    other = PodInfo(uid="u-1", namespace="prod", name="web-1", priority=99)
    assert pod_update_from_dict(stored_pod(), other) == previous


# ---- property: any two versions of a pod, read either way, give the same record ----

PATHS: list[tuple[Any, ...]] = [
    ("metadata", "labels"),
    ("metadata", "labels", "tier"),
    ("metadata", "labels", "app"),
    ("spec", "topologySpreadConstraints"),
    ("spec", "topologySpreadConstraints", 0, "matchLabelKeys", 0),
    ("metadata", "namespace"),
    ("metadata", "uid"),
    ("metadata", "deletionTimestamp"),
    ("metadata", "ownerReferences"),
    ("spec", "nodeName"),
    ("spec", "priority"),
    ("spec", "schedulerName"),
    ("spec", "preemptionPolicy"),
    ("spec", "schedulingGates"),
    ("spec", "tolerations"),
    ("spec", "nodeSelector"),
    ("spec", "overhead"),
    ("spec", "resources"),
    ("spec", "resourceClaims"),
    ("spec", "containers", 0, "resources", "requests", "cpu"),
    ("spec", "containers", 0, "ports"),
    ("spec", "initContainers", 0, "restartPolicy"),
    ("spec", "affinity"),
    ("spec", "topologySpreadConstraints", 0, "matchLabelKeys"),
    ("spec", "volumes"),
    ("status", "phase"),
    ("status", "startTime"),
    ("status", "nominatedNodeName"),
    ("status", "conditions"),
    ("status", "containerStatuses"),
    ("status", "initContainerStatuses"),
    ("status", "allocatedResources"),
    ("status", "resources"),
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "1", "500m", "64Mi", "n1", "Always", "Infeasible", "app", "x"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                ["name", "cpu", "requests", "allocatedResources", "resources", "type", "reason"]
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=6,
)
edits = st.lists(
    st.tuples(st.sampled_from(PATHS), st.one_of(json_values, st.just(DELETE))), max_size=3
)


def apply(raw: Raw, changes: list[tuple[tuple[Any, ...], Any]]) -> Raw:
    for path, value in changes:
        # a path through something that is not an object is left alone
        with contextlib.suppress(KeyError, IndexError, TypeError, AttributeError):
            set_path(raw, path, value if value is DELETE else copy.deepcopy(value))
    return raw


@FUZZ
@given(edits, edits)
def test_any_two_versions_read_alike(first: Any, second: Any) -> None:
    old = apply(stored_pod(), first)
    new = apply(copy.deepcopy(old), second)
    assert_same_record(new, pod_from_dict(copy.deepcopy(old)))


@pytest.mark.parametrize(
    ("path", "odd"),
    [
        (("spec", "priority"), float("nan")),
        (("spec", "priority"), float("-inf")),
        (("spec", "priority"), 2**70),
        (("metadata", "labels", "app"), float("inf")),
        (("spec", "overhead", "cpu"), float("nan")),
    ],
)
def test_values_orjson_cannot_tell_apart_are_read_in_full(path: tuple[Any, ...], odd: Any) -> None:
    # orjson writes NaN and Infinity as null and refuses integers beyond 64 bits (the
    # API server sends neither): the digest must still tell such a version from the
    # same pod with null there (or be absent)
    with_null = changed((path, None))
    with_odd = changed((path, odd))
    assert_same_record(with_odd, pod_from_dict(copy.deepcopy(with_null)))
    assert_same_record(with_null, pod_from_dict(copy.deepcopy(with_odd)))


# ---- templates: replicas of one pod template are parsed once ----


def replica(name: str, *, volumes: list[Raw] | None = None) -> Raw:
    raw = stored_pod()
    raw["metadata"]["name"] = name
    raw["metadata"]["uid"] = f"uid-{name}"
    raw["metadata"]["labels"] = {**raw["metadata"]["labels"], "pod": name}
    if volumes is not None:
        raw["spec"]["volumes"] = volumes
    return raw


def test_replicas_of_one_template_share_its_parse_and_read_as_parsed_in_full() -> None:
    first = pod_from_dict(replica("web-a", volumes=[]))
    second = pod_from_dict(replica("web-b", volumes=[]))
    assert second.requests is first.requests
    assert second.required_anti_affinity is first.required_anti_affinity
    assert second == parsed_in_full(replica("web-b", volumes=[]))
    assert (second.name, second.uid, second.labels["pod"]) == ("web-b", "uid-web-b", "web-b")


def test_a_template_with_an_ephemeral_volume_is_parsed_per_pod() -> None:
    # the generic ephemeral volume's claim is named after the pod
    volumes = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    first = pod_from_dict(replica("web-a", volumes=volumes))
    second = pod_from_dict(replica("web-b", volumes=volumes))
    assert first.pvc_names == ("web-a-scratch",)
    assert second.pvc_names == ("web-b-scratch",)


def test_a_template_keeps_its_problems_for_every_replica() -> None:
    raw = replica("web-a")
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "x"
    pod_from_dict(raw)
    raw["metadata"]["name"] = "web-b"
    second = pod_from_dict(raw)
    assert second.problems == parsed_in_full(copy.deepcopy(raw)).problems
    assert "spec.containers[0].resources.requests.cpu" in second.refusal()


def test_templates_are_bounded() -> None:
    pod_module._templates.clear()
    for i in range(pod_module.TEMPLATES_KEPT + 10):
        raw = replica("web")
        raw["spec"]["priority"] = i
        pod_from_dict(raw)
    assert len(pod_module._templates) == pod_module.TEMPLATES_KEPT
