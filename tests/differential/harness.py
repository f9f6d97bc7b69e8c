"""The differential oracle: upstream kube-scheduler and this scheduler decide the same
pods on the same real cluster, and nothing they decide changes the cluster.

Per scenario: namespaces, nodes, existing pods bound through pods/binding (by the harness,
whose binds the webhook lets through), then a sync sentinel: a pod pair that only the
last-created node can take. When both schedulers have tried to bind it, each has seen
every node (one watch, in order) and every existing pod (created before the sentinel, on
the same pod watch). Then each incoming pod is created twice, once per schedulerName, and
the outcome of each copy is read: the node of its first bind (recorded and refused by the
webhook, so the state never changes), or its PodScheduled=False condition; the victims of
a preemption are the DELETEs the webhook recorded (also refused), and the per-node final
scores come from each scheduler's log.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.differential import scenario as sc
from tests.differential.processes import OURS, UPSTREAM, Ours, Upstream
from tests.differential.recorder import Recorder
from tests.identity import kubeconfig_for
from tests.kube import ClusterHandle

DECISION_TIMEOUT = 60.0
# a pod annotated so is decided by upstream first, then by ours (see decide)
SEQUENTIAL = "oracle.kas.io/sequential"
# where scenario.storage objects are created (kind -> collection path; {ns} namespaced)
STORAGE_PATHS = {
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "CSIDriver": "/apis/storage.k8s.io/v1/csidrivers",
    "CSINode": "/apis/storage.k8s.io/v1/csinodes",
    "PersistentVolume": "/api/v1/persistentvolumes",
    "PersistentVolumeClaim": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    "CSIStorageCapacity": "/apis/storage.k8s.io/v1/namespaces/{ns}/csistoragecapacities",
}
# after a preemptor's condition is written, how long its victims' DELETEs may take to
# arrive (both schedulers send them from background tasks)
VICTIM_SETTLE = 3.0


@dataclass
class Decision:
    scheduler: str
    pod: str  # ns/name of this scheduler's copy
    node: str | None = None  # where it tried to bind the pod
    reason: str | None = None  # PodScheduled=False reason (Unschedulable, SchedulingGated)
    message: str | None = None
    nominated: str = ""
    victims: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)
    plugin_scores: dict[str, dict[str, int]] = field(default_factory=dict)
    timed_out: bool = False
    processed: int | None = None  # nodes searched, as ours logs it (upstream: not logged)
    # preemption: candidate node -> its victims (ns/name), from the scheduler's log;
    # ours also logs each candidate's PDB violations
    candidates: dict[str, list[str]] = field(default_factory=dict)
    pdb_violations: dict[str, int] = field(default_factory=dict)

    @property
    def feasible(self) -> set[str] | None:
        """Nodes that passed Filter, when the decision shows them: the scored nodes, the
        one node bound without scoring, or none for an unschedulable pod."""
        if self.scores:
            return set(self.scores)
        if self.node is not None:
            return {self.node}
        if self.reason == "Unschedulable":
            return set()
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "reason": self.reason,
            "message": self.message,
            "nominated": self.nominated,
            "victims": self.victims,
            "scores": self.scores,
            "plugin_scores": self.plugin_scores,
            "timed_out": self.timed_out,
            "candidates": self.candidates,
            "pdb_violations": self.pdb_violations,
        }


@dataclass
class PodResult:
    scenario: int
    name: str
    priority_class: str
    upstream: Decision | None
    ours: Decision | None
    refused: str = ""  # the API server refused the manifest (a generator mistake)


def _ok(status: int, body: Any, what: str) -> None:
    if status >= 300 and status != 409:
        raise AssertionError(f"{what}: HTTP {status}: {body}")


class Oracle:
    """Both schedulers on `cluster` (which should have no nodes of its own)."""

    def __init__(
        self,
        cluster: ClusterHandle,
        workdir: Path,
        sampling: bool = False,
        gates: list[str] | None = None,
        backoff: int = 0,
    ) -> None:
        """`gates`: --feature-gates flags both schedulers get (the same for both);
        `backoff`: both schedulers' pod backoff, in seconds (0: the run's default)."""
        self.cluster = cluster
        self.workdir = workdir
        local = cluster.local
        self.recorder = Recorder(cluster, (UPSTREAM, OURS))
        self.upstream = Upstream(
            cluster.bin_dir,
            kubeconfig_for(local, UPSTREAM, local.dir / "oracle"),
            workdir,
            sampling,
            gates,
            backoff,
        )
        self.ours = Ours(
            kubeconfig_for(local, OURS, local.dir / "oracle"), workdir, sampling, gates, backoff
        )
        self._api = cluster.local.admin(timeout=30)
        self._previous: sc.Scenario | None = None
        # ns/name -> status.startTime of the existing pods (tie scenarios)
        self.start_times: dict[str, str] = {}

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self._cluster_objects()
        self.recorder.start()
        self.upstream.start()
        self.ours.start()

    def stop(self) -> None:
        self.ours.stop()
        self.upstream.stop()
        self.recorder.stop()

    def _req(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> Any:
        status, out = self._api.request(method, path, body, ctype)
        _ok(status, out, f"{method} {path}")
        return out

    def _cluster_objects(self) -> None:
        for name, (value, policy) in sc.PRIORITY_CLASSES.items():
            self._req(
                "POST",
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {
                    "metadata": {"name": name},
                    "value": value,
                    "preemptionPolicy": policy,
                },
            )
        self._req(
            "POST",
            "/apis/node.k8s.io/v1/runtimeclasses",
            {
                "metadata": {"name": sc.RUNTIME_CLASS},
                "handler": "runc",
                "overhead": {"podFixed": sc.RUNTIME_OVERHEAD},
            },
        )

    def _check_alive(self) -> None:
        if not self.upstream.alive():
            raise AssertionError(f"upstream kube-scheduler exited; see {self.upstream.log_path}")
        if not self.ours.alive():
            raise AssertionError(f"kube-async-scheduler exited; see {self.ours.log_path}")

    # ---- scenario setup ----------------------------------------------------------------
    def _teardown_previous(self) -> None:
        prev = self._previous
        if prev is None:
            return
        for ns in prev.namespaces:
            name = ns["metadata"]["name"]
            self._api.request("DELETE", f"/api/v1/namespaces/{name}/pods?gracePeriodSeconds=0")
        for ns in prev.namespaces:
            name = ns["metadata"]["name"]
            deadline = time.monotonic() + 60
            while True:
                status, body = self._api.request("GET", f"/api/v1/namespaces/{name}/pods")
                if status == 200 and not body.get("items"):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"pods of {name} not gone after 60s")
                time.sleep(0.1)
            self._api.request("DELETE", f"/api/v1/namespaces/{name}")
        for node in prev.nodes:
            self._api.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
        for obj in prev.storage:  # cluster-scoped ones; the rest went with the namespaces
            path = STORAGE_PATHS[obj["kind"]]
            if "{ns}" not in path:
                self._api.request("DELETE", f"{path}/{obj['metadata']['name']}")
        self._previous = None

    def _create_node(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        self._req("POST", "/api/v1/nodes", node)
        # kwok may initialise the node in between: write the status again
        self._req(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            {"status": node["status"]},
            "application/merge-patch+json",
        )

    def _create_existing(self, pod: dict[str, Any]) -> None:
        body = {**pod, "spec": {**pod["spec"], "schedulerName": "oracle-none"}}
        node = body["spec"].pop("nodeName")
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self._req("POST", f"/api/v1/namespaces/{ns}/pods", body)
        self._req(
            "POST",
            f"/api/v1/namespaces/{ns}/pods/{name}/binding",
            {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}},
        )

    def forget_scenario(self) -> None:
        """After a failed scenario: its objects are removed with the next setup."""
        self._check_alive()

    def setup(self, scenario: sc.Scenario) -> None:
        self._teardown_previous()
        self._previous = scenario  # removed next time even if this setup fails
        self.recorder.clear()
        for ns in scenario.namespaces:
            self._req("POST", "/api/v1/namespaces", ns)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(self._create_node, scenario.nodes[:-1]))
            # existing pods' bindings go out after every node but the sentinel exists
            self._create_node(scenario.nodes[-1])
            self._create_storage(scenario)
            list(pool.map(self._create_existing, scenario.existing))
        self.start_times = {}
        if scenario.ties:
            self._play_history(scenario)
        self._sync(scenario)

    def _pods_of(self, scenario: sc.Scenario) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for ns in scenario.namespaces:
            name = ns["metadata"]["name"]
            for pod in self._req("GET", f"/api/v1/namespaces/{name}/pods").get("items") or []:
                out[f"{name}/{pod['metadata']['name']}"] = pod
        return out

    def _play_history(self, scenario: sc.Scenario) -> None:
        """Tie scenarios: once kwok runs every existing pod (it writes the phase and a
        startTime), replay the scenario's history one step at a time (each is one pod
        update or delete, seen in this order by both schedulers), create its PDBs and
        wait for the disruption controller's status, and note every pod's start time."""
        keys = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in scenario.existing}
        deadline = time.monotonic() + DECISION_TIMEOUT
        while True:
            pods = self._pods_of(scenario)
            if all((pods.get(k) or {}).get("status", {}).get("startTime") for k in keys):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"scenario {scenario.index}: existing pods never started")
            time.sleep(0.1)
        for step in scenario.history:
            ns, name = step["pod"].split("/")
            path = f"/api/v1/namespaces/{ns}/pods/{name}"
            if step["op"] == "start":
                self._req(
                    "PATCH",
                    f"{path}/status",
                    {"status": {"startTime": step["time"]}},
                    "application/merge-patch+json",
                )
            elif step["op"] == "label":
                self._req(
                    "PATCH",
                    path,
                    {"metadata": {"labels": step["labels"]}},
                    "application/merge-patch+json",
                )
            else:
                self._delete_pod(ns, name)
        for pdb in scenario.pdbs:
            ns = pdb["metadata"]["namespace"]
            path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
            self._req("POST", path, pdb)
            while True:
                got = self._req("GET", f"{path}/{pdb['metadata']['name']}")
                status = got.get("status") or {}
                if status.get("observedGeneration") == got["metadata"].get("generation"):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"scenario {scenario.index}: PDB status never written")
                time.sleep(0.1)
        for key, pod in self._pods_of(scenario).items():
            start = pod.get("status", {}).get("startTime")
            if start:
                self.start_times[key] = start

    def _create_storage(self, scenario: sc.Scenario) -> None:
        """Create the scenario's storage objects, then wait for the PV controller: every
        PV Available or Bound, every pre-bound claim Bound, so both schedulers decide on
        a settled state (a PV still Pending matches no claim)."""
        for obj in scenario.storage:
            ns = obj["metadata"].get("namespace", "")
            self._req("POST", STORAGE_PATHS[obj["kind"]].format(ns=ns), obj)
        deadline = time.monotonic() + DECISION_TIMEOUT
        pvs = {o["metadata"]["name"] for o in scenario.storage if o["kind"] == "PersistentVolume"}
        for obj in scenario.storage:
            if obj["kind"] == "PersistentVolume":
                path = f"/api/v1/persistentvolumes/{obj['metadata']['name']}"
                ok = ("Available", "Bound")
            elif obj["kind"] == "PersistentVolumeClaim" and obj["spec"].get("volumeName") in pvs:
                meta = obj["metadata"]
                path = (
                    f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}"
                )
                ok = ("Bound",)
            else:
                continue
            while (self._req("GET", path).get("status") or {}).get("phase") not in ok:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{path} not {'/'.join(ok)} after {DECISION_TIMEOUT}s")
                time.sleep(0.05)

    def _sync(self, scenario: sc.Scenario) -> None:
        ns = scenario.namespaces[0]["metadata"]["name"]
        names = {}
        for sched in (UPSTREAM, OURS):
            name = f"{scenario.prefix}-sentinel-{sched.split('-')[1]}"
            names[sched] = name
            self._req(
                "POST",
                f"/api/v1/namespaces/{ns}/pods",
                {
                    "metadata": {"name": name},
                    "spec": {
                        "schedulerName": sched,
                        "containers": [{"name": "c", "image": "busybox:1.36"}],
                        "nodeSelector": {sc.SENTINEL_LABEL: scenario.prefix},
                        "tolerations": [{"operator": "Exists"}],
                    },
                },
            )
        deadline = time.monotonic() + DECISION_TIMEOUT
        while any(self.recorder.bind_of(s, f"{ns}/{n}") is None for s, n in names.items()):
            self._check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"scenario {scenario.index}: sentinel pods never bound")
            time.sleep(0.05)
        for name in names.values():
            self._delete_pod(ns, name)

    def _delete_pod(self, ns: str, name: str) -> None:
        self._api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
        deadline = time.monotonic() + 30
        while self._api.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")[0] != 404:
            if time.monotonic() > deadline:
                raise AssertionError(f"pod {ns}/{name} not gone after 30s")
            time.sleep(0.05)

    # ---- deciding ----------------------------------------------------------------------
    def decide(self, scenario: sc.Scenario, pod: dict[str, Any]) -> PodResult:
        if (pod["metadata"].get("annotations") or {}).get(SEQUENTIAL) == "true":
            # one copy after the other: neither sees the other's nomination (a pod
            # that preempts for a claim both copies use, tests/differential/volumes.py)
            first = self._decide(scenario, pod, (UPSTREAM,))
            if first.refused:
                return first
            second = self._decide(scenario, pod, (OURS,))
            return PodResult(
                first.scenario, first.name, first.priority_class, first.upstream, second.ours
            )
        return self._decide(scenario, pod, (UPSTREAM, OURS))

    def _decide(
        self, scenario: sc.Scenario, pod: dict[str, Any], scheds: tuple[str, ...]
    ) -> PodResult:
        ns, base = pod["metadata"]["namespace"], pod["metadata"]["name"]
        copies = {s: f"{base}-{'u' if s == UPSTREAM else 'o'}" for s in scheds}
        for sched, name in copies.items():
            self.recorder.forget_volume_writes(sched, _claims(pod, name))
        victims_before = {s: len(self.recorder.victims_of(s)) for s in copies}
        could_preempt = pod["spec"].get("priorityClassName") == "oracle-high"
        for sched, name in copies.items():
            body = {
                **pod,
                "metadata": {**pod["metadata"], "name": name},
                "spec": {**pod["spec"], "schedulerName": sched},
            }
            status, out = self._api.request("POST", f"/api/v1/namespaces/{ns}/pods", body)
            if status == 422 and sched == scheds[0]:
                # the generator wrote something the API server refuses: nobody decides it
                return PodResult(scenario.index, base, "", None, None, refused=str(out))
            _ok(status, out, f"POST pod {ns}/{name}")
        decisions = {s: Decision(s, f"{ns}/{n}") for s, n in copies.items()}
        self._victims_seen: dict[str, int] = {}
        self._victims_changed: dict[str, float] = {}
        written_at: dict[str, float] = {}
        deadline = time.monotonic() + DECISION_TIMEOUT
        pending = set(copies)
        while pending:
            self._check_alive()
            for sched in sorted(pending):
                d = decisions[sched]
                node = self.recorder.bind_of(sched, d.pod)
                if node is None:  # a refused PreBind write names the node it chose
                    node = self.recorder.volume_write_of(sched, _claims(pod, copies[sched]))
                if node is not None:
                    d.node = node
                    pending.discard(sched)
                    continue
                if sched not in written_at:
                    status, body = self._api.request(
                        "GET", f"/api/v1/namespaces/{ns}/pods/{copies[sched]}"
                    )
                    if status == 200:
                        cond = next(
                            (
                                c
                                for c in body.get("status", {}).get("conditions") or []
                                if c.get("type") == "PodScheduled" and c.get("status") == "False"
                            ),
                            None,
                        )
                        if cond is not None and cond.get("reason") in (
                            "Unschedulable",
                            "SchedulingGated",
                        ):
                            d.reason = cond.get("reason")
                            d.message = cond.get("message", "")
                            d.nominated = body.get("status", {}).get("nominatedNodeName", "")
                            written_at[sched] = time.monotonic()
                if sched in written_at and (
                    not could_preempt or self._settled(sched, written_at[sched], victims_before)
                ):
                    pending.discard(sched)
            if pending and time.monotonic() > deadline:
                for sched in pending:
                    decisions[sched].timed_out = True
                break
            if pending:
                time.sleep(0.05)
        for sched, d in decisions.items():
            d.victims = self.recorder.victims_of(sched)[victims_before[sched] :]
            log = self.upstream.scores if sched == UPSTREAM else self.ours.scores
            d.scores = log.scores_of(d.pod)
            d.plugin_scores = log.plugin_scores_of(d.pod)
            d.processed = log.processed_of(d.pod)
            d.candidates = log.candidates_of(d.pod)
            d.pdb_violations = log.violations_of(d.pod)
        for name in copies.values():
            self._delete_pod(ns, name)
        return PodResult(
            scenario.index,
            base,
            str(pod["spec"].get("priorityClassName", "")),
            decisions.get(UPSTREAM),
            decisions.get(OURS),
        )

    def _settled(self, sched: str, written: float, before: dict[str, int]) -> bool:
        """An unschedulable verdict is final once the victims (if any) have stopped
        arriving: a preemption's DELETEs follow its status write from a background task."""
        n = len(self.recorder.victims_of(sched)) - before[sched]
        now = time.monotonic()
        if n != self._victims_seen.get(sched, 0):
            self._victims_seen[sched] = n
            self._victims_changed[sched] = now
        last = max(written, self._victims_changed.get(sched, written))
        return now - last >= VICTIM_SETTLE

    def run(
        self, scenario: sc.Scenario, on_pod: Callable[[PodResult], None] | None = None
    ) -> list[PodResult]:
        self.setup(scenario)
        out = []
        for pod in scenario.incoming:
            r = self.decide(scenario, pod)
            out.append(r)
            if on_pod is not None:
                on_pod(r)
        return out


def _claims(pod: dict[str, Any], name: str) -> list[str]:
    """Keys of the claims the copy `name` of `pod` uses (generic ephemeral included)."""
    ns = pod["metadata"]["namespace"]
    out = []
    for v in pod["spec"].get("volumes") or []:
        if "persistentVolumeClaim" in v:
            out.append(f"{ns}/{v['persistentVolumeClaim']['claimName']}")
        elif "ephemeral" in v:
            out.append(f"{ns}/{name}-{v['name']}")
    return out
