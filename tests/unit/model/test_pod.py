from typing import Any

import pytest

from scheduler.model.errors import InvalidObject
from scheduler.model.pod import pod_from_dict
from tests.unit.helpers.builders import make_pod

GI = 2**30
MI = 2**20


def test_basic_fields_are_parsed() -> None:
    p = (
        make_pod("web", "prod")
        .priority(100)
        .labels(app="web")
        .scheduler("async")
        .nominated("n1")
        .gate("g1")
        .obj()
    )
    assert p.key == "prod/web"
    assert p.priority == 100
    assert p.scheduler_name == "async"
    assert p.nominated_node_name == "n1"
    assert p.scheduling_gates == ("g1",)
    assert p.labels == {"app": "web"}
    assert p.deletion_timestamp is None
    assert p.preemption_policy == "PreemptLowerPriority"


def test_defaults_for_a_minimal_pod() -> None:
    p = pod_from_dict({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}})
    assert p.namespace == "default"
    assert p.priority == 0
    assert p.scheduler_name == "default-scheduler"
    assert p.requests == {}
    assert (p.non_zero_cpu, p.non_zero_memory) == (100, 200 * MI)


@pytest.mark.parametrize(
    ("build", "requests", "non_zero"),
    [
        # sum of app containers
        (
            lambda: make_pod("p").requests(cpu="1", memory="1Gi").container(cpu="500m"),
            {"cpu": 1500, "memory": GI},
            (1500, GI + 200 * MI),
        ),
        # an init container larger than the app containers wins
        (
            lambda: make_pod("p").requests(cpu="1").init_container(cpu="3"),
            {"cpu": 3000},
            (3000, 200 * MI),
        ),
        # a sidecar adds to the app containers and to later init containers
        (
            lambda: (
                make_pod("p")
                .requests(cpu="1")
                .init_container(sidecar=True, cpu="1")
                .init_container(cpu="2500m")
            ),
            {"cpu": 3500},
            (3500, 400 * MI),
        ),
        # a sidecar started after an init container does not add to it
        (
            lambda: (
                make_pod("p")
                .requests(cpu="1")
                .init_container(cpu="2500m")
                .init_container(sidecar=True, cpu="1")
            ),
            {"cpu": 2500},
            (2500, 400 * MI),
        ),
        # overhead is added at the end, extended resources included
        (
            lambda: (
                make_pod("p").requests(cpu="1", **{"example.com/gpu": "2"}).overhead(cpu="250m")
            ),
            {"cpu": 1250, "example.com/gpu": 2},
            (1250, 200 * MI),
        ),
        # an explicit zero request is kept at zero for scoring
        (lambda: make_pod("p").requests(cpu="0", memory="0"), {"cpu": 0, "memory": 0}, (0, 0)),
    ],
)
def test_effective_requests(
    build: Any, requests: dict[str, int], non_zero: tuple[int, int]
) -> None:
    p = build().obj()
    assert {k: v for k, v in p.requests.items() if v} == {k: v for k, v in requests.items() if v}
    assert (p.non_zero_cpu, p.non_zero_memory) == non_zero


def test_host_ports_and_tolerations() -> None:
    p = (
        make_pod("p")
        .host_port(80)
        .host_port(53, "UDP", "10.0.0.1")
        .toleration("k", "v", "NoSchedule")
        .toleration(operator="Exists")
        .obj()
    )
    assert [(h.protocol, h.host_ip, h.port) for h in p.host_ports] == [
        ("TCP", "0.0.0.0", 80),
        ("UDP", "10.0.0.1", 53),
    ]
    assert len(p.tolerations) == 2
    assert p.tolerations[1].operator == "Exists"


def test_affinity_terms_resolve_namespaces() -> None:
    p = (
        make_pod("p", "ns1")
        .labels(app="a", tier="x")
        .pod_affinity("zone", {"app": "a"})
        .pod_affinity("host", {"app": "b"}, anti=True, namespaces=["ns2"])
        .pod_affinity("zone", {"app": "c"}, weight=10, namespace_selector={})
        .obj()
    )
    (aff,) = p.required_affinity
    assert aff.namespaces == {"ns1"}
    assert aff.namespace_selector.match_nothing
    (anti,) = p.required_anti_affinity
    assert anti.namespaces == {"ns2"}
    (pref,) = p.preferred_affinity
    assert pref.weight == 10
    assert pref.term.namespaces == frozenset()
    assert pref.term.namespace_selector.is_everything
    assert p.has_pod_affinity


def test_spread_constraint_merges_match_label_keys() -> None:
    p = (
        make_pod("p")
        .labels(app="a", rev="7")
        .spread(1, "zone", {"app": "a"}, match_label_keys=["rev", "missing"])
        .obj()
    )
    (c,) = p.spread_constraints
    assert c.selector.matches({"app": "a", "rev": "7"})
    assert not c.selector.matches({"app": "a", "rev": "6"})
    assert c.min_domains == 1
    assert (c.node_affinity_policy, c.node_taints_policy) == ("Honor", "Ignore")


def test_node_affinity_and_pvcs_and_conditions() -> None:
    p = (
        make_pod("p")
        .node_affinity_in("zone", "a", "b")
        .preferred_node_affinity(5, "disk", "ssd")
        .pvc("data")
        .owner("ReplicaSet", "rs1")
        .condition("DisruptionTarget", "True", "PreemptionByScheduler")
        .terminating()
        .obj()
    )
    assert p.required_node_affinity is not None
    assert p.required_node_affinity.matches({"zone": "a"}, "n")
    assert not p.required_node_affinity.matches({"zone": "c"}, "n")
    assert p.preferred_node_affinity[0].weight == 5
    assert p.pvc_names == ("data",)
    assert p.owner_refs[0].kind == "ReplicaSet"
    assert p.preempted_by_scheduler
    assert p.is_terminating


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (
            lambda r: r["spec"]["containers"][0]["resources"].update(requests={"cpu": "lots"}),
            "spec.containers[0].resources.requests.cpu",
        ),
        (lambda r: r["spec"].update(priority="high"), "spec.priority"),
        (lambda r: r["metadata"].update(labels=["x"]), "metadata.labels"),
        (
            lambda r: r["spec"].update(
                affinity={
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]
                    }
                }
            ),
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        ),
        (
            lambda r: r["spec"].update(
                topologySpreadConstraints=[{"maxSkew": 0, "topologyKey": "z"}]
            ),
            "spec.topologySpreadConstraints[0].maxSkew",
        ),
        (
            lambda r: r["spec"].update(tolerations=[{"operator": "Maybe"}]),
            "spec.tolerations[0].operator",
        ),
        # once TypeError at selectors.py:154 (an operator that is a list)
        (
            lambda r: r["spec"].update(
                topologySpreadConstraints=[
                    {
                        "maxSkew": 1,
                        "topologyKey": "z",
                        "labelSelector": {
                            "matchExpressions": [{"key": "a", "operator": ["In"], "values": ["x"]}]
                        },
                    }
                ]
            ),
            "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator",
        ),
        # once TypeError at pod.py:412 (a matchLabelKeys entry that is a list)
        (
            lambda r: r["spec"].update(
                topologySpreadConstraints=[
                    {"maxSkew": 1, "topologyKey": "z", "matchLabelKeys": [["app"]]}
                ]
            ),
            "spec.topologySpreadConstraints[0].matchLabelKeys",
        ),
        (
            lambda r: r["metadata"].update(deletionTimestamp="yesterday"),
            "metadata.deletionTimestamp",
        ),
        (lambda r: r["spec"].update(schedulingGroup="trainers"), "spec.schedulingGroup"),
        (
            lambda r: r["spec"].update(schedulingGroup={"podGroupName": 3}),
            "spec.schedulingGroup.podGroupName",
        ),
    ],
)
def test_unreadable_field_is_a_problem_and_the_rest_still_counts(mutate: Any, path: str) -> None:
    # JSON the API server never stores: the pod is still read (its requests and ports
    # keep counting on its node), and refused for placement with the field named
    builder = make_pod("bad", "ns").container(memory="1Gi").host_port(8080)
    raw = builder.raw()
    mutate(raw)
    p = pod_from_dict(raw)
    assert any(problem.startswith(path + ":") for problem in p.problems), p.problems
    assert p.refusal().startswith("the scheduler cannot read this pod: ")
    assert path in p.refusal()
    assert p.requests["memory"] == GI
    assert [hp.port for hp in p.host_ports] == [8080]


def test_pod_without_name_is_invalid() -> None:
    with pytest.raises(InvalidObject, match=r"metadata\.name"):
        pod_from_dict({"metadata": {}, "spec": {}})


def test_a_pod_group_member_is_refused_unless_the_gang_cycle_is_on() -> None:
    # spec.schedulingGroup.podGroupName (core/v1 PodSchedulingGroup): placing members one
    # by one could bind part of a gang, so without GenericWorkload the pod is refused, and
    # still counts on its node; with it, the pod-group cycle takes it
    raw = make_pod("trainer-0", "ns").container(cpu="1").raw()
    raw["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}
    p = pod_from_dict(raw)
    assert p.pod_group == "trainers"
    assert p.problems == ()
    assert p.refusal() == (
        'pod belongs to pod group "trainers" (spec.schedulingGroup); workload-aware (gang) '
        "scheduling is off in this scheduler (--feature-gates=GenericWorkload=true turns it on)"
    )
    assert p.refusal(gangs=True) == ""
    assert p.requests["cpu"] == 1000
    solo = make_pod("solo", "ns").obj()
    assert (solo.pod_group, solo.refusal()) == ("", "")


def test_the_pod_group_is_read_again_when_only_it_changes() -> None:
    # the field is part of the scheduling inputs' digest (all of spec): an update that
    # changes it is parsed again, not reused from the previous record
    from scheduler.model.pod import pod_update_from_dict

    raw = make_pod("trainer-0", "ns").raw()
    first = pod_from_dict(raw)
    raw["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}
    assert pod_update_from_dict(raw, first).pod_group == "trainers"
