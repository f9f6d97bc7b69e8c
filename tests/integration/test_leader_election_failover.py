"""Two scheduler processes with leader election, as the chart's replicas=2 runs them (its
ServiceAccount token, its rendered configuration with a 6s/4s/1s lease), against the
real API server, while pods keep arriving:

- exactly one schedules: the Lease holder; the other's attempts stay at zero and it is
  ready all the same;
- SIGTERM to the leader: it releases the Lease and the other takes over within about a
  retry period, far less than the lease duration;
- a restarted process joins as a follower; SIGKILL to the leader: no release, so the
  other takes over only once the lease has expired;
- every pod of the stream ends bound; no pod has two Scheduled events, and no binding
  was ever refused as a conflict; the Scheduled events of the three leaders come in
  three disjoint time ranges, in order; no node is over-committed (tests/checker.py).
"""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.checker import check
from tests.helm_release import FAST_LEASE, Release, identity_of, install, lease_holder
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess

pytestmark = pytest.mark.cluster

NS = "kube-async-scheduler"
RELEASE = "kube-async-scheduler"
SCHED = "kube-async-scheduler"
WORK = "stream"
LEASE_DURATION = 6.0
# 4 x 6 cpu = 120 pods of 200m; the stream stops at 100
NODES = [NodeGroup(count=4, name_prefix="fo", cpu="6", memory="64Gi")]
POD_CPU = "200m"
MAX_PODS = 100


class PodStream:
    """Creates a pod every `interval` seconds in a thread until stopped (or MAX_PODS)."""

    def __init__(self, cluster: ClusterHandle, interval: float = 0.15) -> None:
        self.cluster = cluster
        self.interval = interval
        self.created: dict[str, float] = {}  # name -> time.monotonic() when created
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-stream", daemon=True)

    def start(self) -> PodStream:
        self._thread.start()
        return self

    def _run(self) -> None:
        admin = self.cluster.admin
        i = 0
        while not self._stop.is_set() and i < MAX_PODS:
            name = f"p-{i:03d}"
            status, out = admin.request(
                "POST", f"/api/v1/namespaces/{WORK}/pods", pod_manifest(name, cpu=POD_CPU)
            )
            if status == 201:
                self.created[name] = time.monotonic()
            else:
                self.errors.append(f"{name}: HTTP {status} {out}")
            i += 1
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture(scope="module")
def chart_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ClusterHandle, Release, Path]]:
    d = tmp_path_factory.mktemp("failover")
    local = LocalCluster(d / "cluster")
    local.up(NODES)
    cluster = ClusterHandle(local)
    try:
        release = install(cluster, RELEASE, NS, "replicas=2", *FAST_LEASE)
        yield cluster, release, d
    finally:
        local.down()


def _scheduled_events(cluster: ClusterHandle) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.events(WORK)
        if e["reason"] == "Scheduled" and e.get("reportingController") == SCHED
    ]


def _event_time(e: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00"))


def _conflicts(p: SchedulerProcess) -> float:
    return p.metric("scheduler_api_requests_total", resource="pods/binding", code="409")


def test_one_leader_then_release_on_sigterm_then_expiry_after_sigkill(
    chart_cluster: tuple[ClusterHandle, Release, Path],
) -> None:
    cluster, release, d = chart_cluster
    kubeconfig = str(release.write_kubeconfig(d / "sa-kubeconfig"))
    config = release.write_config(d / "config.yaml")
    lease = release.fullname

    def start(name: str) -> tuple[SchedulerProcess, str]:
        p = SchedulerProcess(kubeconfig, config, d / f"{name}.log").start()
        return p, wait_for(lambda: identity_of(p.log_path), timeout=10, what=f"{name} identity")

    def holder() -> str:
        return lease_holder(cluster, NS, lease)

    def renew_time() -> str:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{lease}"
        return str(cluster.api("GET", path)["spec"].get("renewTime"))

    def scheduled(p: SchedulerProcess) -> float:
        return p.metric("scheduler_schedule_attempts_total", result="scheduled")

    cluster.create_namespace(WORK)
    a, id_a = start("a")
    procs = [a]
    stream = PodStream(cluster)
    try:
        wait_for(lambda: holder() == id_a, timeout=15, what="a leads")
        b, id_b = start("b")
        procs.append(b)
        stream.start()

        # --- one leader: a schedules, b is a ready follower that schedules nothing
        wait_for(lambda: scheduled(a) >= 10, timeout=30, what=f"a schedules\n{a.tail()}")
        assert holder() == id_a
        assert scheduled(b) == 0 and b.metric("scheduler_schedule_attempts_total") == 0
        assert (a.metric("scheduler_leader_election_is_leader"),
                b.metric("scheduler_leader_election_is_leader")) == (1, 0)  # fmt: skip
        assert b.get("/readyz")[0] == 200 and b.get("/healthz")[0] == 200
        conflicts = _conflicts(a)

        # --- SIGTERM: the leader releases, the follower takes over on its next poll
        term_at = time.monotonic()
        assert a.stop(signal.SIGTERM) == 0, a.tail()
        wait_for(lambda: holder() == id_b, timeout=LEASE_DURATION, interval=0.05,
                 what=f"b takes over after a's SIGTERM\n{b.tail()}")  # fmt: skip
        handover = time.monotonic() - term_at
        # b polls every retryPeriod * (1 + 1.2 * jitter), at most 2.2 s
        assert handover < 3.5, f"took {handover:.1f}s: was the lease released?"
        assert "released leader lease" in a.log_path.read_text()
        wait_for(lambda: scheduled(b) >= 5, timeout=20, what=f"b schedules\n{b.tail()}")
        assert b.metric("scheduler_leader_election_is_leader") == 1

        # --- a restarted process is a follower; SIGKILL the leader: wait out the lease
        a2, id_a2 = start("a2")
        procs.append(a2)
        assert id_a2 not in (id_a, id_b)
        wait_for(lambda: a2.get("/readyz")[0] == 200, timeout=10, what="a2 ready")
        # b is alive and renewing right up to the kill
        renewed = renew_time()
        wait_for(lambda: renew_time() != renewed, timeout=5, what="b renews the Lease")
        assert holder() == id_b and scheduled(a2) == 0
        assert a2.metric("scheduler_leader_election_is_leader") == 0
        conflicts += _conflicts(b)
        kill_at = time.monotonic()
        b.stop(signal.SIGKILL)
        wait_for(lambda: holder() == id_a2, timeout=LEASE_DURATION + 6, interval=0.05,
                 what=f"a2 takes over after b's SIGKILL\n{a2.tail()}")  # fmt: skip
        takeover = time.monotonic() - kill_at
        # b's last renewal was at most a retry period (1 s) before the kill, and a2 may
        # take the lease only leaseDuration after it saw that renewal; it sees it, and
        # then finds it expired, on polls up to 2.2 s apart
        assert LEASE_DURATION - 2.0 <= takeover <= LEASE_DURATION + 5.0, f"{takeover:.1f}s"
        wait_for(lambda: scheduled(a2) >= 5, timeout=20, what=f"a2 schedules\n{a2.tail()}")
    finally:
        stream.stop()
    assert stream.errors == []
    created = stream.created
    assert len(created) >= 40, "the stream did not span the failovers"

    def all_bound() -> bool:
        pods = cluster.list_pods(WORK)
        return len(pods) == len(created) and all(p["spec"].get("nodeName") for p in pods)

    try:
        wait_for(all_bound, timeout=60, interval=0.5, what=f"every pod bound\n{a2.tail()}")
        conflicts += _conflicts(a2)
    finally:
        for p in procs:
            p.stop()
    assert conflicts == 0, "a bind was refused as already bound: two schedulers raced"

    # the Lease changed hands exactly twice (a -> b -> a2)
    spec = cluster.api("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{lease}")[
        "spec"
    ]
    assert spec["leaseTransitions"] == 2

    pods = {p["metadata"]["name"]: p for p in cluster.list_pods(WORK)}
    events = _scheduled_events(cluster)
    per_pod: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        per_pod[e["regarding"]["name"]].append(e)
    for name, evs in per_pod.items():
        assert len(evs) == 1 and not evs[0].get("series"), f"{name} scheduled twice: {evs}"
        node = pods[name]["spec"]["nodeName"]
        assert evs[0]["note"] == f"Successfully assigned {WORK}/{name} to {node}"
        assert evs[0]["regarding"]["uid"] == pods[name]["metadata"]["uid"]
    # a SIGKILL may lose the event of a bind b made in its last moment, nothing else
    missing = sorted(set(pods) - set(per_pod))
    assert len(missing) <= 3 and all(created[m] < kill_at for m in missing), missing

    by_leader: dict[str, list[dt.datetime]] = defaultdict(list)
    for e in events:
        by_leader[e["reportingInstance"]].append(_event_time(e))
    assert set(by_leader) == {id_a, id_b, id_a2}
    spans = [(min(by_leader[i]), max(by_leader[i])) for i in (id_a, id_b, id_a2)]
    assert spans[0][1] < spans[1][0] and spans[1][1] < spans[2][0], f"overlapping: {spans}"

    report = check(cluster.list_pods(), cluster.api("GET", "/api/v1/nodes")["items"], {}, SCHED)
    assert report.violations == []
    assert report.bound == len(created) and report.pending == 0
