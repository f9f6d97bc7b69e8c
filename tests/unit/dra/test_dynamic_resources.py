"""DynamicResources' decisions on objects built in memory: upstream's messages for each
reason a pod's claims cannot be used yet, the node selector of an allocated claim, the
pending allocation between Reserve and Unreserve, Score's preference for earlier
alternatives, and the queueing hints. (PreBind's writes and the whole cycle run against
the real API server in tests/integration/test_dynamic_resources_plugin.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cache.node_view import NodeView
from scheduler.dra.allocator import AllocationTimedOut
from scheduler.dra.device_state import DeviceState
from scheduler.dra.pools import Node
from scheduler.dra.resources import claim_from_dict, device_class_from_dict, slice_from_dict
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code, Status
from scheduler.model.node import node_from_dict
from scheduler.model.pod import PodInfo, pod_from_dict
from scheduler.plugins.dynamic_resources import DynamicResources
from scheduler.plugins.helpers import QUEUE, SKIP

DRIVER = "gpu.example.com"


def _pod(claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None) -> PodInfo:
    return pod_from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"containers": [{"name": "c"}], "resourceClaims": claims},
            "status": {"resourceClaimStatuses": statuses or []},
        }
    )


def _claim(name: str, requests: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", **extra},
        "spec": {"devices": {"requests": requests}},
    }
    return raw


def _exactly(klass: str = "gpu") -> dict[str, Any]:
    return {"name": "r", "exactly": {"deviceClassName": klass}}


def _alternatives(*classes: str) -> dict[str, Any]:
    return {
        "name": "r",
        "firstAvailable": [{"name": f"a{i}", "deviceClassName": c} for i, c in enumerate(classes)],
    }


def _state(*claims: dict[str, Any], devices: int = 1) -> DeviceState:
    state = DeviceState()
    state.set_class(
        device_class_from_dict(
            {
                "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
        )
    )
    state.set_class(device_class_from_dict({"metadata": {"name": "none"}, "spec": {
        "selectors": [{"cel": {"expression": "false"}}]}}))  # fmt: skip
    state.set_slice(
        slice_from_dict(
            {
                "metadata": {"name": "s"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": "n1",
                    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"d{i}"} for i in range(devices)],
                },
            }
        )
    )
    for c in claims:
        state.set_claim(claim_from_dict(c))
    return state


def _view(name: str) -> NodeView:
    return NodeView(node_from_dict({"metadata": {"name": name, "labels": {}}}))


def _plugin(state: DeviceState) -> DynamicResources:
    return DynamicResources(Handle(device_state=state))


def _pre_filter(plugin: DynamicResources, pod: PodInfo) -> tuple[CycleState, Status]:
    cycle = CycleState()
    _, status = plugin.pre_filter(cycle, pod, None)  # type: ignore[arg-type]
    return cycle, status


def test_a_pod_without_claims_is_skipped() -> None:
    plugin = _plugin(_state())
    pod = _pod([])
    assert plugin.pre_enqueue(pod).ok
    assert _pre_filter(plugin, pod)[1].code == Code.SKIP
    assert plugin.sign_pod(pod)[1].ok


def test_claims_that_cannot_be_used_yet_say_why_in_upstreams_words() -> None:
    state = _state(
        _claim("going", [_exactly()], deletionTimestamp="2026-01-01T00:00:00Z"),
        _claim("foreign", [_exactly()], ownerReferences=[
            {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "other-uid",
             "controller": True}]),
    )  # fmt: skip
    plugin = _plugin(state)
    cases = {
        'could not find ResourceClaim "ns/absent"': _pod(
            [{"name": "x", "resourceClaimName": "absent"}]
        ),
        'resourceclaim "going" is being deleted': _pod(
            [{"name": "x", "resourceClaimName": "going"}]
        ),
        'pod "ns/p": ResourceClaim not created yet': _pod(
            [{"name": "x", "resourceClaimTemplateName": "t"}]
        ),
        "ResourceClaim ns/foreign was not created for Pod ns/p (Pod is not owner)": _pod(
            [{"name": "x", "resourceClaimTemplateName": "t"}],
            [{"name": "x", "resourceClaimName": "foreign"}],
        ),
        'pod "ns/p", spec.resourceClaim "x": none of the supported fields are set': _pod(
            [{"name": "x"}]
        ),
    }
    for message, pod in cases.items():
        status = plugin.pre_enqueue(pod)
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (message,)
        assert _pre_filter(plugin, pod)[1].reasons == (message,)
        assert not plugin.sign_pod(pod)[1].ok


def test_a_template_the_controller_decided_not_to_need_is_passed_over() -> None:
    plugin = _plugin(_state())
    pod = _pod([{"name": "x", "resourceClaimTemplateName": "t"}], [{"name": "x"}])
    assert plugin.pre_enqueue(pod).ok
    assert _pre_filter(plugin, pod)[1].code == Code.SKIP


def test_missing_device_classes_are_named_with_their_request() -> None:
    state = _state(
        _claim("a", [_exactly("absent")]),
        _claim("b", [_alternatives("gpu", "absent")]),
    )
    plugin = _plugin(state)
    _, status = _pre_filter(plugin, _pod([{"name": "x", "resourceClaimName": "a"}]))
    assert status.reasons == ("request r: device class absent does not exist",)
    _, status = _pre_filter(plugin, _pod([{"name": "x", "resourceClaimName": "b"}]))
    assert status.reasons == ("request r/a1: device class absent does not exist",)


def test_filter_allocates_per_node_and_reserve_holds_the_device_until_unreserve() -> None:
    state = _state(_claim("a", [_exactly()]), _claim("b", [_exactly()]))
    plugin = _plugin(state)
    pod_a = _pod([{"name": "x", "resourceClaimName": "a"}])
    cycle, status = _pre_filter(plugin, pod_a)
    assert status.ok
    assert plugin.filter(cycle, pod_a, _view("n2")).reasons == ("cannot allocate all claims",)
    assert plugin.filter(cycle, pod_a, _view("n1")).ok
    assert plugin.reserve(cycle, pod_a, "n1").ok
    assert state.pending_allocation("uid-a") is not None

    # the only device is promised: another pod's claim finds none, and a second pod
    # using claim a waits for the allocation in flight
    pod_b = _pod([{"name": "x", "resourceClaimName": "b"}])
    cycle_b, status = _pre_filter(plugin, pod_b)
    assert status.ok
    assert plugin.filter(cycle_b, pod_b, _view("n1")).reasons == ("cannot allocate all claims",)
    _, status = _pre_filter(plugin, _pod([{"name": "y", "resourceClaimName": "a"}]))
    assert status.reasons == ("resource claim ns/a is in the process of being allocated",)

    plugin.unreserve(cycle, pod_a, "n1")
    assert state.pending_allocation("uid-a") is None
    cycle_b, _ = _pre_filter(plugin, pod_b)
    assert plugin.filter(cycle_b, pod_b, _view("n1")).ok


def test_an_allocated_claim_is_available_only_where_its_selector_matches() -> None:
    allocated = _claim("a", [_exactly()])
    allocated["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "r", "driver": DRIVER, "pool": "p", "device": "d0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
        }
    }  # fmt: skip
    plugin = _plugin(_state(allocated))
    pod = _pod([{"name": "x", "resourceClaimName": "a"}])
    cycle, status = _pre_filter(plugin, pod)
    assert status.ok
    assert plugin.filter(cycle, pod, _view("n1")).ok
    assert plugin.filter(cycle, pod, _view("n2")).reasons == (
        "resourceclaim not available on the node",
    )


def test_score_prefers_the_earlier_alternative() -> None:
    # alternative a0 asks for a class no device matches, so a1 is chosen: 8 - 1 = 7
    state = _state(_claim("a", [_alternatives("none", "gpu")]))
    plugin = _plugin(state)
    pod = _pod([{"name": "x", "resourceClaimName": "a"}])
    cycle, _ = _pre_filter(plugin, pod)
    assert plugin.filter(cycle, pod, _view("n1")).ok
    assert plugin.score(cycle, pod, _view("n1")) == (7, Status.success())
    assert plugin.score(cycle, pod, _view("n2"))[0] == 0


def test_claim_events_queue_only_the_pods_they_can_help() -> None:
    state = _state(_claim("a", [_exactly()]), _claim("other", [_exactly()]))
    plugin = _plugin(state)
    pod = _pod([{"name": "x", "resourceClaimName": "a"}])
    mine = claim_from_dict(_claim("a", [_exactly()]))
    other = claim_from_dict(_claim("other", [_exactly()]))
    allocated_raw = _claim("other", [_exactly()])
    allocated_raw["status"] = {"allocation": {"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": "p", "device": "d0"}]}}}  # fmt: skip
    allocated = claim_from_dict(allocated_raw)
    assert plugin._claim_hint(pod, None, mine) == QUEUE  # the pod's claim appeared
    assert plugin._claim_hint(pod, None, other) == SKIP  # someone else's
    assert plugin._claim_hint(pod, allocated, other) == QUEUE  # a device was freed
    assert plugin._claim_hint(pod, other, None) == SKIP  # deleted, held nothing
    assert plugin._claim_hint(pod, allocated, None) == QUEUE  # deleted, held a device
    assert plugin._claim_hint(pod, mine, claim_from_dict(_claim("a", [_exactly()]))) == SKIP
    waiting = _pod([{"name": "x", "resourceClaimTemplateName": "t"}])
    named = _pod([{"name": "x", "resourceClaimTemplateName": "t"}], [{"name": "x"}])
    assert plugin._pod_hint(waiting, waiting, waiting) == SKIP
    assert plugin._pod_hint(waiting, waiting, named) == QUEUE


def test_an_allocation_past_the_filter_timeout_fails_the_attempt_with_an_error() -> None:
    state = _state(_claim("a", [_exactly()]))
    plugin = _plugin(state)
    pod = _pod([{"name": "x", "resourceClaimName": "a"}])
    cycle, _ = _pre_filter(plugin, pod)
    allocator = cycle.get("DynamicResources").allocator
    claim = state.get_claim("ns", "a")
    assert claim is not None
    # a deadline already past: the search stops at once (as a context past its deadline)
    with pytest.raises(AllocationTimedOut):
        allocator.allocate(Node("n1"), [claim], deadline=0.0)
    assert allocator.allocate(Node("n1"), [claim], deadline=None) is not None
    timeouts = pytest.MonkeyPatch()
    timeouts.setattr("scheduler.plugins.dynamic_resources.FILTER_TIMEOUT_SECONDS", -1.0)
    try:
        status = plugin.filter(cycle, pod, _view("n1"))
    finally:
        timeouts.undo()
    assert status.code == Code.ERROR
    assert status.reasons == ("node n1: timed out trying to allocate devices",)
