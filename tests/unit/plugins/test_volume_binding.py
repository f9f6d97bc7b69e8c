"""The volume plugins on in-memory objects: VolumeBinding (matching, provisioning
checks, assume/revert, PreBind's writes and wait), VolumeRestrictions, NodeVolumeLimits,
VolumeZone, with upstream v1.37.2's words and codes."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.framework import CycleState, Handle, InMemoryListers
from scheduler.framework.status import Code
from scheduler.model.csi import (
    csi_driver_from_dict,
    csi_node_from_dict,
    csi_storage_capacity_from_dict,
)
from scheduler.model.volume import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from tests.unit.helpers.builders import (
    filter_statuses,
    make_framework,
    make_node,
    make_pod,
    make_snapshot,
    reasons_of,
)

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NODE_AFFINITY = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NO_SPACE = "node(s) did not have enough free storage"
RWOP = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


def pvc(name: str, sc: str | None = "local", *, size: str = "1Gi", modes: tuple[str, ...] = (
        "ReadWriteOnce",), volume: str = "", bound: bool = False, rv: str = "1",
        anns: Mapping[str, str] | None = None, owner_uid: str = "") -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}",
                            "resourceVersion": rv, "annotations": dict(anns or {})}  # fmt: skip
    if bound:
        meta["annotations"][ANN_BIND_COMPLETED] = "yes"
    if owner_uid:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": owner_uid,
                                    "controller": True}]  # fmt: skip
    spec: dict[str, Any] = {"accessModes": list(modes),
                            "resources": {"requests": {"storage": size}}}  # fmt: skip
    if sc is not None:
        spec["storageClassName"] = sc
    if volume:
        spec["volumeName"] = volume
    return {"metadata": meta, "spec": spec, "status": {"phase": "Bound" if bound else "Pending"}}


def pv(name: str, *, node: str = "", zone: str = "", sc: str = "local", size: str = "10Gi",
       claim: str = "", csi: str = "", labels: Mapping[str, str] | None = None,
       rv: str = "1") -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                            "storageClassName": sc}  # fmt: skip
    if node:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOST, "operator": "In", "values": [node]}]}]}}  # fmt: skip
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim, "uid": f"uid-{claim}"}
    if csi:
        spec["csi"] = {"driver": csi, "volumeHandle": f"h-{name}"}
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "labels": dict(labels or {})}
    if zone:
        meta["labels"][ZONE] = zone
    return {"metadata": meta, "spec": spec,
            "status": {"phase": "Bound" if claim else "Available"}}  # fmt: skip


def sc(name: str, provisioner: str = "kubernetes.io/no-provisioner", *, wffc: bool = True,
       zones: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    raw: dict[str, Any] = {
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer" if wffc else "Immediate",
    }
    if zones:
        raw["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": ZONE, "values": list(zones)}]}]  # fmt: skip
    return raw


def listers(*objs: dict[str, Any]) -> InMemoryListers:
    ls = InMemoryListers()
    for o in objs:
        if "volumeBindingMode" in o:
            ls.set_storage_class(storage_class_from_dict(o))
        elif "namespace" in o["metadata"]:
            ls.set_pvc(pvc_from_dict(o))
        else:
            ls.set_pv(pv_from_dict(o))
    return ls


def nodes() -> list[Any]:
    return [make_node(n).label(HOST, n).zone(z) for n, z in (("a", "z1"), ("b", "z2"))]


def verdicts(ls: InMemoryListers, pod: Any, pods: list[Any] | None = None) -> dict[str, str]:
    fw = make_framework(handle=Handle.from_listers(ls))
    statuses = filter_statuses(fw, pod.obj(), make_snapshot(nodes(), pods))
    for s in statuses.values():
        assert s.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    return reasons_of(statuses)


# ------------------------------------------------------------------ VolumeBinding Filter
def test_bound_claim_follows_its_pv_node_affinity() -> None:
    ls = listers(pvc("c", volume="pv1", bound=True), pv("pv1", node="a", claim="c"))
    assert verdicts(ls, make_pod("p").pvc("c")) == {"b": NODE_AFFINITY}


def test_a_claim_named_but_not_bind_completed_is_unbound_immediate() -> None:
    ls = listers(pvc("c", sc=None, volume="pv1"), pv("pv1", claim="c"))
    msg = "pod has unbound immediate PersistentVolumeClaims"
    assert verdicts(ls, make_pod("p").pvc("c")) == {"a": msg, "b": msg}


def test_wait_for_first_consumer_takes_a_node_with_a_free_matching_volume() -> None:
    ls = listers(sc("local"), pvc("c"), pv("pv-a", node="a"), pv("pv-b", node="b", size="100Mi"))
    # b's volume is too small for the 1Gi claim
    assert verdicts(ls, make_pod("p").pvc("c")) == {"b": BIND_CONFLICT}


def test_static_matching_checks_access_modes() -> None:
    ls = listers(sc("local"), pvc("c", modes=("ReadWriteMany",)), pv("pv-a", node="a"))
    assert verdicts(ls, make_pod("p").pvc("c")) == {"a": BIND_CONFLICT, "b": BIND_CONFLICT}


def test_claim_selector_and_smallest_volume() -> None:
    claim = pvc("c")
    claim["spec"]["selector"] = {"matchLabels": {"tier": "gold"}}
    ls = listers(sc("local"), claim, pv("big", node="a", labels={"tier": "gold"}, size="50Gi"),
                 pv("small", node="a", labels={"tier": "gold"}, size="2Gi"),
                 pv("plain", node="b"))  # fmt: skip
    fw = make_framework(handle=Handle.from_listers(ls))
    snap = make_snapshot(nodes())
    state = CycleState()
    pod = make_pod("p").pvc("c").obj()
    assert fw.run_pre_filter(state, pod, snap)[1].ok
    assert fw.run_filter(state, pod, snap.get("a")).ok
    assert fw.run_filter(state, pod, snap.get("b")).message() == BIND_CONFLICT
    vb = fw.plugin("VolumeBinding")
    chosen = state.get("VolumeBinding").by_node["a"].static_bindings
    assert [b.pv.name for b in chosen] == ["small"]
    # the emptier volume scores higher (default shape: 100 - utilization)
    assert vb.score(state, pod, snap.get("a"))[0] == 50


def test_provisioning_checks_allowed_topologies_and_capacity() -> None:
    ls = listers(sc("csi", "csi.example.com", zones=("z1",)), pvc("c", sc="csi"))
    assert verdicts(ls, make_pod("p").pvc("c")) == {"b": BIND_CONFLICT}
    ls.set_csi_driver(
        csi_driver_from_dict(
            {"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}}
        )
    )
    ls.set_csi_storage_capacity(csi_storage_capacity_from_dict({
        "metadata": {"name": "cap-a", "namespace": "kube-system"}, "storageClassName": "csi",
        "nodeTopology": {"matchLabels": {ZONE: "z1"}}, "capacity": "512Mi"}))  # fmt: skip
    assert verdicts(ls, make_pod("p").pvc("c")) == {"a": NO_SPACE, "b": BIND_CONFLICT}


def test_claim_being_provisioned_for_another_node() -> None:
    ls = listers(sc("csi", "csi.example.com"), pvc("c", sc="csi", anns={ANN_SELECTED_NODE: "b"}))
    assert verdicts(ls, make_pod("p").pvc("c")) == {"a": BIND_CONFLICT}


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        ((), 'persistentvolumeclaim "c" not found'),
        ((pvc("c", volume="gone") | {"status": {"phase": "Lost"}},),
         'persistentvolumeclaim "c" bound to non-existent persistentvolume "gone"'),
    ],
)  # fmt: skip
def test_prefilter_claim_problems(objs: tuple[dict[str, Any], ...], expected: str) -> None:
    assert verdicts(listers(*objs), make_pod("p").pvc("c")) == {"a": expected, "b": expected}


def test_generic_ephemeral_volume_claims() -> None:
    pod = make_pod("p").uid("pod-uid")
    pod._spec.setdefault("volumes", []).append({"name": "data", "ephemeral": {}})
    waiting = 'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-data"'
    assert verdicts(listers(sc("local")), pod) == {"a": waiting, "b": waiting}
    stranger = listers(sc("local"), pvc("p-data", owner_uid="someone"), pv("pv-a", node="a"))
    msg = "PVC default/p-data was not created for pod default/p (pod is not owner)"
    assert verdicts(stranger, pod) == {"a": msg, "b": msg}
    own = listers(sc("local"), pvc("p-data", owner_uid="pod-uid"), pv("pv-a", node="a"))
    assert verdicts(own, pod) == {"b": BIND_CONFLICT}


# ------------------------------------------------------------------ Reserve / PreBind
class FakeVolumeAPI:
    """Stores the writes; `controller` plays the PV controller on them."""

    def __init__(self, ls: InMemoryListers, controller: bool) -> None:
        self.ls = ls
        self.controller = controller
        self.writes: list[str] = []

    async def update_pv(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(dict(raw))
        out["metadata"]["resourceVersion"] = str(int(out["metadata"]["resourceVersion"]) + 10)
        self.writes.append(f"pv/{out['metadata']['name']}")
        self.ls.set_pv(pv_from_dict(out))
        if self.controller:
            ref = out["spec"]["claimRef"]
            claim = copy.deepcopy(dict(self.ls.pvcs[f"default/{ref['name']}"].raw))
            claim["spec"]["volumeName"] = out["metadata"]["name"]
            claim["metadata"]["annotations"][ANN_BIND_COMPLETED] = "yes"
            claim["metadata"]["resourceVersion"] = "99"
            self.ls.set_pvc(pvc_from_dict(claim))
        return out

    async def update_pvc(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(dict(raw))
        out["metadata"]["resourceVersion"] = str(int(out["metadata"]["resourceVersion"]) + 10)
        self.writes.append(f"pvc/{out['metadata']['name']}")
        self.ls.set_pvc(pvc_from_dict(out))
        return out


def _reserved(ls: InMemoryListers, api: FakeVolumeAPI, timeout: int = 600) -> tuple[Any, ...]:
    handle = Handle.from_listers(ls, volume_api=api, node_lookup=lambda n: make_node(n).label(
        HOST, n).obj())  # fmt: skip
    fw = make_framework(handle=handle, args={"VolumeBinding": {"bindTimeoutSeconds": timeout}})
    snap = make_snapshot(nodes())
    state = CycleState()
    pod = make_pod("p").pvc("c").obj()
    assert fw.run_pre_filter(state, pod, snap)[1].ok
    assert fw.run_filter(state, pod, snap.get("a")).ok
    assert fw.run_reserve(state, pod, "a").ok
    return fw, snap, state, pod


async def _no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


def test_reserve_assumes_so_a_second_pod_cannot_take_the_volume_and_unreserve_frees_it() -> None:
    ls = listers(sc("local"), pvc("c"), pvc("d"), pv("pv-a", node="a"))
    fw, snap, state, pod = _reserved(ls, FakeVolumeAPI(ls, controller=True))
    other = make_pod("q").pvc("d").obj()
    s2 = CycleState()
    assert fw.run_pre_filter(s2, other, snap)[1].ok
    assert fw.run_filter(s2, other, snap.get("a")).message() == BIND_CONFLICT
    fw.run_unreserve(state, pod, "a")
    s3 = CycleState()
    assert fw.run_pre_filter(s3, other, snap)[1].ok
    assert fw.run_filter(s3, other, snap.get("a")).ok


def test_prebind_writes_the_claim_ref_and_waits_for_the_controller() -> None:
    ls = listers(sc("local"), pvc("c"), pv("pv-a", node="a"))
    api = FakeVolumeAPI(ls, controller=True)
    fw, _, state, pod = _reserved(ls, api)
    fw.plugin("VolumeBinding").binder._sleep = _no_wait
    st = asyncio.run(fw.run_pre_bind(state, pod, "a"))
    assert st.ok, st
    assert api.writes == ["pv/pv-a"]
    written = ls.pvs["pv-a"]
    assert written.claim is not None and written.claim.uid == "uid-c"
    assert written.annotations.get("pv.kubernetes.io/bound-by-controller") == "yes"


def test_prebind_times_out_when_no_one_binds_and_nothing_stays_assumed() -> None:
    ls = listers(sc("csi", "csi.example.com"), pvc("c", sc="csi"))
    api = FakeVolumeAPI(ls, controller=False)
    fw, _, state, pod = _reserved(ls, api, timeout=0)
    vb = fw.plugin("VolumeBinding")
    vb.binder._sleep = _no_wait
    assert vb.binder.cache.assumed_counts() == (0, 1)
    st = asyncio.run(fw.run_pre_bind(state, pod, "a"))
    assert st.code == Code.ERROR
    assert st.message() == (
        'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    )
    assert api.writes == ["pvc/c"]
    assert ls.pvcs["default/c"].selected_node == "a"
    fw.run_unreserve(state, pod, "a")
    assert vb.binder.cache.assumed_counts() == (0, 0)


# ------------------------------------------------------------------ the other plugins
def test_read_write_once_pod_claim_in_use_refuses_every_node_until_its_user_goes() -> None:
    ls = listers(pvc("c", volume="pv1", bound=True, modes=("ReadWriteOncePod",)),
                 pv("pv1", claim="c"))  # fmt: skip
    user = make_pod("user").node("b").pvc("c")
    assert verdicts(ls, make_pod("p").pvc("c"), [user]) == {"a": RWOP, "b": RWOP}
    fw = make_framework(handle=Handle.from_listers(ls))
    snap = make_snapshot(nodes(), [user])
    state = CycleState()
    pod = make_pod("p").pvc("c").obj()
    assert fw.run_pre_filter(state, pod, snap)[1].ok
    view = snap.get("b").clone()
    victim = next(iter(view.pods.values()))
    view.remove_pod(victim)
    dry = state.clone()
    assert fw.filter_runner.remove_pod(dry, pod, victim, view).ok
    assert fw.run_filter(dry, pod, view).ok  # preemption of the user frees the claim
    assert fw.run_filter(state, pod, snap.get("b")).code == Code.UNSCHEDULABLE


def test_inline_disk_conflict() -> None:
    disk = {"name": "d", "gcePersistentDisk": {"pdName": "pd1"}}
    user = make_pod("user").node("a")
    user._spec["volumes"] = [disk]
    pod = make_pod("p")
    pod._spec["volumes"] = [disk]
    assert verdicts(listers(), pod, [user]) == {"a": "node(s) had no available disk"}


def test_csi_attach_limit() -> None:
    ls = listers(
        sc("csi", "csi.example.com"),
        pvc("c1", sc="csi", volume="v1", bound=True),
        pv("v1", claim="c1", csi="drv"),
        pvc("c2", sc="csi", volume="v2", bound=True),
        pv("v2", claim="c2", csi="drv"),
    )
    for n in ("a", "b"):
        ls.set_csi_node(csi_node_from_dict({"metadata": {"name": n}, "spec": {"drivers": [
            {"name": "drv", "nodeID": n, "allocatable": {"count": 1}}]}}))  # fmt: skip
    users = [make_pod("u1").node("a").pvc("c1")]
    assert verdicts(ls, make_pod("p").pvc("c2"), users) == {"a": "node(s) exceed max volume count"}
    # the same volume again is no new attachment
    assert verdicts(ls, make_pod("p").pvc("c1"), users) == {}


def test_volume_zone() -> None:
    ls = listers(pvc("c", volume="v", bound=True), pv("v", claim="c", zone="z1__z3"))
    assert verdicts(ls, make_pod("p").pvc("c")) == {"b": "node(s) had no available volume zone"}
    immediate = listers(sc("imm", "x", wffc=False), pvc("c", sc="imm"))
    msg = "pod has unbound immediate PersistentVolumeClaims"  # VolumeBinding's PreFilter first
    assert verdicts(immediate, make_pod("p").pvc("c")) == {"a": msg, "b": msg}
    missing_pv = listers(pvc("c", volume="v", bound=True))
    msg = 'persistentvolume "v" not found'
    assert verdicts(missing_pv, make_pod("p").pvc("c")) == {"a": msg, "b": msg}


def test_pod_without_claims_skips_the_plugins() -> None:
    assert verdicts(listers(), make_pod("p")) == {}


def test_pv_affinity_on_labels_only_and_volumes_without_affinity() -> None:
    """A PV without node affinity suits every node; one selecting by matchFields
    (metadata.name) suits none: upstream checks a PV's affinity on the node's labels
    only. The batch path (an index over all nodes) agrees with the per-node path."""
    anywhere = pv("anywhere", csi="drv")
    by_name = pv("by-name")
    by_name["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}  # fmt: skip
    assert verdicts(listers(sc("local"), pvc("c"), anywhere), make_pod("p").pvc("c")) == {}
    only_fields = verdicts(listers(sc("local"), pvc("c"), by_name), make_pod("p").pvc("c"))
    assert only_fields == {"a": BIND_CONFLICT, "b": BIND_CONFLICT}
