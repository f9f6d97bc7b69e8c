"""Helpers for the preemption tests against the real control plane.

- PriorityClasses and victims pre-bound to a node (spec.nodeName), with a chosen start
  time (status.startTime, patched once kwok has marked the pod Running);
- a watch of one namespace's pods in a thread, keeping every version seen, so a test
  can prove what a pod carried *before* it was deleted (conditions, nominatedNodeName);
- a DELETE webhook that also keeps the AdmissionReview's oldObject: the victim as the
  API server had it at the moment of its DELETE;
- an independent brute force of upstream's choice (SelectVictimsOnNode with the PDB
  split and the greedy reprieve, then pickOneNodeForPreemption's criteria), on plain
  numbers read from the manifests. It shares no code with the scheduler.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.pki import pki_paths
from tests.checker import label_selector_matches, pod_requests, quantity
from tests.faults import audit
from tests.identity import kubeconfig_for
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.webhook import KWOK_USER, DeleteWebhook

SCHED = "kube-async-scheduler"
BASE_TIME = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


# ---------------------------------------------------------------- objects


def create_priority_classes(cluster: ClusterHandle, classes: dict[str, int]) -> None:
    for name, value in classes.items():
        cluster.api(
            "POST",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
            },
        )


def victim_manifest(
    name: str,
    node: str,
    priority_class: str,
    cpu: str,
    *,
    labels: dict[str, str] | None = None,
    scheduler_name: str = SCHED,
    memory: str = "64Mi",
) -> dict[str, Any]:
    """A pod bound at creation (spec.nodeName), as if scheduled earlier."""
    return pod_manifest(
        name,
        scheduler_name=scheduler_name,
        cpu=cpu,
        memory=memory,
        priority_class=priority_class,
        labels=labels,
        nodeName=node,
        terminationGracePeriodSeconds=30,
    )


def rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait_running(cluster: ClusterHandle, namespace: str, names: Iterable[str]) -> None:
    want = set(names)

    def running() -> bool:
        pods = {p["metadata"]["name"]: p for p in cluster.list_pods(namespace)}
        return all(n in pods and pods[n].get("status", {}).get("phase") == "Running" for n in want)

    wait_for(running, timeout=30, what=f"pods running in {namespace}: {sorted(want)}")


def set_start_time(cluster: ClusterHandle, namespace: str, name: str, moment: dt.datetime) -> None:
    """Give a Running pod a chosen status.startTime (kwok writes it once, at Running)."""
    cluster.api(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{name}/status",
        {"status": {"startTime": rfc3339(moment)}},
        content_type="application/merge-patch+json",
    )


def create_pdb(
    cluster: ClusterHandle, namespace: str, name: str, labels: dict[str, str], min_available: int
) -> None:
    cluster.api(
        "POST",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "metadata": {"name": name},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": labels}},
        },
    )


def wait_pdb_allowed(cluster: ClusterHandle, namespace: str, name: str, allowed: int) -> None:
    def settled() -> bool:
        pdb = cluster.api(
            "GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"
        )
        st = pdb.get("status") or {}
        return (
            st.get("observedGeneration") == pdb["metadata"]["generation"]
            and st.get("disruptionsAllowed") == allowed
        )

    wait_for(settled, timeout=30, what=f"PDB {namespace}/{name} disruptionsAllowed={allowed}")


def node_of(cluster: ClusterHandle, namespace: str, name: str) -> str:
    return str(((cluster.get_pod(namespace, name) or {}).get("spec") or {}).get("nodeName") or "")


def preempted_events(cluster: ClusterHandle, namespace: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in cluster.events(namespace):
        if e.get("reason") == "Preempted":
            out.setdefault(e["regarding"]["name"], []).append(e)
    return out


def disruption_target(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "DisruptionTarget":
            return dict(c)
    return None


# ---------------------------------------------------------------- watching


class PodWatch:
    """Watches the pods of one namespace in a thread and keeps every version seen, by
    pod name, in order. Started before the objects it must see are written."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.versions: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.received: dict[str, list[float]] = {}  # time.monotonic() of each version
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: http.client.HTTPSConnection | None = None
        self.error: BaseException | None = None

    def _ctx(self) -> ssl.SSLContext:
        paths = pki_paths(self.cluster.local.pki_dir)
        ctx = ssl.create_default_context(cafile=str(paths.ca_cert))
        ctx.load_cert_chain(str(paths.admin_cert), str(paths.admin_key))
        return ctx

    def start(self) -> PodWatch:
        listed = self.cluster.api("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        for p in listed["items"]:
            self._record("LISTED", p)
        rv = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self._thread.start()
        return self

    def _record(self, kind: str, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        with self._lock:
            self.versions.setdefault(obj["metadata"]["name"], []).append((kind, obj))
            self.received.setdefault(obj["metadata"]["name"], []).append(now)

    def _run(self, rv: str) -> None:
        ctx = self._ctx()
        url = urllib.parse.urlsplit(self.cluster.api_url)
        while not self._stop.is_set():
            path = (
                f"/api/v1/namespaces/{self.namespace}/pods"
                f"?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=30"
            )
            conn = http.client.HTTPSConnection(
                url.hostname or "127.0.0.1", url.port, context=ctx, timeout=60
            )
            self._conn = conn
            try:
                # the server ends the watch after 30 s; then it is resumed from rv
                conn.request("GET", path, headers={"Accept": "application/json"})
                resp = conn.getresponse()
                if resp.status != 200:
                    raise RuntimeError(f"watch: HTTP {resp.status}: {resp.read()[:300]!r}")
                for line in resp:
                    ev = json.loads(line)
                    obj = ev["object"]
                    if ev["type"] == "ERROR":
                        raise RuntimeError(f"watch error: {obj}")
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if ev["type"] != "BOOKMARK":
                        self._record(ev["type"], obj)
            except (OSError, http.client.HTTPException):
                if self._stop.is_set():
                    return
                continue  # resumed from the last resourceVersion seen
            except BaseException as exc:  # surfaced by the test through .error
                self.error = exc
                return
            finally:
                conn.close()

    def stop(self) -> None:
        """Ends the watch at once (a lingering watch would slow the API server's exit)."""
        self._stop.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def history(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return list(self.versions.get(name, []))

    def wait(self, name: str, pred: Callable[[dict[str, Any]], bool], timeout: float = 30.0,
             what: str = "") -> dict[str, Any]:  # fmt: skip
        def seen() -> dict[str, Any] | None:
            assert self.error is None, f"watch failed: {self.error!r}"
            for _, obj in self.history(name):
                if pred(obj):
                    return obj
            return None

        return dict(wait_for(seen, timeout=timeout, what=what or f"{name} in the watch"))

    def first_seen(self, name: str, pred: Callable[[dict[str, Any]], bool]) -> float | None:
        """When the watch first delivered a version of the pod matching `pred`."""
        with self._lock:
            pairs = list(zip(self.versions.get(name, []), self.received.get(name, []), strict=True))
        for (_, obj), t in pairs:
            if pred(obj):
                return t
        return None

    def deleted(self, name: str) -> bool:
        return any(kind == "DELETED" for kind, _ in self.history(name))

    def first_terminating(self, name: str) -> dict[str, Any] | None:
        """The first version of the pod with a deletionTimestamp."""
        for _, obj in self.history(name):
            if obj["metadata"].get("deletionTimestamp"):
                return obj
        return None


class RecordingWebhook(DeleteWebhook):
    """DeleteWebhook that also keeps each (non-kwok, not dry-run) DELETE's oldObject, by pod name:
    the pod exactly as the API server held it when the DELETE came in."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        super().__init__(cluster, namespace)
        self.old_objects: dict[str, list[dict[str, Any]]] = {}
        self.users: dict[str, list[str]] = {}

    def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        req = body["request"]
        user = req.get("userInfo", {}).get("username", "")
        if user != KWOK_USER and not req.get("dryRun"):  # a dry run deletes nothing
            name = req.get("name", "")
            with self._lock:
                self.old_objects.setdefault(name, []).append(req.get("oldObject") or {})
                self.users.setdefault(name, []).append(user)
        return super()._review(body)

    def last_old_object(self, name: str, user: str) -> dict[str, Any] | None:
        """The oldObject of `user`'s last admission call for pod `name`: the state the
        API server's committed update started from. kube-apiserver may call validating
        admission more than once for ONE DELETE request: a graceful delete is an update
        that starts from the watch cache's copy of the pod, and when that copy is stale
        (the client patched the pod a moment before) or the pod changed meanwhile, the
        update is retried from etcd's state and admission runs again (apiserver
        registry Store.updateForGracefulDeletionAndFinalizers inside GuaranteedUpdate).
        The earlier calls then saw an older pod; the last one saw what was deleted."""
        with self._lock:
            mine = [
                old
                for old, who in zip(
                    self.old_objects.get(name, []), self.users.get(name, []), strict=True
                )
                if who == user
            ]
        return mine[-1] if mine else None

    def reset(self) -> None:
        with self._lock:
            self.deletes.clear()
            self.kubelet_deletes.clear()
            self.refused.clear()
            self.dry_runs.clear()
            self.dry_run_refused.clear()
            self.old_objects.clear()
            self.users.clear()
            self.log.clear()
        self.delay = 0.0
        self.refuse = set()
        self.refuse_all = False


# ---------------------------------------------------------------- the brute force


@dataclass(frozen=True)
class BPod:
    name: str
    namespace: str
    priority: int
    requests: dict[str, Any]  # resource -> Decimal
    start: float  # epoch seconds; inf for "no start time"
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BNode:
    name: str
    allocatable: dict[str, Any]  # resource -> Decimal


@dataclass(frozen=True)
class BPDB:
    namespace: str
    selector: dict[str, Any]
    allowed: int
    disrupted: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Choice:
    node: str
    victims: tuple[str, ...]  # most important first
    violations: int
    key: tuple[Any, ...]


def bpod(
    manifest: dict[str, Any], namespace: str, priority: int, start: dt.datetime | None
) -> BPod:
    return BPod(
        name=manifest["metadata"]["name"],
        namespace=namespace,
        priority=priority,
        requests=pod_requests(manifest),
        start=start.timestamp() if start is not None else float("inf"),
        labels=dict(manifest["metadata"].get("labels") or {}),
    )


def bnode(node: dict[str, Any]) -> BNode:
    alloc = {k: quantity(v) for k, v in node["status"]["allocatable"].items()}
    return BNode(node["metadata"]["name"], alloc)


def _fits(preemptor: BPod, node: BNode, pods: Sequence[BPod]) -> bool:
    if len(pods) + 1 > node.allocatable.get("pods", 110):
        return False
    for res, want in preemptor.requests.items():
        used = sum((p.requests.get(res, 0) for p in pods), start=0)
        if used + want > node.allocatable.get(res, 0):
            return False
    return True


def _pdb_split(pods: Sequence[BPod], pdbs: Sequence[BPDB]) -> tuple[list[BPod], list[BPod]]:
    budget = [p.allowed for p in pdbs]
    bad: list[BPod] = []
    good: list[BPod] = []
    for pod in pods:
        violating = False
        for i, pdb in enumerate(pdbs):
            if pdb.namespace != pod.namespace or not pod.labels:
                continue
            if not label_selector_matches(pdb.selector, pod.labels) or pod.name in pdb.disrupted:
                continue
            budget[i] -= 1
            if budget[i] < 0:
                violating = True
        (bad if violating else good).append(pod)
    return bad, good


def victims_on_node(
    preemptor: BPod,
    node: BNode,
    on_node: Sequence[BPod],
    pdbs: Sequence[BPDB] = (),
    evictable: Callable[[BPod], bool] = lambda p: True,
) -> tuple[list[BPod], int] | None:
    """Upstream's rule for one node: remove every lower-priority (evictable) pod; the
    preemptor must fit then; put pods back most important first, PDB-violating ones
    first, keeping each that still lets the preemptor fit. None: no candidate."""
    lower = [p for p in on_node if p.priority < preemptor.priority and evictable(p)]
    if not lower:
        return None
    kept = [p for p in on_node if p not in lower]
    if not _fits(preemptor, node, kept):
        return None
    lower.sort(key=lambda p: (-p.priority, p.start))
    bad, good = _pdb_split(lower, pdbs)
    victims: list[BPod] = []
    violations = 0
    for group, counts in ((bad, True), (good, False)):
        for p in group:
            if _fits(preemptor, node, [*kept, p]):
                kept.append(p)
            else:
                victims.append(p)
                violations += counts
    victims.sort(key=lambda p: (-p.priority, p.start))
    return victims, violations


def choice_key(victims: Sequence[BPod], violations: int) -> tuple[Any, ...]:
    """Smaller is better: pickOneNodeForPreemption's criteria in order."""
    top = max(v.priority for v in victims)
    earliest_top = min(v.start for v in victims if v.priority == top)
    return (
        violations,
        top,
        sum(v.priority + 2**31 for v in victims),
        len(victims),
        -earliest_top,
    )


def brute_force(
    preemptor: BPod,
    nodes: Sequence[BNode],
    pods_by_node: dict[str, list[BPod]],
    pdbs: Sequence[BPDB] = (),
    evictable: Callable[[BPod], bool] = lambda p: True,
) -> list[Choice]:
    """Every candidate node with its victims, best first."""
    out: list[Choice] = []
    for n in nodes:
        res = victims_on_node(preemptor, n, pods_by_node.get(n.name, []), pdbs, evictable)
        if res is None:
            continue
        victims, violations = res
        out.append(
            Choice(
                n.name, tuple(v.name for v in victims), violations, choice_key(victims, violations)
            )
        )
    out.sort(key=lambda c: c.key)
    return out


def unique_best(choices: Sequence[Choice]) -> Choice:
    """The optimum, which a scenario must make unique (no "then any" tie)."""
    assert choices, "the scenario has no candidate node"
    if len(choices) > 1:
        assert choices[0].key != choices[1].key, f"scenario has a tie: {choices[:2]}"
    return choices[0]


def bound(obj: dict[str, Any]) -> bool:
    return bool(obj["spec"].get("nodeName"))


# ---------------------------------------------------------------- DELETE requests
# Counted from the API server's audit log, not from the DELETE webhook: kube-apiserver
# may call the webhook twice for one graceful DELETE, allowed or refused (see
# RecordingWebhook.last_old_object), and not at all for a DELETE of a pod already
# terminating. The audit log has one record per request, with its answer.


def audited_identity(local: LocalCluster, user: str, out: Path) -> str:
    """A kubeconfig for `user`, in the group whose writes the audit policy records
    (tests.faults.audit.policy; start the API server with audit.apiserver_args)."""
    return str(kubeconfig_for(local, user, out, ("system:masters", audit.SCHEDULER_GROUP)))


def delete_requests(log: audit.AuditLog, namespace: str, user: str) -> list[audit.Call]:
    """`user`'s pod DELETE requests in `namespace`, whatever their answer, in the order
    the API server received them."""
    calls = [c for c in log.pod_deletes({namespace}) if c.user == user]
    return sorted(calls, key=lambda c: c.received)


def delete_counts(log: audit.AuditLog, namespace: str, user: str) -> dict[str, int]:
    """`user`'s pod DELETE requests in `namespace`, per pod name."""
    return dict(Counter(c.name for c in delete_requests(log, namespace, user)))


def wait_deletes_audited(
    log: audit.AuditLog, namespace: str, user: str, names: Iterable[str], timeout: float = 10
) -> None:
    """The audit record of a DELETE is written when its response is complete, after the
    update is committed: a victim can be gone a moment before its DELETE is logged."""
    want = set(names)
    wait_for(
        lambda: want <= {c.name for c in delete_requests(log, namespace, user)},
        timeout=timeout,
        what=f"{user}'s DELETEs of {sorted(want)} in the audit log",
    )


def webhook_ends(hook: DeleteWebhook, names: Iterable[str]) -> dict[str, float]:
    """When the webhook answered the (last) DELETE of each pod (time.monotonic())."""
    want = set(names)
    out: dict[str, float] = {}
    for t, pod, what in list(hook.log):
        if what == "end" and pod in want:
            out[pod] = t
    return out
