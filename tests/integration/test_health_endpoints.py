"""/readyz, /healthz, /livez and /metrics of real scheduler processes (the chart's
ServiceAccount and rendered config, leader election on with a 6s/4s/1s lease) while the
API server is taken away:

- /readyz fails ("sched-handler-sync") until the informers have listed, which cannot
  happen while the API server is down; /healthz, /livez and /metrics answer meanwhile;
- /readyz does not depend on leadership: a follower is ready;
- /readyz fails ("shutdown") from the moment SIGTERM arrives until the server closes
  (made observable by a frozen API server: the Lease release then takes renewDeadline);
- /healthz fails when leader election is stuck: the leader steps down and exits (code 1)
  at renewDeadline, and a standby that has had no answer about the Lease for
  leaseDuration + 20 s reports "[-]leaderElection failed"; it recovers, takes the Lease
  and schedules once the API server is back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.helm_release import FAST_LEASE, Release, identity_of, install, lease_holder
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.scheduler_process import SchedulerProcess

pytestmark = pytest.mark.cluster

NS = "kube-async-scheduler"
RELEASE = "kube-async-scheduler"
LEASE_DURATION = 6.0
HEALTHZ_TIMEOUT = 20.0  # kube-scheduler's leader-election healthz tolerance
APISERVER = "kube-apiserver"


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ClusterHandle, Release, Path]]:
    d = tmp_path_factory.mktemp("health")
    local = LocalCluster(d / "cluster")
    local.up([NodeGroup(count=2, name_prefix="h")])
    cluster = ClusterHandle(local)
    try:
        release = install(cluster, RELEASE, NS, "replicas=2", *FAST_LEASE)
        release.write_kubeconfig(d / "sa-kubeconfig")
        release.write_config(d / "config.yaml")
        cluster.create_namespace("work")
        yield cluster, release, d
    finally:
        local.down()


class Pair:
    def __init__(self, cluster: ClusterHandle, release: Release, d: Path, tag: str) -> None:
        self.cluster, self.release, self.d, self.tag = cluster, release, d, tag
        self.procs: list[SchedulerProcess] = []

    def process(self, name: str, wait_ready: bool = True) -> SchedulerProcess:
        p = SchedulerProcess(
            str(self.d / "sa-kubeconfig"),
            self.d / "config.yaml",
            self.d / f"{self.tag}-{name}.log",
        )
        self.procs.append(p.start(wait_ready=wait_ready))
        return p

    def holder(self) -> str:
        return lease_holder(self.cluster, NS, self.release.fullname)

    def leads(self, p: SchedulerProcess, timeout: float = 20) -> str:
        ident = wait_for(lambda: identity_of(p.log_path), timeout=timeout, what="identity")
        wait_for(lambda: self.holder() == ident, timeout=timeout,
                 what=f"{ident} leads\n{p.tail()}")  # fmt: skip
        return str(ident)

    def bound(self, name: str, p: SchedulerProcess) -> str:
        self.cluster.create_pod("work", pod_manifest(name))
        return str(wait_for(
            lambda: ((self.cluster.get_pod("work", name) or {}).get("spec") or {}).get("nodeName"),
            timeout=30, what=f"{name} bound\n{p.tail()}",
        ))  # fmt: skip

    def stop(self) -> None:
        for p in self.procs:
            p.stop()


@pytest.fixture
def pair(
    setup: tuple[ClusterHandle, Release, Path], request: pytest.FixtureRequest
) -> Iterator[Pair]:
    cluster, release, d = setup
    pr = Pair(cluster, release, d, request.node.name[:40])
    try:
        yield pr
    finally:
        pr.stop()
        # whatever happened, leave the API server running and not frozen
        pid = cluster.local.state.pids.get(APISERVER) if cluster.local.state else None
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if not cluster.local.running().get(APISERVER):
            cluster.local.start_component(APISERVER)


def _get(p: SchedulerProcess, path: str) -> tuple[int, str]:
    try:
        return p.get(path)
    except OSError as exc:  # not listening (yet, or any more)
        return -1, repr(exc)


def test_readyz_waits_for_the_caches_is_ready_on_followers_and_fails_during_shutdown(
    pair: Pair,
) -> None:
    local = pair.cluster.local
    # --- no API server: the informers cannot list, so not ready; alive and scraped
    local.stop_component(APISERVER, sig=signal.SIGKILL)
    a = pair.process("a", wait_ready=False)
    wait_for(lambda: _get(a, "/readyz")[0] != -1, timeout=15, what="a's server up")
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        status, body = _get(a, "/readyz?verbose")
        assert status == 500, body
        # the body is public: the reason is withheld there and logged (healthz.go)
        assert "[-]sched-handler-sync failed: reason withheld" in body
        assert "waiting for handlers" not in body
        assert "[+]shutdown ok" in body and body.endswith("readyz check failed\n")
        assert _get(a, "/healthz") == (200, "ok") and _get(a, "/livez") == (200, "ok")
        time.sleep(0.2)
    assert "[-]sched-handler-sync failed: waiting for handlers to sync" in a.log_path.read_text()
    # the admin's client certificate is checked against --client-ca-file and
    # system:masters needs no review: /metrics answers without the API server
    status, text = _get(a, "/metrics")
    assert status == 200 and 'scheduler_pending_pods{queue="active"} 0.0' in text
    assert a.proc is not None and a.proc.poll() is None
    assert identity_of(a.log_path) == ""  # no election before the caches have synced

    local.start_component(APISERVER)
    a.wait_ready(timeout=30)
    id_a = pair.leads(a)

    # --- a follower is ready: readiness is about caches, not about the Lease
    b = pair.process("b")
    status, body = _get(b, "/readyz?verbose")
    assert status == 200, body
    assert "[+]sched-handler-sync ok" in body and "[+]leaderElection ok" in body
    assert pair.holder() == id_a and b.metric("scheduler_leader_election_is_leader") == 0
    pair.bound("ready-1", a)
    assert b.metric("scheduler_schedule_attempts_total") == 0

    # --- shutdown: not ready from SIGTERM on. Freeze the API server so that the
    # Lease release hangs for renewDeadline and the window can be watched.
    pid = local.state.pids[APISERVER] if local.state else 0
    os.kill(pid, signal.SIGSTOP)
    try:
        assert a.proc is not None
        a.proc.send_signal(signal.SIGTERM)
        answers: list[tuple[int, str]] = []
        while a.proc.poll() is None:
            answers.append(_get(a, "/readyz?verbose"))
            assert _get(b, "/readyz")[0] == 200  # the follower stays ready throughout
            time.sleep(0.1)
        served = [ans for ans in answers if ans[0] != -1]
        assert len(served) >= 10, answers  # about renewDeadline (4s) of shutdown
        for status, body in served:
            assert status == 500, body
            assert "[-]shutdown failed: reason withheld" in body
        assert a.proc.returncode == 0, a.tail()
    finally:
        os.kill(pid, signal.SIGCONT)
    assert "could not release leader lease" in a.log_path.read_text()

    # the release never reached the API server: b takes over once the lease expired
    id_b = pair.leads(b, timeout=LEASE_DURATION + 10)
    assert id_b != id_a
    pair.bound("ready-2", b)


def test_healthz_fails_when_leader_election_is_stuck_past_lease_plus_timeout(pair: Pair) -> None:
    local = pair.cluster.local
    a = pair.process("a")
    id_a = pair.leads(a)
    b = pair.process("b")
    assert pair.holder() == id_a
    assert _get(b, "/healthz?verbose") == (
        200,
        "[+]ping ok\n[+]background-tasks ok\n[+]leaderElection ok\nhealthz check passed\n",
    )  # fmt: skip

    stopped = time.monotonic()
    local.stop_component(APISERVER, sig=signal.SIGKILL)
    # the leader cannot renew: it stops leading at renewDeadline and exits 1
    assert a.proc is not None
    wait_for(lambda: a.proc is not None and a.proc.poll() is not None, timeout=15,
             what=f"the leader exits\n{a.tail()}")  # fmt: skip
    assert a.proc.returncode == 1
    assert "failed to renew leader lease in time" in a.log_path.read_text()

    # the standby: healthy for leaseDuration + 20 s without an answer, then not
    first_failure = None
    while time.monotonic() - stopped < LEASE_DURATION + HEALTHZ_TIMEOUT + 8:
        status, body = _get(b, "/healthz?verbose")
        if status != 200:
            first_failure = time.monotonic() - stopped
            break
        time.sleep(0.25)
    assert first_failure is not None, "the standby never reported stuck leader election"
    # its last answer came at most one jittered retry period (up to 2.2 s) before
    assert first_failure >= LEASE_DURATION + HEALTHZ_TIMEOUT - 3.5, f"{first_failure:.1f}s"
    assert status == 500
    assert "[-]leaderElection failed: reason withheld" in body, body
    assert body.endswith("healthz check failed\n")
    logged = b.log_path.read_text()
    assert (
        f"[-]leaderElection failed: leader election has had no answer about lease "
        f"{NS}/{pair.release.fullname} for " in logged
    )
    assert "last error: " in logged
    assert _get(b, "/livez")[0] == 500 and _get(b, "/readyz")[0] == 500
    assert b.proc is not None and b.proc.poll() is None

    # the API server is back: healthy again, takes over and schedules
    local.start_component(APISERVER)
    wait_for(lambda: _get(b, "/healthz")[0] == 200, timeout=15, what="b healthy again")
    id_b = pair.leads(b)
    assert id_b != id_a
    pair.bound("stuck-1", b)
    assert _get(b, "/readyz")[0] == 200
