"""Volume scenarios for the differential oracle: upstream kube-scheduler and this
scheduler decide pods with volumes on the same cluster (issue 14).

Each scenario is written out (not drawn at random): the cases are the volume plugins'
rules, one or a few pods each, on a handful of nodes.
- static local volumes with WaitForFirstConsumer: capacity, access modes, selector,
  the smallest fitting volume and VolumeBinding's capacity score;
- bound claims: the PV's node affinity, zone/region labels (VolumeZone), and the
  PreFilter refusals (missing claim, unbound Immediate claim, missing PV);
- ReadWriteOncePod claims in use (with and without a preemptor) and inline disks;
- CSI attach limits from CSINode;
- provisioning: allowedTopologies and CSIStorageCapacity (with its score).

The oracle refuses every bind and every PreBind write (a PV claimRef or a claim's
selected-node annotation), so nothing here changes the cluster; a refused write stands
for the node choice it precedes. Run: `python -m tests.differential.volumes`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kas_dev.cluster.local import LocalCluster
from tests.differential import scenario as sc
from tests.differential.compare import Tally
from tests.differential.harness import SEQUENTIAL, Oracle
from tests.differential.run import decide_scenario
from tests.kube import ClusterHandle

FIRST_INDEX = 900  # scenario prefixes s900.. (apart from the random scenarios')
DRIVER = "csi.oracle.example"
PROVISIONER = "provisioner.oracle.example"
GI = "Gi"


def _node(name: str, zone: str | None, *, cpu: str = "4", memory: str = "8Gi") -> dict[str, Any]:
    labels = {sc.HOSTNAME: name, "kubernetes.io/os": "linux", sc.REGION: "r1"}
    if zone is not None:
        labels[sc.ZONE] = zone
    res = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {
            "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {}, "status": {"allocatable": res, "capacity": dict(res)},
    }  # fmt: skip


def _pod(name: str, ns: str, claims: Iterable[str] = (), *, priority: str = "oracle-low",
         volumes: list[dict[str, Any]] | None = None, cpu: str = "100m") -> dict[str, Any]:  # fmt: skip
    vols = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)]  # fmt: skip
    vols += volumes or []
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "vol"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "resources": {
            "requests": {"cpu": cpu, "memory": "64Mi"}}}],
            "volumes": vols, "priorityClassName": priority},
    }  # fmt: skip


def _sequential(pod: dict[str, Any]) -> dict[str, Any]:
    """Decided by one scheduler after the other. Both copies use the same claim, and this
    scheduler's nominator follows every pod's nominatedNodeName (upstream's only its own
    pods'): upstream's copy, nominated to the victim's node first, would hold the claim
    in our preemption dry run."""
    pod["metadata"]["annotations"] = {SEQUENTIAL: "true"}
    return pod


def _on(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod["spec"]["nodeSelector"] = {sc.HOSTNAME: node}
    return pod


def _sc(name: str, provisioner: str = "kubernetes.io/no-provisioner", *, wffc: bool = True,
        zones: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    raw: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer" if wffc else "Immediate",
    }  # fmt: skip
    if zones:
        raw["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": sc.ZONE, "values": list(zones)}]}
        ]
    return raw


def _pv(name: str, size: str, sc_name: str, *, node: str = "", zone: str = "",
        claim: tuple[str, str] | None = None, modes: tuple[str, ...] = ("ReadWriteOnce",),
        labels: dict[str, str] | None = None, csi: bool = False) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes),
                            "storageClassName": sc_name,
                            "persistentVolumeReclaimPolicy": "Retain"}  # fmt: skip
    if csi:
        spec["csi"] = {"driver": DRIVER, "volumeHandle": f"h-{name}"}
    else:
        spec["local"] = {"path": f"/mnt/{name}"}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": sc.HOSTNAME, "operator": "Exists"}]}]}}  # fmt: skip
    if node:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": sc.HOSTNAME, "operator": "In", "values": [node]}]}]}}  # fmt: skip
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if zone:
        meta["labels"][sc.ZONE] = zone
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def _pvc(name: str, ns: str, size: str, sc_name: str | None, *, volume: str = "",
         modes: tuple[str, ...] = ("ReadWriteOnce",),
         selector: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"accessModes": list(modes),
                            "resources": {"requests": {"storage": size}},
                            "storageClassName": sc_name or ""}  # fmt: skip
    if volume:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}  # fmt: skip


def _annotated(claim: dict[str, Any], node: str) -> dict[str, Any]:
    claim["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": node}
    return claim


def _base(index: int, zones: list[str | None]) -> tuple[sc.Scenario, str, list[str]]:
    s = sc.Scenario(index=FIRST_INDEX + index, seed=0)
    p = s.prefix
    ns = f"{p}-a"
    s.namespaces.append({"metadata": {"name": ns, "labels": {"team": "a", "oracle": "true"}}})
    names = [f"{p}-n{i}" for i in range(len(zones))]
    s.nodes = [_node(n, z) for n, z in zip(names, zones, strict=True)]
    s.nodes[-1]["metadata"]["labels"][sc.SENTINEL_LABEL] = p
    return s, ns, names


def static_local() -> sc.Scenario:
    """WaitForFirstConsumer with static local volumes on some nodes."""
    s, ns, n = _base(0, ["z0", "z0", "z1", "z1", "z1"])
    p = s.prefix
    cls = f"{p}-local"
    s.storage = [
        _sc(cls),
        _pv(f"{p}-pv0", "2Gi", cls, node=n[0], labels={"tier": "gold"}),
        _pv(f"{p}-pv1", "10Gi", cls, node=n[1], labels={"tier": "gold"}),
        _pv(f"{p}-pv1b", "3Gi", cls, node=n[1]),
        _pv(f"{p}-pv2", "500Mi", cls, node=n[2]),
        _pv(f"{p}-pv3", "5Gi", cls, node=n[3], modes=("ReadWriteMany", "ReadWriteOnce")),
        _pvc(f"{p}-c1", ns, "1Gi", cls),
        _pvc(f"{p}-c5", ns, "5Gi", cls),
        _pvc(f"{p}-rwx", ns, "1Gi", cls, modes=("ReadWriteMany",)),
        _pvc(f"{p}-big", ns, "50Gi", cls),
        _pvc(f"{p}-gold", ns, "1Gi", cls, selector={"matchLabels": {"tier": "gold"}}),
        _pvc(f"{p}-two-a", ns, "1Gi", cls),
        _pvc(f"{p}-two-b", ns, "2Gi", cls),
    ]
    s.incoming = [
        _pod(f"{p}-i0", ns, [f"{p}-c1"]),
        _pod(f"{p}-i1", ns, [f"{p}-c5"]),
        _pod(f"{p}-i2", ns, [f"{p}-rwx"]),
        _pod(f"{p}-i3", ns, [f"{p}-big"]),
        _pod(f"{p}-i4", ns, [f"{p}-gold"]),
        _pod(f"{p}-i5", ns, [f"{p}-two-a", f"{p}-two-b"]),
    ]
    return s


def bound_claims() -> sc.Scenario:
    """Bound claims: PV node affinity, zone labels, and PreFilter refusals."""
    s, ns, n = _base(1, ["z0", "z1", "z2", None, "z1"])
    p = s.prefix
    imm = f"{p}-imm"
    s.storage = [
        _sc(imm, "kubernetes.io/no-provisioner", wffc=False),
        _pv(f"{p}-pvz1", "1Gi", "", zone="z1", claim=(ns, f"{p}-cz1"), csi=True),
        _pv(f"{p}-pvz12", "1Gi", "", zone="z1__z2", claim=(ns, f"{p}-cz12"), csi=True),
        _pv(f"{p}-pvh", "1Gi", "", node=n[2], claim=(ns, f"{p}-ch")),
        _pvc(f"{p}-cz1", ns, "1Gi", None, volume=f"{p}-pvz1"),
        _pvc(f"{p}-cz12", ns, "1Gi", None, volume=f"{p}-pvz12"),
        _pvc(f"{p}-ch", ns, "1Gi", None, volume=f"{p}-pvh"),
        _pvc(f"{p}-unbound", ns, "1Gi", imm),
        _pvc(f"{p}-ghost", ns, "1Gi", None, volume=f"{p}-nope"),
    ]
    s.nodes[-1]["metadata"]["labels"][sc.REGION] = "r2"
    s.incoming = [
        _pod(f"{p}-i0", ns, [f"{p}-cz1"]),
        _pod(f"{p}-i1", ns, [f"{p}-cz12"]),
        _pod(f"{p}-i2", ns, [f"{p}-ch"]),
        _pod(f"{p}-i3", ns, [f"{p}-cz1", f"{p}-ch"]),
        _pod(f"{p}-i4", ns, [f"{p}-unbound"]),
        _pod(f"{p}-i5", ns, [f"{p}-missing"]),
        _pod(f"{p}-i6", ns, [f"{p}-ghost"]),
    ]
    return s


def restrictions() -> sc.Scenario:
    """ReadWriteOncePod in use (refused; preempted by a higher priority), inline disks."""
    s, ns, n = _base(2, ["z0", "z0", "z1", "z1"])
    p = s.prefix
    s.storage = [
        _pv(f"{p}-pvr", "1Gi", "", claim=(ns, f"{p}-rwop"), modes=("ReadWriteOncePod",), csi=True),
        _pvc(f"{p}-rwop", ns, "1Gi", None, volume=f"{p}-pvr", modes=("ReadWriteOncePod",)),
    ]
    user = _pod(f"{p}-e0", ns, [f"{p}-rwop"])
    user["spec"]["nodeName"] = n[1]
    pd = {"name": "pd", "gcePersistentDisk": {"pdName": f"{p}-disk", "fsType": "ext4"}}
    ebs = {"name": "ebs", "awsElasticBlockStore": {"volumeID": f"{p}-vol", "readOnly": True}}
    disk_user = _pod(f"{p}-e1", ns, volumes=[pd, ebs])
    disk_user["spec"]["nodeName"] = n[2]
    s.existing = [user, disk_user]
    pd_ro = {"name": "pd", "gcePersistentDisk": {"pdName": f"{p}-disk", "readOnly": True}}
    s.incoming = [
        _pod(f"{p}-i0", ns, [f"{p}-rwop"]),
        _pod(f"{p}-i1", ns, volumes=[pd]),
        _pod(f"{p}-i2", ns, volumes=[pd_ro]),
        _pod(f"{p}-i3", ns, volumes=[{**ebs, "awsElasticBlockStore": {"volumeID": f"{p}-vol"}}]),
        _sequential(_pod(f"{p}-i4", ns, [f"{p}-rwop"], priority="oracle-high")),
    ]
    return s


def attach_limits() -> sc.Scenario:
    """CSINode allocatable counts against the unique volumes of the node's pods."""
    s, ns, n = _base(3, ["z0", "z0", "z1", "z1", "z1"])
    p = s.prefix
    wffc = f"{p}-csi"
    s.storage = [_sc(wffc, DRIVER)]
    for i in range(1, 5):
        s.storage.append(_pv(f"{p}-v{i}", "1Gi", "", claim=(ns, f"{p}-c{i}"), csi=True))
        s.storage.append(_pvc(f"{p}-c{i}", ns, "1Gi", None, volume=f"{p}-v{i}"))
    s.storage.append(_pvc(f"{p}-new", ns, "1Gi", wffc))
    for node, count in ((n[0], 1), (n[1], 2), (n[2], 3)):
        s.storage.append({
            "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
            "spec": {"drivers": [{"name": DRIVER, "nodeID": node,
                                  "allocatable": {"count": count}}]},
        })  # fmt: skip
    s.storage.append({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": n[3]},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": n[3]}]},
    })  # fmt: skip
    e0 = _pod(f"{p}-e0", ns, [f"{p}-c1"])
    e0["spec"]["nodeName"] = n[0]
    e1 = _pod(f"{p}-e1", ns, [f"{p}-c2"])
    e1["spec"]["nodeName"] = n[1]
    s.existing = [e0, e1]
    s.incoming = [
        _pod(f"{p}-i0", ns, [f"{p}-c3"]),
        _pod(f"{p}-i1", ns, [f"{p}-c3", f"{p}-c4"]),
        _pod(f"{p}-i2", ns, [f"{p}-c1"]),
        _pod(f"{p}-i3", ns, [f"{p}-c2", f"{p}-c3", f"{p}-c4"]),
        _pod(f"{p}-i4", ns, [f"{p}-new"]),
        _pod(f"{p}-i5", ns, [f"{p}-c3"], priority="oracle-high"),
        _sequential(_on(_pod(f"{p}-i6", ns, [f"{p}-c3"], priority="oracle-high"), n[0])),
    ]
    return s


def provisioning() -> sc.Scenario:
    """Dynamic provisioning: allowedTopologies and CSIStorageCapacity (and its score)."""
    s, ns, n = _base(4, ["z0", "z1", "z1", "z2", "z2"])
    p = s.prefix
    topo, cap = f"{p}-topo", f"{p}-cap"
    s.storage = [
        _sc(topo, PROVISIONER, zones=("z1",)),
        _sc(cap, DRIVER),
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": DRIVER},
         "spec": {"storageCapacity": True, "attachRequired": False}},
        _pvc(f"{p}-t", ns, "1Gi", topo),
        _pvc(f"{p}-small", ns, "1Gi", cap),
        _pvc(f"{p}-mid", ns, "3Gi", cap),
        _pvc(f"{p}-huge", ns, "100Gi", cap),
        # a claim the provisioner was already asked for on n[3]: only that node will do
        _annotated(_pvc(f"{p}-chosen", ns, "1Gi", cap), n[3]),
        # a static volume of the provisioning class on n[1]: static binding (and its score)
        # there, provisioning elsewhere
        _pv(f"{p}-static", "2Gi", cap, node=n[1]),
        _pvc(f"{p}-mix", ns, "1Gi", cap),
        _pvc(f"{p}-mix-t", ns, "1Gi", topo),
    ]  # fmt: skip
    for zone, size, max_size in (("z0", "4Gi", None), ("z1", "10Gi", None), ("z2", "20Gi", "2Gi")):
        obj: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": f"{p}-cap-{zone}", "namespace": ns},
            "storageClassName": cap, "capacity": size,
            "nodeTopology": {"matchLabels": {sc.ZONE: zone}},
        }  # fmt: skip
        if max_size:
            obj["maximumVolumeSize"] = max_size
        s.storage.append(obj)
    s.incoming = [
        _pod(f"{p}-i0", ns, [f"{p}-t"]),
        _pod(f"{p}-i1", ns, [f"{p}-small"]),
        _pod(f"{p}-i2", ns, [f"{p}-mid"]),
        _pod(f"{p}-i3", ns, [f"{p}-huge"]),
        _pod(f"{p}-i4", ns, [f"{p}-chosen"]),
        _pod(f"{p}-i5", ns, [f"{p}-mix"]),
        _pod(f"{p}-i6", ns, [f"{p}-mix", f"{p}-mix-t"]),
    ]
    return s


SCENARIOS: dict[str, Callable[[], sc.Scenario]] = {
    "static-local": static_local,
    "bound-claims": bound_claims,
    "restrictions": restrictions,
    "attach-limits": attach_limits,
    "provisioning": provisioning,
}


def run_volume_oracle(
    cluster: ClusterHandle,
    workdir: Path,
    names: Iterable[str] = tuple(SCENARIOS),
    progress: Callable[[str], None] | None = None,
) -> Tally:
    say = progress or (lambda _s: None)
    tally = Tally()
    oracle = Oracle(cluster, workdir)
    oracle.start()
    try:
        for name in names:
            scenario = SCENARIOS[name]()
            before = len(tally.differences)
            results = decide_scenario(oracle, scenario, tally, name, say)
            if results is None:
                continue
            for r in results:
                assert r.upstream is not None
                say(f"  {r.name}: upstream {r.upstream.node or r.upstream.message}")
            say(f"{name}: {len(results)} pods, {len(tally.differences) - before} difference(s)")
            for d in tally.differences[before:]:
                say(f"    {d.kind}: {d.pod}: {d.detail}")
    finally:
        oracle.stop()
    return tally


def main() -> int:
    workroot = Path(tempfile.mkdtemp(prefix="kas-oracle-volumes-"))
    local = LocalCluster(workroot / "cluster")
    print(f"starting a local control plane in {workroot} ...", flush=True)
    local.up(0)
    t0 = time.monotonic()
    try:
        tally = run_volume_oracle(
            ClusterHandle(local), workroot / "oracle", progress=lambda s: print(s, flush=True)
        )
    finally:
        local.down()
    print(f"\n{tally.scenarios} scenarios, {tally.pods} pods, {time.monotonic() - t0:.0f}s")
    print(tally.table())
    for e in tally.errors:
        print(f"harness error: {e}")
    (workroot / "volumes.json").write_text(
        json.dumps([d.to_json() for d in tally.differences], indent=1)
    )
    return 1 if tally.differences or tally.errors or tally.refused else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
