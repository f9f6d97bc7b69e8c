"""Upstream v1.37.2 rules for the FailedScheduling text and the per-node reasons:
framework/types.go FitError.Error, framework/runtime/framework.go RunPreFilterPlugins /
RunFilterPlugins / RunPostFilterPlugins, the plugins' reason strings and codes, and
framework/preemption + defaultpreemption for the "preemption: ..." suffix.

Every expected string here is upstream's (the same texts are checked against the real
kube-scheduler in tests/integration/test_fidelity_messages.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.algorithm import schedule_pod
from scheduler.cache import Nominator
from scheduler.config import names
from scheduler.framework import CycleState, FitError, Framework, PreFilterResult, build_profile
from scheduler.framework.diagnosis import fit_error_message, status_histogram
from scheduler.framework.interfaces import FilterPlugin, PostFilterPlugin, PreFilterPlugin
from scheduler.framework.status import Code, Status
from scheduler.plugins.registry import in_tree_registry
from tests.unit.helpers.builders import make_framework, make_node, make_pod, make_snapshot

PORTS = "node(s) didn't have free ports for the requested pod ports"
TAINTS = "node(s) had untolerated taint(s)"


def _fit_error(fw: Any, pod: Any, snap: Any) -> FitError:
    result = schedule_pod(fw, CycleState(), pod, snap, Nominator())
    assert isinstance(result, FitError), result
    return result


# ---------------------------------------------------------------- FitError.Error


@pytest.mark.parametrize(
    ("num", "hist", "pre", "post", "expected"),
    [
        (3, {"Insufficient cpu": 3}, "", "",
         "0/3 nodes are available: 3 Insufficient cpu."),
        # sorted as strings, so "10 ..." sorts before "2 ..."
        (12, {"Insufficient cpu": 2, TAINTS: 10}, "", "",
         f"0/12 nodes are available: 10 {TAINTS}, 2 Insufficient cpu."),
        # the PreFilter message replaces the histogram
        (2, {"ignored": 2}, "pod affinity terms conflict", "",
         "0/2 nodes are available: pod affinity terms conflict."),
        # the PostFilter message follows as is: no period of its own (no doubled one)
        (1, {"Insufficient cpu": 1}, "", "preemption: not eligible due to preemptionPolicy=Never.",
         "0/1 nodes are available: 1 Insufficient cpu. "
         "preemption: not eligible due to preemptionPolicy=Never."),
        (1, {}, "", "", "0/1 nodes are available:"),
    ],
)  # fmt: skip
def test_fit_error_message(
    num: int, hist: dict[str, int], pre: str, post: str, expected: str
) -> None:
    assert fit_error_message(num, hist, pre, post) == expected


def test_histogram_counts_absent_nodes_with_the_absent_status() -> None:
    explicit = {"a": Status.unresolvable("No preemption victims found for incoming pod")}
    hist = status_histogram(4, explicit, Status.unresolvable("Preemption is not helpful"))
    assert hist == {
        "No preemption victims found for incoming pod": 1,
        "Preemption is not helpful": 3,
    }


# ---------------------------------------------------------------- plugin reasons


def test_untolerated_taints_name_no_taint() -> None:
    fw = make_framework()
    snap = make_snapshot(
        [make_node("a").taint("k", "v"), make_node("b").taint("x", "", "NoExecute")]
    )
    err = _fit_error(fw, make_pod("p").obj(), snap)
    assert err.message() == f"0/2 nodes are available: 2 {TAINTS}."
    assert {st.code for st in err.diagnosis.node_to_status().values()} == {
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    }


def test_conflicting_match_fields_terms() -> None:
    fw = make_framework()
    term = {"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a"]},
        {"key": "metadata.name", "operator": "In", "values": ["b"]}]}  # fmt: skip
    pod = make_pod("p").raw()
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}  # fmt: skip
    from scheduler.model.pod import pod_from_dict

    err = _fit_error(fw, pod_from_dict(pod), make_snapshot([make_node("a"), make_node("b")]))
    assert err.message() == "0/2 nodes are available: pod affinity terms conflict."
    assert err.diagnosis.node_to_status()["a"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# ---------------------------------------------------------------- first failing plugin


def test_reason_is_the_first_failing_plugin_in_profile_order() -> None:
    """NodePorts (per-node) comes before NodeResourcesFit (batch) in the profile: a node
    failing both reports the ports, as upstream's RunFilterPlugins stops there."""
    fw = make_framework()
    nodes = [make_node("a").capacity(cpu="1"), make_node("b").capacity(cpu="1"),
             make_node("c").capacity(cpu="4").taint("k")]  # fmt: skip
    existing = [make_pod("busy").host_port(80).requests(cpu="500m").node("a"),
                make_pod("other").host_port(80).node("c")]  # fmt: skip
    pod = make_pod("p").host_port(80).requests(cpu="2").obj()
    err = _fit_error(fw, pod, make_snapshot(nodes, existing))
    statuses = err.diagnosis.node_to_status()
    assert statuses["a"].message() == PORTS and statuses["a"].plugin == names.NODE_PORTS
    assert statuses["a"].code == Code.UNSCHEDULABLE
    assert statuses["b"].message() == "Insufficient cpu"
    assert statuses["c"].message() == TAINTS  # TaintToleration comes before NodePorts
    assert err.message() == (f"0/3 nodes are available: 1 Insufficient cpu, 1 {PORTS}, 1 {TAINTS}.")
    assert err.diagnosis.unschedulable_plugins == {
        names.NODE_PORTS,
        names.NODE_RESOURCES_FIT,
        names.TAINT_TOLERATION,
    }


def test_profile_order_is_followed_when_configured_differently() -> None:
    """With NodeResourcesFit listed before NodePorts the resource reason wins."""
    fw = make_framework([names.NODE_RESOURCES_FIT, names.NODE_PORTS])
    nodes = [make_node("a").capacity(cpu="1")]
    existing = [make_pod("busy").host_port(80).node("a")]
    err = _fit_error(fw, make_pod("p").host_port(80).requests(cpu="2").obj(),
                     make_snapshot(nodes, existing))  # fmt: skip
    assert err.message() == "0/1 nodes are available: 1 Insufficient cpu."


# ---------------------------------------------------------------- PreFilter run


class _Narrow(PreFilterPlugin, FilterPlugin):
    """A PreFilter plugin narrowing the nodes to a fixed set, or rejecting."""

    def __init__(self, name: str, nodes: frozenset[str] | None, status: Status) -> None:
        self.name = name
        self._nodes = nodes
        self._status = status

    def pre_filter(self, state: Any, pod: Any, snapshot: Any) -> tuple[Any, Status]:
        res = PreFilterResult(self._nodes) if self._nodes is not None else None
        return res, self._status

    def filter(self, state: Any, pod: Any, view: Any) -> Status:
        return Status.success()


def _framework_with(*plugins: _Narrow, in_tree: list[str] | None = None) -> Framework:
    registry = in_tree_registry()
    for p in plugins:
        registry.register(p.name, type(p), lambda args, handle, p=p: p)
    refs = tuple(names.PluginRef(p.name) for p in plugins)
    refs += tuple(names.PluginRef(n) for n in in_tree or ())
    # the registry answers each plugin's points from its class (ours: PreFilter and Filter)
    return Framework(build_profile(refs, implements=registry.implements), registry)


@pytest.mark.parametrize(
    ("plugins", "code", "message"),
    [
        # one plugin narrowing to nothing: the singular form
        ([("A", frozenset(), Status.success())],
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't satisfy plugin A"),
        # disjoint sets: the plugins sorted, as Go's %v prints a []string
        ([("B", frozenset({"n1"}), Status.success()), ("A", frozenset({"n2"}), Status.success())],
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't satisfy plugin(s) [A B] simultaneously"),
        # Unschedulable does not stop the run: a later UnschedulableAndUnresolvable wins
        ([("A", None, Status.unschedulable("soft")), ("B", None, Status.unresolvable("hard"))],
         Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "hard"),
        # ... and the last Unschedulable is returned when nothing else rejects
        ([("A", None, Status.unschedulable("first")), ("B", None, Status.unschedulable("last"))],
         Code.UNSCHEDULABLE, "last"),
    ],
)  # fmt: skip
def test_run_pre_filter(
    plugins: list[tuple[str, frozenset[str] | None, Status]], code: Code, message: str
) -> None:
    fw = _framework_with(*(_Narrow(n, s, st) for n, s, st in plugins))
    snap = make_snapshot([make_node("n1"), make_node("n2")])
    _, st = fw.run_pre_filter(CycleState(), make_pod("p").obj(), snap)
    assert (st.code, st.message()) == (code, message)


def test_pre_filter_narrowing_to_nothing_is_the_pre_filter_message() -> None:
    fw = _framework_with(
        _Narrow("B", frozenset({"n1", "n2"}), Status.success()),
        _Narrow("A", frozenset({"n3"}), Status.success()),
    )
    snap = make_snapshot([make_node("n1"), make_node("n2"), make_node("n3")])
    err = schedule_pod(fw, CycleState(), make_pod("p").obj(), snap, Nominator())
    assert isinstance(err, FitError)
    assert err.message() == (
        "0/3 nodes are available: node(s) didn't satisfy plugin(s) [A B] simultaneously."
    )
    assert err.diagnosis.unschedulable_plugins == {"A", "B"}


def test_absent_nodes_status_names_the_narrowing_plugins_go_style() -> None:
    fw = _framework_with(
        _Narrow("B", frozenset({"n1"}), Status.success()),
        _Narrow("A", frozenset({"n1", "n2"}), Status.success()),
        in_tree=[names.TAINT_TOLERATION],
    )
    snap = make_snapshot([make_node("n1").taint("k"), make_node("n2"), make_node("n3")])
    err = schedule_pod(fw, CycleState(), make_pod("p").obj(), snap, Nominator())
    assert isinstance(err, FitError)
    assert err.message() == (
        f"0/3 nodes are available: 1 {TAINTS}, 2 node(s) didn't satisfy plugin(s) [A B]."
    )
    assert err.diagnosis.unschedulable_plugins == {"A", "B", names.TAINT_TOLERATION}


def test_a_pre_filter_rejection_ends_post_filter_with_upstreams_not_found() -> None:
    """kube-scheduler v1.37.2 (seen against the binary): DynamicResources' PostFilter
    runs before DefaultPreemption and fails with "not found" when an earlier PreFilter
    plugin ended the run, so there is no preemption and the message ends in it."""
    fw = _framework_with(_Narrow("A", None, Status.unresolvable("nope")))
    fw.post_filter_plugins = [_NeverCalled()]
    state = CycleState()
    snap = make_snapshot([make_node("n1")])
    err = schedule_pod(fw, state, make_pod("p").obj(), snap)
    assert isinstance(err, FitError)
    _, st = fw.run_post_filter(state, make_pod("p").obj(), snap, err.diagnosis)
    assert (st.code, st.message(), st.plugin) == (Code.ERROR, "not found", "DynamicResources")
    err.diagnosis.post_filter_msg = st.message()
    assert err.message() == "0/1 nodes are available: nope. not found"


def test_an_unschedulable_pre_filter_status_still_reaches_post_filter() -> None:
    fw = _framework_with(_Narrow("A", None, Status.unschedulable("soft")))
    called: list[str] = []
    fw.post_filter_plugins = [_Recording(called)]
    state = CycleState()
    snap = make_snapshot([make_node("n1")])
    err = schedule_pod(fw, state, make_pod("p").obj(), snap)
    assert isinstance(err, FitError)
    fw.run_post_filter(state, make_pod("p").obj(), snap, err.diagnosis)
    assert called == ["post_filter"]


class _NeverCalled(PostFilterPlugin):
    name = "Never"

    def post_filter(
        self, state: Any, pod: Any, snapshot: Any, diagnosis: Any
    ) -> tuple[Any, Status]:
        raise AssertionError("PostFilter must not run")


class _Recording(PostFilterPlugin):
    name = "Recording"

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def post_filter(
        self, state: Any, pod: Any, snapshot: Any, diagnosis: Any
    ) -> tuple[Any, Status]:
        self.calls.append("post_filter")
        return None, Status.unschedulable()


def test_a_failed_nominated_node_joins_the_absent_nodes_plugin_list() -> None:
    """upstream findNodesThatFitPod: evaluateNominatedNode adds the plugin that rejected
    the nominated node to the set the "didn't satisfy plugin(s)" status then lists (seen
    from kube-scheduler v1.37.2 by the differential oracle)."""
    fw = make_framework()
    pod_raw = make_pod("p").requests(cpu="2").raw()
    pod_raw["status"]["nominatedNodeName"] = "n1"
    pod_raw["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}  # fmt: skip
    from scheduler.model.pod import pod_from_dict

    snap = make_snapshot([make_node("n1").capacity(cpu="1"), make_node("n2"), make_node("n3")])
    err = _fit_error(fw, pod_from_dict(pod_raw), snap)
    assert err.message() == (
        "0/3 nodes are available: 1 Insufficient cpu,"
        " 2 node(s) didn't satisfy plugin(s) [NodeAffinity NodeResourcesFit]."
    )


async def test_a_failed_bind_says_upstreams_running_bind_plugin_with_the_api_message() -> None:
    """upstream RunBindPlugins: `running Bind plugin "DefaultBinder": <err>`, where err is
    client-go's StatusError, which reads as the API server's message."""
    from scheduler.client.errors import ApiError
    from scheduler.framework import Handle

    async def refuse(pod: Any, node: str) -> None:
        raise ApiError(500, "InternalError", "Internal error occurred: etcd down")

    fw = make_framework(handle=Handle(binder=refuse))
    st = await fw.run_bind(CycleState(), make_pod("p").obj(), "n1")
    assert st.code == Code.ERROR and st.plugin == "DefaultBinder"
    assert st.message() == 'running Bind plugin "DefaultBinder": Internal error occurred: etcd down'
    assert isinstance(st.error, ApiError)  # kept: the binding cycle tells a 409 by it
