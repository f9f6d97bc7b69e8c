"""The model reads pods as upstream kube-scheduler v1.37.2 does (issue 9, items 1-3 and 7):
lazy node-affinity parse errors, Gt/Lt as strconv.ParseInt, pod-level resources, pods
being resized in place, and pods with resource claims."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.framework.status import Code
from scheduler.model.pod import pod_from_dict
from scheduler.model.selectors import aggregate_message, parse_go_int64, parse_node_selector
from tests.unit.helpers.builders import make_node, make_pod, make_snapshot

GI = 2**30
MI = 2**20


def gt(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "Gt", "values": [value]}


def lt(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "Lt", "values": [value]}


def zone_in(*zones: str) -> dict[str, Any]:
    return {"key": "zone", "operator": "In", "values": list(zones)}


# ------------------------------------------------------------------ item 2: ParseInt


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0), ("42", 42), ("+42", 42), ("-42", -42), ("007", 7),
        ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -(2**63)),
        # strconv.ParseInt(s, 10, 64) refuses all of these
        ("9223372036854775808", None), ("-9223372036854775809", None),
        ("1_000", None), (" 1", None), ("1 ", None), ("", None), ("+", None), ("1.0", None),
        ("1e3", None), ("0x10", None), ("high", None), ("\u0661", None),  # Arabic-Indic one
    ],
)  # fmt: skip
def test_parse_go_int64_is_strconv_parseint(text: str, value: int | None) -> None:
    assert parse_go_int64(text) == value


@pytest.mark.parametrize(
    ("label", "matches"),
    [("5", True), ("+5", True), ("005", True), ("1_000", False), ("99999999999999999999", False),
     ("4", False), ("x", False)],
)  # fmt: skip
def test_gt_reads_node_labels_as_parseint_in_both_match_paths(label: str, matches: bool) -> None:
    pod = make_pod("p").node_affinity_term([gt("cores", "4")]).obj()
    sel = pod.required_node_affinity
    assert sel is not None
    assert sel.matches({"cores": label}, "n") is matches
    snap = make_snapshot([make_node("n").label("cores", label)])
    slots = np.array([snap.table.index["n"]], dtype=np.int64)
    assert bool(snap.table.match_node_selector(sel, slots)[0]) is matches


def test_gt_is_exact_across_the_int64_range() -> None:
    # float64 would call these equal; upstream compares int64
    big = str(2**62 + 1)
    pod = make_pod("p").node_affinity_term([gt("v", str(2**62))]).obj()
    sel = pod.required_node_affinity
    assert sel is not None
    snap = make_snapshot([make_node("n").label("v", big)])
    slots = np.array([snap.table.index["n"]], dtype=np.int64)
    assert sel.matches({"v": big}, "n")
    assert bool(snap.table.match_node_selector(sel, slots)[0])


# ------------------------------------------------------------------ item 1: lazy parse errors


def test_required_term_that_does_not_parse_fails_alone() -> None:
    # term 0 (Gt "high") cannot match anything; term 1 still places the pod in zone a
    pod = make_pod("p").node_affinity_term([gt("cores", "high")])
    pod = pod.node_affinity_term([zone_in("a")])
    info = pod.obj()
    assert info.problems == ()
    assert info.refusal() == ""
    sel = info.required_node_affinity
    assert sel is not None
    assert sel.terms[0].errors == (
        'nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "high": '
        "for 'Gt', 'Lt' operators, the value must be an integer",
    )
    assert sel.matches({"zone": "a", "cores": "8"}, "n")
    assert not sel.matches({"zone": "b", "cores": "8"}, "n")
    snap = make_snapshot(
        [make_node("a").labels(zone="a", cores="8"), make_node("b").labels(zone="b", cores="8")]
    )
    slots = np.array([snap.table.index["a"], snap.table.index["b"]], dtype=np.int64)
    assert snap.table.match_node_selector(sel, slots).tolist() == [True, False]


def test_strict_node_selector_still_raises() -> None:
    from scheduler.model.errors import InvalidObject

    with pytest.raises(InvalidObject) as err:
        parse_node_selector({"nodeSelectorTerms": [{"matchExpressions": [lt("k", "1_0")]}]}, "x")
    assert err.value.path == "x.nodeSelectorTerms[0].matchExpressions[0].values"
    assert err.value.detail == "must be one integer for operator Lt"


def test_preferred_term_that_does_not_parse_drops_all_preferred_terms() -> None:
    info = (
        make_pod("p")
        .preferred_node_affinity(10, "zone", "a")
        .preferred_node_affinity_term(5, [gt("cores", "high")])
        .obj()
    )
    assert info.problems == ()  # the pod is read and counted; only scoring fails
    assert info.preferred_node_affinity == ()
    assert info.preferred_node_affinity_error == (
        '[1].matchExpressions[0].values[0]: Invalid value: "high": '
        "for 'Gt', 'Lt' operators, the value must be an integer"
    )


def test_preferred_terms_with_weight_zero_are_not_parsed() -> None:
    raw = make_pod("p").preferred_node_affinity_term(5, [gt("cores", "high")]).raw()
    raw["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "weight"
    ] = 0
    info = pod_from_dict(raw)
    assert info.preferred_node_affinity_error == ""


def test_several_parse_errors_aggregate_as_upstream() -> None:
    info = make_pod("p").preferred_node_affinity_term(5, [gt("a", "x"), lt("b", "1_0")]).obj()
    assert info.preferred_node_affinity_error == (
        "[[0].matchExpressions[0].values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, "
        'the value must be an integer, [0].matchExpressions[1].values[0]: Invalid value: "1_0": '
        "for 'Gt', 'Lt' operators, the value must be an integer]"
    )
    assert aggregate_message(["a", "a"]) == "a"


def test_node_affinity_prescore_fails_with_upstreams_error() -> None:
    from scheduler.algorithm import SchedulingError, schedule_pod
    from scheduler.framework.cycle_state import CycleState
    from tests.unit.helpers.builders import make_framework

    fw = make_framework()
    snap = make_snapshot([make_node("a").zone("a"), make_node("b").zone("b")])
    info = make_pod("p").preferred_node_affinity_term(5, [gt("cores", "high")]).obj()
    from scheduler.cache import Nominator

    with pytest.raises(SchedulingError) as err:
        schedule_pod(fw, CycleState(), info, snap, Nominator())
    assert err.value.status.code == Code.ERROR
    assert str(err.value) == (
        'running PreScore plugin "NodeAffinity": [0].matchExpressions[0].values[0]: '
        "Invalid value: \"high\": for 'Gt', 'Lt' operators, the value must be an integer"
    )
    # a single feasible node is taken without scoring, as upstream does
    one = make_snapshot([make_node("a").zone("a")])
    result = schedule_pod(fw, CycleState(), info, one, Nominator())
    assert getattr(result, "node", None) == "a"


def test_pod_affinity_group_that_does_not_parse_is_empty_and_recorded() -> None:
    raw = make_pod("p").raw()
    raw["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "zone",
                    "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]},
                }
            ]
        },
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        },
    }
    info = pod_from_dict(raw)
    # upstream GetAffinityTerms: the failing group has no terms, the other keeps its own
    assert info.required_anti_affinity == ()
    assert len(info.required_affinity) == 1
    assert info.problems and "podAntiAffinity" in info.problems[0]


def test_unreadable_pod_still_counts_its_requests_and_ports() -> None:
    raw = make_pod("p").node("n").requests(cpu="2").host_port(80).raw()
    raw["spec"]["tolerations"] = "everything"
    info = pod_from_dict(raw)
    assert info.problems
    assert info.requests["cpu"] == 2000
    assert [hp.port for hp in info.host_ports] == [80]


# ------------------------------------------------------------------ item 3: pod-level resources


def test_pod_level_requests_replace_the_container_aggregate() -> None:
    info = (
        make_pod("p")
        .requests(cpu="1", memory="1Gi")
        .container(cpu="1", memory="1Gi", **{"example.com/gpu": "1"})
        .pod_resources(cpu="3")
        .overhead(cpu="250m", memory="10Mi")
        .obj()
    )
    # cpu from spec.resources (+ overhead); memory and the gpu from the containers
    assert info.requests == {"cpu": 3250, "memory": 2 * GI + 10 * MI, "example.com/gpu": 1}
    assert info.non_zero_cpu == 3250
    assert info.non_zero_memory == 2 * GI + 10 * MI


def test_pod_level_requests_and_non_zero_defaults() -> None:
    # pod-level cpu, no memory anywhere: scoring counts the 200Mi default (per container)
    info = make_pod("p").container().pod_resources(cpu="500m").obj()
    assert info.requests == {"cpu": 500}
    assert info.non_zero_cpu == 500
    assert info.non_zero_memory == 2 * 200 * MI
    # an unsupported pod-level resource does not switch pod-level requests on
    other = make_pod("q").requests(cpu="1").pod_resources(ephemeral_storage="1Gi").obj()
    assert other.requests == {"cpu": 1000}


def test_pod_level_hugepages_are_pod_level() -> None:
    huge = {"hugepages-2Mi": "2Mi"}
    info = make_pod("p").requests(**huge).pod_resources(**{"hugepages-2Mi": "8Mi"}).obj()
    assert info.requests["hugepages-2Mi"] == 8 * MI


def test_pod_level_requests_are_summed_exactly_then_rounded() -> None:
    # three 1.5m containers: upstream sums the quantities (4.5m) and rounds once (5m)
    info = make_pod("p").requests(cpu="1500u").container(cpu="1500u").container(cpu="1500u")
    assert info.obj().requests["cpu"] == 5


# ------------------------------------------------------------------ item 7: in-place resize


def test_resizing_pod_counts_the_max_of_spec_allocated_and_actuated() -> None:
    base = make_pod("p").node("n").requests(cpu="1", memory="1Gi")
    # scale up requested, not yet allocated: the spec (2) counts
    up = base.raw()
    up["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    up["status"]["containerStatuses"] = [
        {"name": "c0", "allocatedResources": {"cpu": "1", "memory": "1Gi"},
         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    ]  # fmt: skip
    assert pod_from_dict(up).requests["cpu"] == 2000
    # scale down requested, still actuated at the old size: the actuated (1) counts
    down = make_pod("p").node("n").requests(cpu="500m", memory="1Gi")
    down = down.container_status("c0", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1"})
    assert down.obj().requests["cpu"] == 1000
    assert down.obj().requests["memory"] == GI


def test_infeasible_resize_drops_the_spec() -> None:
    pod = (
        make_pod("p")
        .node("n")
        .requests(cpu="64")
        .container_status("c0", {"cpu": "1"}, {"cpu": "1"})
        .condition("PodResizePending", "True", "Infeasible")
    )
    assert pod.obj().requests["cpu"] == 1000
    deferred = (
        make_pod("p")
        .node("n")
        .requests(cpu="4")
        .container_status("c0", {"cpu": "1"}, {"cpu": "1"})
        .condition("PodResizePending", "True", "Deferred")
    )
    assert deferred.obj().requests["cpu"] == 4000


def test_pod_level_resize_status_is_used_whole() -> None:
    pod = (
        make_pod("p")
        .node("n")
        .requests(cpu="1")
        .pod_resources(cpu="2")
        .pod_status_resources(allocated={"cpu": "3"}, actuated={"cpu": "3"})
    )
    assert pod.obj().requests["cpu"] == 3000


# ------------------------------------------------------------------ item 7: resource claims


def test_resource_claims_are_read_and_refused() -> None:
    info = make_pod("p").resource_claim("gpu").resource_claim("nic").requests(cpu="1").obj()
    assert [c.name for c in info.resource_claims] == ["gpu", "nic"]
    assert info.resource_claims[0].template_name == "tmpl"
    assert info.refusal() == (
        "pod has resource claims (spec.resourceClaims: gpu, nic); dynamic resource allocation "
        "is off in this scheduler (--feature-gates=DynamicResourceAllocation=true turns it on)"
    )
    assert info.requests["cpu"] == 1000


def test_required_terms_pinning_disjoint_node_names_conflict() -> None:
    from scheduler.framework.cycle_state import CycleState
    from tests.unit.helpers.builders import make_framework

    def pin(*names: str) -> dict[str, Any]:
        return {"key": "metadata.name", "operator": "In", "values": list(names)}

    fw = make_framework()
    snap = make_snapshot([make_node("a"), make_node("b")])
    # one term pins a AND b (no node is both): upstream's NodeAffinity PreFilter
    conflict = make_pod("p").node_affinity_term([], [pin("a"), pin("b")]).obj()
    result, st = fw.run_pre_filter(CycleState(), conflict, snap)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ("pod affinity terms conflict",)
    assert st.plugin == "NodeAffinity"
    ok = make_pod("q").node_affinity_term([], [pin("a")]).node_affinity_term([], [pin("b")]).obj()
    result, st = fw.run_pre_filter(CycleState(), ok, snap)
    assert st.ok and result is not None and set(result.node_names) == {"a", "b"}


def test_pod_affinity_match_label_keys_are_left_to_the_api_server() -> None:
    # the API server merged app=a into the selector when the pod was created; the pod
    # was relabelled app=b since. Upstream reads the stored selector only.
    raw = make_pod("p").labels(app="b").raw()
    raw["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "zone",
                    "matchLabelKeys": ["app"],
                    "labelSelector": {
                        "matchLabels": {"tier": "web"},
                        "matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}],
                    },
                }
            ]
        }
    }
    term = pod_from_dict(raw).required_affinity[0]
    assert term.selector.matches({"tier": "web", "app": "a"})
    assert not term.selector.matches({"tier": "web", "app": "b"})


def test_node_resources_fit_scores_an_incoming_pod_without_its_pod_level_resources() -> None:
    # oracle seed 7 scenario 6: upstream's NodeResourcesFit scorer is built without the
    # PodLevelResources flag; BalancedAllocation and the Filter do apply it
    from scheduler.framework import CycleState
    from tests.unit.helpers.builders import make_framework

    pod = make_pod("p").pod_resources(cpu="700m", memory="256Mi").obj()
    assert (pod.requests["cpu"], pod.non_zero_cpu, pod.fit_score_cpu) == (700, 700, 100)
    assert (pod.non_zero_memory, pod.fit_score_memory) == (256 * MI, 200 * MI)
    fw = make_framework(["NodeResourcesFit"])
    snap = make_snapshot(
        [make_node("n0").capacity(cpu="1", memory="2Gi")],
        [make_pod("e").node("n0").requests(cpu="250m")],
    )
    state = CycleState()
    fw.run_pre_filter(state, pod, snap)
    slots = snap.live_slots()
    (plugin,) = fw.score_plugins
    # cpu (1000-350)*100/1000 = 65, memory (2048-400)*100/2048 = 80 -> 72 (upstream's
    # score for that node; with pod-level requests it would be 41)
    assert plugin.score_batch(state, pod, snap, slots).tolist() == [72]
    assert plugin.score(state, pod, snap.view(int(slots[0])))[0] == 72


def test_pv_node_affinity_is_lazy_too() -> None:
    from scheduler.model.volume import pv_from_dict

    pv = pv_from_dict(
        {
            "metadata": {"name": "pv1"},
            "spec": {
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [gt("cores", "high")]},
                            {"matchExpressions": [zone_in("a")]},
                        ]
                    }
                }
            },
        }
    )
    assert pv.node_affinity is not None
    assert pv.node_affinity.matches({"zone": "a"}, "n")
    assert not pv.node_affinity.matches({"zone": "b", "cores": "9"}, "n")
