"""DeviceState: which devices allocated claims hold, as upstream's allocatedDevices counts
them (admin access holds nothing, a share holds a share and its capacity), the pending
allocations of Reserve, and PreBind's written copies until the informer shows them."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from scheduler.dra.device_state import DeviceState
from scheduler.dra.resources import (
    ClaimRecord,
    claim_from_dict,
    device_taint_rule_from_dict,
    slice_from_dict,
)

GPU = "gpu.example.com"


def _claim(name: str, *results: dict[str, Any], rv: str = "1") -> ClaimRecord:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}},
    }
    if results:
        raw["status"] = {
            "allocation": {
                "devices": {
                    "results": [{"request": "r", "driver": GPU, "pool": "p", **r} for r in results]
                }
            }
        }
    return claim_from_dict(raw)


def test_dedicated_devices_are_held_until_the_claim_is_deallocated_or_deleted() -> None:
    state = DeviceState()
    state.set_claim(_claim("a"))  # not allocated: holds nothing
    assert state.allocated_state().devices == set()
    before = state.revision
    state.set_claim(_claim("a", {"device": "d0"}, {"device": "d1"}))
    assert state.allocated_state().devices == {(GPU, "p", "d0"), (GPU, "p", "d1")}
    assert state.revision > before
    state.set_claim(_claim("a"))  # deallocated
    assert state.allocated_state().devices == set()
    state.set_claim(_claim("b", {"device": "d2"}))
    state.drop_claim(_claim("b"))
    assert state.allocated_state().devices == set()
    assert state.holders() == {}


def test_admin_access_holds_nothing() -> None:
    state = DeviceState()
    state.set_claim(_claim("a", {"device": "d0", "adminAccess": True}))
    held = state.allocated_state()
    assert held.devices == set() and not held.holds((GPU, "p", "d0"))


def test_shares_hold_a_share_and_their_capacity_until_released() -> None:
    state = DeviceState()
    device = (GPU, "p", "d0")
    state.set_claim(
        _claim("a", {"device": "d0", "shareID": "s1", "consumedCapacity": {"memory": "1Gi"}})
    )
    state.set_claim(
        _claim("b", {"device": "d0", "shareID": "s2", "consumedCapacity": {"memory": "2Gi"}})
    )
    held = state.allocated_state()
    assert held.devices == set()  # a shared device is not held whole
    assert held.shared == {(device, "s1"), (device, "s2")}
    assert held.capacity == {device: {"memory": Fraction(3 * 2**30)}}
    state.drop_claim(_claim("a"))
    held = state.allocated_state()
    assert held.shared == {(device, "s2")}
    assert held.capacity == {device: {"memory": Fraction(2 * 2**30)}}
    state.drop_claim(_claim("b"))
    held = state.allocated_state()
    assert held.shared == set() and held.capacity == {} and not held.holds(device)


def test_a_pending_allocation_holds_until_prebind_writes_it() -> None:
    state = DeviceState()
    state.set_claim(_claim("a", rv="1"))
    allocated = _claim("a", {"device": "d0"}, rv="1")
    state.signal_pending(allocated)  # Reserve
    assert state.pending_allocation(allocated.uid) is allocated
    assert state.get_claim("ns", "a") is state.claims["ns/a"]  # still the informer's copy
    assert state.allocated_state().devices == {(GPU, "p", "d0")}
    # PreBind wrote it: the written copy is assumed, then the pending entry goes
    state.assume_written(_claim("a", {"device": "d0"}, rv="2"))
    assert state.remove_pending(allocated.uid, force=True)
    assert state.holders() == {(GPU, "p", "d0"): 1}
    state.set_claim(_claim("a", rv="1"))  # an older informer copy: the assumed one stays
    assert state.allocated_state().devices == {(GPU, "p", "d0")}
    state.set_claim(_claim("a", {"device": "d0"}, rv="2"))  # the informer caught up
    assert state.assumed == {}
    assert state.holders() == {(GPU, "p", "d0"): 1}  # once, not twice
    state.set_claim(_claim("a", rv="3"))  # deallocated
    assert state.allocated_state().devices == set()


def test_unreserve_drops_the_pending_allocation_once_no_pod_shares_it() -> None:
    state = DeviceState()
    state.set_claim(_claim("a"))
    allocated = _claim("a", {"device": "d0"})
    state.signal_pending(allocated)
    state.signal_pending(allocated)  # a second pod sharing the claim
    assert not state.remove_pending(allocated.uid, force=False)
    assert state.allocated_state().devices == {(GPU, "p", "d0")}
    assert state.remove_pending(allocated.uid, force=False)
    assert state.allocated_state().devices == set()
    assert state.pending_allocation(allocated.uid) is None


def test_an_allocated_claim_gets_no_pending_entry_and_restore_reverts_to_the_informer() -> None:
    state = DeviceState()
    state.set_claim(_claim("a", rv="1"))
    state.assume_written(_claim("a", {"device": "d0"}, rv="2"))
    state.signal_pending(_claim("a", {"device": "d1"}))
    assert state.pending == {}
    state.restore("ns/a")
    assert state.get_claim("ns", "a") is state.claims["ns/a"]
    assert state.allocated_state().devices == set()


def _taint_rule(name: str, selector: dict[str, Any] | None) -> Any:
    raw: dict[str, Any] = {"metadata": {"name": name},
                           "spec": {"taint": {"key": name, "effect": "NoSchedule"}}}  # fmt: skip
    if selector is not None:
        raw["spec"]["deviceSelector"] = selector
    return device_taint_rule_from_dict(raw)


def test_device_taint_rules_add_their_taint_to_the_devices_they_select() -> None:
    state = DeviceState()
    for node in ("n1", "n2"):
        state.set_slice(
            slice_from_dict(
                {
                    "metadata": {"name": node},
                    "spec": {
                        "driver": GPU, "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "d0"}, {"name": "d1"}],
                    },
                }
            )
        )  # fmt: skip
    untouched = state.allocation_slices()
    assert all(not d.taints for s in untouched for d in s.devices)
    state.set_taint_rule(_taint_rule("none", None))  # no selector: selects nothing
    state.set_taint_rule(_taint_rule("other-driver", {"driver": "nic.example.com"}))
    state.set_taint_rule(_taint_rule("one", {"pool": "n1", "device": "d1"}))
    state.set_taint_rule(_taint_rule("all", {}))  # an empty selector: every device

    def keys() -> dict[tuple[str, str], list[str]]:
        return {
            (s.pool, d.name): [t.key for t in d.taints]
            for s in state.allocation_slices()
            for d in s.devices
        }

    assert keys() == {
        ("n1", "d0"): ["all"], ("n1", "d1"): ["one", "all"],
        ("n2", "d0"): ["all"], ("n2", "d1"): ["all"],
    }  # fmt: skip
    # the patched device keeps its selector view (cached selector results stay valid)
    patched = state.allocation_slices()[0].devices[0]
    assert patched.selector_view is state.slices["n1"].devices[0].selector_view
    state.drop_taint_rule(_taint_rule("all", {}))
    state.drop_taint_rule(_taint_rule("one", {}))
    assert state.allocation_slices()[0] is state.slices["n1"]
