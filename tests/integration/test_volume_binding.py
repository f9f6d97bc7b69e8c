"""Pods with volumes against the real control plane (the controller-manager's
persistent-volume, statefulset and ephemeral-volume controllers run there): static local
volumes with WaitForFirstConsumer, dynamic provisioning through a small test provisioner,
a provisioner that never answers (the bind times out, is retried, and succeeds once the
provisioner wakes up), a generic ephemeral volume, and a preemption that frees a
ReadWriteOncePod claim. Every test runs against this scheduler and against upstream
kube-scheduler v1.37.2 (the `env` fixture's params): the same assertions hold for both."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kas_dev.cluster.nodes import NodeGroup
from tests.contenders import CONTENDERS, Scheduler, contender_on_cluster
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess

pytestmark = pytest.mark.cluster

SCHED = "kube-async-scheduler"
HOST = "kubernetes.io/hostname"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
NS = "default"


@pytest.fixture(scope="module", params=CONTENDERS)
def env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterHandle, Scheduler]]:
    profiles = [{"schedulerName": SCHED, "pluginConfig": [
        {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 3}}]}]  # fmt: skip
    yield from contender_on_cluster(
        request.param,
        tmp_path_factory.mktemp(f"volumes-{request.param}"),
        NodeGroup(count=4, name_prefix="vol"),
        profiles,
    )


def storage_class(name: str, provisioner: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }  # fmt: skip


def local_pv(name: str, node: str, sc: str, size: str = "1Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": sc, "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOST, "operator": "In", "values": [node]}]}]}},
        },
    }  # fmt: skip


def claim(name: str, sc: str, size: str = "1Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                 "resources": {"requests": {"storage": size}}},
    }  # fmt: skip


def pvc(cluster: ClusterHandle, name: str) -> dict[str, Any]:
    out: dict[str, Any] = cluster.api(
        "GET", f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{name}"
    )
    return out


def bound_claim(cluster: ClusterHandle, name: str) -> dict[str, Any] | None:
    c = pvc(cluster, name)
    return c if c["status"].get("phase") == "Bound" else None


def pv_node(pv: dict[str, Any]) -> str:
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    return str(terms[0]["matchExpressions"][0]["values"][0])


class TestProvisioner:
    """Plays an external provisioner for one class: a claim annotated with the selected
    node gets a PV pre-bound to it with that node's affinity (the PV controller then
    binds the claim)."""

    __test__ = False

    def __init__(self, cluster: ClusterHandle, sc: str) -> None:
        self.cluster = cluster
        self.sc = sc
        self.provisioned: dict[str, str] = {}  # claim -> node
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TestProvisioner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.2):  # an outside actor's poll, not a test's wait
            for c in self.cluster.api("GET", f"/api/v1/namespaces/{NS}/persistentvolumeclaims")[
                "items"
            ]:
                meta, spec = c["metadata"], c["spec"]
                node = (meta.get("annotations") or {}).get(SELECTED_NODE)
                name = meta["name"]
                if spec.get("storageClassName") != self.sc or not node or spec.get("volumeName"):
                    continue
                if name in self.provisioned:
                    continue
                pv = local_pv(f"pvc-{meta['uid']}", node, self.sc,
                              spec["resources"]["requests"]["storage"])  # fmt: skip
                pv["spec"]["claimRef"] = {"namespace": NS, "name": name, "uid": meta["uid"]}
                pv["metadata"]["annotations"] = {"pv.kubernetes.io/provisioned-by": self.sc}
                self.cluster.api("POST", "/api/v1/persistentvolumes", pv)
                self.provisioned[name] = node


def test_statefulset_claims_bind_to_volumes_on_their_pods_nodes(
    env: tuple[ClusterHandle, Scheduler],
) -> None:
    cluster, sched = env
    cluster.api("POST", "/apis/storage.k8s.io/v1/storageclasses",
                storage_class("local-wfc", "kubernetes.io/no-provisioner"))  # fmt: skip
    nodes = sorted(n["metadata"]["name"] for n in cluster.api("GET", "/api/v1/nodes")["items"])
    with_volume, without = nodes[:3], nodes[3]
    for n in with_volume:
        cluster.api("POST", "/api/v1/persistentvolumes", local_pv(f"local-{n}", n, "local-wfc"))
    pod = pod_manifest("web", labels={"app": "web"})
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {
            "replicas": 3, "serviceName": "web", "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod["spec"]},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": claim("x", "local-wfc")["spec"]}],
        },
    }  # fmt: skip
    sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data"}
    ]
    cluster.api("POST", f"/apis/apps/v1/namespaces/{NS}/statefulsets", sts)

    def placed() -> list[dict[str, Any]] | None:
        pods = cluster.list_pods(NS, "app=web")
        if len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods):
            return pods
        return None

    pods = wait_for(placed, timeout=90, interval=0.5, what=f"3 web pods bound\n{sched.tail()}")
    used = set()
    for p in pods:
        node = p["spec"]["nodeName"]
        c = wait_for(
            lambda name=f"data-{p['metadata']['name']}": bound_claim(cluster, name),
            timeout=60,
            interval=0.5,
            what="claim bound",
        )
        pv = cluster.api("GET", f"/api/v1/persistentvolumes/{c['spec']['volumeName']}")
        assert pv_node(pv) == node
        assert c["metadata"]["annotations"].get(SELECTED_NODE) is None  # static: no provisioning
        used.add(node)
    assert used == set(with_volume) and without not in used


def test_dynamic_provisioning_completes_through_the_selected_node(
    env: tuple[ClusterHandle, Scheduler],
) -> None:
    cluster, sched = env
    cluster.api("POST", "/apis/storage.k8s.io/v1/storageclasses",
                storage_class("dyn", "example.com/test-provisioner"))  # fmt: skip
    with TestProvisioner(cluster, "dyn") as prov:
        cluster.api(
            "POST", f"/api/v1/namespaces/{NS}/persistentvolumeclaims", claim("dyn-c", "dyn")
        )
        vol = {"name": "d", "persistentVolumeClaim": {"claimName": "dyn-c"}}
        cluster.create_pod(NS, pod_manifest("dyn-p", volumes=[vol]))
        bound = wait_for(lambda: (cluster.get_pod(NS, "dyn-p") or {}).get("spec", {}).get(
            "nodeName"), timeout=60, interval=0.5, what=f"dyn-p bound\n{sched.tail()}")  # fmt: skip
        c = pvc(cluster, "dyn-c")
        assert c["metadata"]["annotations"][SELECTED_NODE] == bound
        assert prov.provisioned == {"dyn-c": bound}
        assert c["status"]["phase"] == "Bound"


def test_a_provisioner_that_never_answers_times_the_bind_out_and_the_pod_is_retried(
    env: tuple[ClusterHandle, Scheduler],
) -> None:
    cluster, sched = env
    cluster.api("POST", "/apis/storage.k8s.io/v1/storageclasses",
                storage_class("slow", "example.com/slow-provisioner"))  # fmt: skip
    cluster.api("POST", f"/api/v1/namespaces/{NS}/persistentvolumeclaims", claim("slow-c", "slow"))
    vol = {"name": "d", "persistentVolumeClaim": {"claimName": "slow-c"}}
    cluster.create_pod(NS, pod_manifest("slow-p", volumes=[vol]))

    def timeouts() -> list[dict[str, Any]]:
        return [
            e for e in cluster.events(NS)
            # an Event recorded through core/v1 may carry no regarding name or no note
            if (e.get("regarding") or {}).get("name") == "slow-p"
            and "context deadline exceeded" in (e.get("note") or "")
        ]  # fmt: skip

    # bindTimeoutSeconds is 3: the claim is annotated, nobody provisions, the bind fails
    failed = wait_for(timeouts, timeout=60, interval=0.5, what=f"a bind timeout\n{sched.tail()}")
    assert failed[0]["reason"] == "FailedScheduling"
    assert failed[0]["note"] == (  # upstream's words (checked with the upstream param)
        'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    )
    assert cluster.get_pod(NS, "slow-p")["spec"].get("nodeName") is None  # type: ignore[index]
    node = pvc(cluster, "slow-c")["metadata"]["annotations"][SELECTED_NODE]
    # retried (with backoff), failing again while the provisioner sleeps
    wait_for(lambda: sum(e.get("series", {}).get("count", 1) for e in timeouts()) >= 2,
             timeout=60, interval=0.5, what="a second bind timeout")  # fmt: skip
    # the provisioner wakes up: the next attempt finds nothing stale and binds
    with TestProvisioner(cluster, "slow"):
        bound = wait_for(lambda: (cluster.get_pod(NS, "slow-p") or {}).get("spec", {}).get(
            "nodeName"), timeout=90, interval=0.5, what=f"slow-p bound\n{sched.tail()}")  # fmt: skip
    assert bound == node  # the claim was provisioned for the node it selected
    if isinstance(sched, SchedulerProcess):
        assert sched.metric("scheduler_schedule_attempts_total", result="error") >= 2


def test_generic_ephemeral_volume_waits_for_its_claim_then_is_provisioned(
    env: tuple[ClusterHandle, Scheduler],
) -> None:
    cluster, sched = env
    cluster.api("POST", "/apis/storage.k8s.io/v1/storageclasses",
                storage_class("eph", "example.com/eph-provisioner"))  # fmt: skip
    template = {"spec": claim("x", "eph")["spec"]}
    vol = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}
    with TestProvisioner(cluster, "eph") as prov:
        pod = cluster.create_pod(NS, pod_manifest("eph-p", volumes=[vol]))
        bound = wait_for(lambda: (cluster.get_pod(NS, "eph-p") or {}).get("spec", {}).get(
            "nodeName"), timeout=60, interval=0.5, what=f"eph-p bound\n{sched.tail()}")  # fmt: skip
        # the ephemeral-volume controller's claim, named after pod and volume, owned by it
        c = pvc(cluster, "eph-p-scratch")
        assert c["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
        assert c["metadata"]["annotations"][SELECTED_NODE] == bound
        assert prov.provisioned == {"eph-p-scratch": bound}


def test_a_higher_priority_pod_preempts_the_user_of_a_read_write_once_pod_claim(
    env: tuple[ClusterHandle, Scheduler],
) -> None:
    cluster, sched = env
    for name, value in (("vol-low", 10), ("vol-high", 1000)):
        cluster.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                    {"metadata": {"name": name}, "value": value})  # fmt: skip
    pv = local_pv("rwop-pv", "", "", "1Gi")
    pv["spec"].pop("local")
    pv["spec"].pop("nodeAffinity")
    pv["spec"]["csi"] = {"driver": "csi.example.com", "volumeHandle": "rwop-1"}
    pv["spec"]["accessModes"] = ["ReadWriteOncePod"]
    pv["spec"]["claimRef"] = {"namespace": NS, "name": "rwop-c"}
    cluster.api("POST", "/api/v1/persistentvolumes", pv)
    c = claim("rwop-c", "")
    c["spec"]["accessModes"] = ["ReadWriteOncePod"]
    c["spec"]["volumeName"] = "rwop-pv"
    cluster.api("POST", f"/api/v1/namespaces/{NS}/persistentvolumeclaims", c)
    wait_for(lambda: bound_claim(cluster, "rwop-c"), timeout=60, interval=0.5, what="rwop bound")
    vol = {"name": "d", "persistentVolumeClaim": {"claimName": "rwop-c"}}

    def node_of(name: str) -> str | None:
        return (cluster.get_pod(NS, name) or {}).get("spec", {}).get("nodeName")

    cluster.create_pod(NS, pod_manifest("rwop-low", volumes=[vol], priority_class="vol-low"))
    first = wait_for(lambda: node_of("rwop-low"), timeout=60, interval=0.5, what="low bound")
    cluster.create_pod(NS, pod_manifest("rwop-high", volumes=[vol], priority_class="vol-high"))
    # every node refuses it (the claim is in use); preempting the user frees the claim
    wait_for(lambda: cluster.get_pod(NS, "rwop-low") is None, timeout=90, interval=0.5,
             what=f"the claim's user preempted\n{sched.tail()}")  # fmt: skip
    second = wait_for(lambda: node_of("rwop-high"), timeout=90, interval=0.5,
                      what=f"rwop-high bound\n{sched.tail()}")  # fmt: skip
    assert second == first  # nominated to the node the victim left
