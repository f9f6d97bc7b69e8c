"""Extended resources backed by DRA through NodeResourcesFit and DynamicResources
together, in memory: which node leaves a resource to DRA (none of it in its allocatable)
and which counts it as before, the per-node claim allocated with the user claims, the
pending allocation between Reserve and Unreserve, a claim from an earlier cycle refused
then deleted, the signature, and the DeviceClass queueing hint. The API writes of
PreBind run against the real API server (tests/integration/test_dra_scheduling.py)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from scheduler.dra.class_resolver import DEVICE_CLASS_PREFIX
from scheduler.dra.device_state import DeviceState
from scheduler.dra.extended_claim import ANNOTATION, IN_MEMORY_NAME
from scheduler.dra.resources import claim_from_dict, device_class_from_dict, slice_from_dict
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.model.pod import pod_from_dict
from scheduler.plugins.dynamic_resources import DynamicResources
from scheduler.plugins.helpers import QUEUE, SKIP
from scheduler.plugins.node_resources_fit import NodeResourcesFit, new
from tests.unit.helpers.builders import (
    NodeBuilder,
    PodBuilder,
    filter_statuses,
    make_framework,
    make_snapshot,
    reasons_of,
)

GPU = "example.com/gpu"
DRIVER = "gpu.example.com"


def _state(devices: dict[str, int], class_resource: str = GPU) -> DeviceState:
    state = DeviceState()
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if class_resource:
        spec["extendedResourceName"] = class_resource
    state.set_class(device_class_from_dict({"metadata": {"name": "gpu"}, "spec": spec}))
    for node, count in devices.items():
        state.set_slice(
            slice_from_dict(
                {
                    "metadata": {"name": f"{node}-slice"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"d{i}"} for i in range(count)],
                    },
                }
            )
        )
    return state


def _nodes() -> list[NodeBuilder]:
    return [
        NodeBuilder("n1"),  # two devices through DRA
        NodeBuilder("n2"),  # nothing
        NodeBuilder("n3").capacity(**{GPU: 1}),  # a device plugin's one
    ]


def _pod(gpus: int, resource: str = GPU) -> PodBuilder:
    return PodBuilder("p").uid("pod-uid").requests(**{resource: gpus})


def _filter(state: DeviceState | None, pod: PodBuilder) -> dict[str, str]:
    """The nodes refused, with their reasons (per node and batch alike)."""
    handle = Handle(device_state=state)
    fw = make_framework(["NodeResourcesFit", "DynamicResources"], handle=handle)
    return reasons_of(filter_statuses(fw, pod.obj(), make_snapshot(_nodes())))


def test_a_node_without_the_resource_leaves_it_to_dra_one_with_it_counts_it() -> None:
    assert _filter(_state({"n1": 2}), _pod(2)) == {
        "n2": "cannot allocate all claims",
        "n3": f"Insufficient {GPU}",
    }
    assert _filter(_state({"n1": 2}), _pod(1)) == {"n2": "cannot allocate all claims"}


def test_without_a_class_or_without_dra_the_resource_is_counted_everywhere() -> None:
    for state in (None, _state({"n1": 2}, class_resource="")):
        assert _filter(state, _pod(1)) == {
            "n1": f"Insufficient {GPU}",
            "n2": f"Insufficient {GPU}",
        }


def test_a_class_backs_its_implicit_name_too() -> None:
    # (n3's device plugin advertises example.com/gpu, not this name)
    pod = _pod(1, DEVICE_CLASS_PREFIX + "gpu")
    assert _filter(_state({"n1": 2}, class_resource=""), pod) == {
        "n2": "cannot allocate all claims",
        "n3": "cannot allocate all claims",
    }


def _cycle(plugin: DynamicResources, pod: PodBuilder) -> tuple[CycleState, Any]:
    info = pod.obj()
    cycle = CycleState()
    _, status = plugin.pre_filter(cycle, info, None)  # type: ignore[arg-type]
    assert status.ok
    return cycle, info


def _view(name: str) -> Any:
    return make_snapshot(_nodes()).get(name)


def test_reserve_holds_the_devices_of_the_nodes_claim_until_unreserve() -> None:
    state = _state({"n1": 1})
    plugin = DynamicResources(Handle(device_state=state))
    cycle, pod = _cycle(plugin, _pod(1))
    s = cycle.get("DynamicResources")
    [claim] = s.claims
    assert claim.name == IN_MEMORY_NAME and not claim.requests
    assert plugin.filter(cycle, pod, _view("n1")).ok
    node_claim = s.node_allocations["n1"].extended_claim
    assert [r.name for r in node_claim.requests] == ["container-0-request-0"]
    assert node_claim.raw["metadata"]["generateName"] == "p-extended-resources-"
    # n3's device plugin covers it: nothing to allocate there
    assert plugin.filter(cycle, pod, _view("n3")).ok
    assert "n3" not in s.node_allocations
    assert plugin.reserve(cycle, pod, "n1").ok
    assert state.pending_allocation(claim.uid) is not None
    # the device is promised: a second pod finds none on n1
    other_cycle, other = _cycle(plugin, PodBuilder("q").uid("q-uid").requests(**{GPU: 1}))
    assert plugin.filter(other_cycle, other, _view("n1")).reasons == ("cannot allocate all claims",)
    plugin.unreserve(cycle, pod, "n1")
    assert state.pending_allocation(claim.uid) is None
    other_cycle, other = _cycle(plugin, PodBuilder("q").uid("q-uid").requests(**{GPU: 1}))
    assert plugin.filter(other_cycle, other, _view("n1")).ok


def test_reserve_on_a_node_whose_device_plugin_covers_it_allocates_nothing() -> None:
    state = _state({"n1": 1})
    plugin = DynamicResources(Handle(device_state=state))
    cycle, pod = _cycle(plugin, _pod(1))
    assert plugin.filter(cycle, pod, _view("n3")).ok
    assert plugin.reserve(cycle, pod, "n3").ok
    assert not state.pending


def test_a_claim_from_an_earlier_cycle_fails_every_node_and_postfilter_deletes_it() -> None:
    state = _state({"n1": 1})
    state.set_claim(
        claim_from_dict(
            {
                "metadata": {
                    "name": "p-extended-resources-abcde",
                    "namespace": "default",
                    "uid": "old",
                    "annotations": {ANNOTATION: "true"},
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid",
                         "controller": True}
                    ],
                },
                "spec": {"devices": {"requests": [{"name": "container-0-request-0",
                    "exactly": {"deviceClassName": "gpu", "count": 1}}]}},
            }
        )
    )  # fmt: skip
    plugin = DynamicResources(Handle(device_state=state))
    cycle, pod = _cycle(plugin, _pod(1))
    status = plugin.filter(cycle, pod, _view("n1"))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("cannot schedule extended resource claim",)
    _, status = plugin.post_filter(cycle, pod, None, None)  # type: ignore[arg-type]
    assert status.code == Code.UNSCHEDULABLE
    assert status.reasons == ("deletion of ResourceClaim completed",)
    # another pod's claim (same name, other uid) is not this pod's
    other_cycle, _ = _cycle(plugin, PodBuilder("p").uid("new-uid").requests(**{GPU: 1}))
    assert other_cycle.get("DynamicResources").claims[0].name == IN_MEMORY_NAME


def test_no_signature_for_a_pod_with_a_resource_a_class_backs() -> None:
    plugin = new(None, Handle(device_state=_state({})))
    status = plugin.sign_pod(_pod(1).obj())[1]
    assert status.code == Code.UNSCHEDULABLE
    assert status.reasons == (
        "signature disabled when dra extended resources are used in the cluster",
    )
    assert new(None, Handle()).sign_pod(_pod(1).obj())[1].ok


def test_device_class_events_queue_pods_asking_for_what_the_class_backs() -> None:
    plugin: NodeResourcesFit = new(None, Handle(device_state=_state({})))
    [hint] = [e.hint for e in plugin.events_to_register() if "DeviceClass" in str(e.event)]
    assert hint is not None

    def klass(name: str, resource: str = "") -> Any:
        spec = {"extendedResourceName": resource} if resource else {}
        return device_class_from_dict({"metadata": {"name": name}, "spec": spec})

    explicit, implicit = _pod(1).obj(), _pod(1, DEVICE_CLASS_PREFIX + "gpu").obj()
    assert hint(explicit, None, klass("other", GPU)) == QUEUE
    assert hint(explicit, None, klass("other")) == SKIP
    assert hint(implicit, None, klass("gpu")) == QUEUE
    assert hint(explicit, klass("other", GPU), klass("other", GPU)) == SKIP  # unchanged
    assert hint(explicit, klass("other"), klass("other", GPU)) == QUEUE
    assert hint(implicit, klass("gpu"), klass("gpu", GPU)) == SKIP  # only added is new
    # without dynamic resource allocation, no such event
    assert not [
        e for e in new(None, Handle()).events_to_register() if "DeviceClass" in str(e.event)
    ]


def test_user_claims_and_the_extended_claim_are_allocated_together() -> None:
    state = _state({"n1": 2, "n3": 1})
    state.set_claim(
        claim_from_dict(
            {
                "metadata": {"name": "mine", "namespace": "default", "uid": "uid-mine"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                    "deviceClassName": "gpu"}}]}},
            }
        )
    )  # fmt: skip
    plugin = DynamicResources(Handle(device_state=state))
    raw = _pod(1).raw()
    raw["spec"]["resourceClaims"] = [{"name": "x", "resourceClaimName": "mine"}]
    info = pod_from_dict(raw)
    cycle = CycleState()
    assert plugin.pre_filter(cycle, info, None)[1].ok  # type: ignore[arg-type]
    assert [c.name for c in cycle.get("DynamicResources").claims] == ["mine", IN_MEMORY_NAME]
    assert plugin.filter(cycle, info, _view("n1")).ok  # two devices: one per claim
    # n3's device plugin has the extended resource; its one device goes to the user claim
    assert plugin.filter(cycle, info, _view("n3")).ok
    assert not cycle.get("DynamicResources").node_allocations["n3"].extended_claim.requests
    assert plugin.reserve(cycle, info, "n1").ok
    assert len(state.pending) == 2


class _FakeAPI:
    """The API calls PreBind and the deletions make, answered as the API server would."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.version = 1

    def _stored(self, raw: Any) -> dict[str, Any]:
        self.version += 1
        out = copy.deepcopy(dict(raw))
        out["metadata"]["resourceVersion"] = str(self.version)
        return out

    async def create_resource_claim(self, raw: Any) -> dict[str, Any]:
        self.calls.append(("create", raw))
        out = self._stored(raw)
        out["metadata"].update(name=raw["metadata"]["generateName"] + "x1", uid="real-uid")
        return out

    async def update_resource_claim(self, raw: Any) -> dict[str, Any]:
        self.calls.append(("update", raw))
        return self._stored(raw)

    async def update_resource_claim_status(self, raw: Any) -> dict[str, Any]:
        self.calls.append(("status", raw))
        return self._stored(raw)

    async def get_resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
        raise AssertionError("no conflict here")

    async def delete_resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("delete", name))
        return {}

    async def patch_pod_status(self, namespace: str, name: str, patch: Any) -> dict[str, Any]:
        self.calls.append(("pod", patch))
        return {}

    async def unreserve_resource_claim(self, *args: Any) -> dict[str, Any]:
        raise AssertionError("not reserved")


def test_prebind_creates_allocates_and_reserves_the_claim_then_records_it_in_the_pod() -> None:
    state = _state({"n1": 1})
    api = _FakeAPI()
    plugin = DynamicResources(Handle(device_state=state, resource_claim_api=api))
    cycle, pod = _cycle(plugin, _pod(1))
    temporary = cycle.get("DynamicResources").claims[0].uid
    assert plugin.filter(cycle, pod, _view("n1")).ok
    assert plugin.reserve(cycle, pod, "n1").ok
    assert asyncio.run(plugin.pre_bind(cycle, pod, "n1")).ok
    [create, finalizer, status, patch] = api.calls
    sent = create[1]["metadata"]
    assert "name" not in sent and "uid" not in sent
    assert sent["generateName"] == "p-extended-resources-"
    assert create[1]["spec"]["devices"]["requests"][0]["name"] == "container-0-request-0"
    assert finalizer[1]["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert status[1]["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": "pod-uid"}
    ]
    [result] = status[1]["status"]["allocation"]["devices"]["results"]
    assert (result["request"], result["pool"], result["device"]) == (
        "container-0-request-0",
        "n1",
        "d0",
    )
    assert patch[1] == {
        "status": {
            "extendedResourceClaimStatus": {
                "requestMappings": [
                    {
                        "containerName": "c0",
                        "resourceName": GPU,
                        "requestName": "container-0-request-0",
                    }
                ],
                "resourceClaimName": "p-extended-resources-x1",
            }
        }
    }
    # the pending allocation under the temporary uid is gone; the written claim holds it
    assert state.pending_allocation(temporary) is None
    assert state.holders() == {(DRIVER, "n1", "d0"): 1}

    # a later failure: Unreserve deletes the claim it wrote
    async def unreserve() -> None:
        plugin.unreserve(cycle, pod, "n1")
        await asyncio.gather(*plugin._tasks)

    asyncio.run(unreserve())
    assert api.calls[-2:] == [
        ("update", api.calls[-2][1]),
        ("delete", "p-extended-resources-x1"),
    ]
    assert api.calls[-2][1]["metadata"]["finalizers"] == []
