"""The leader SIGSTOPped past its lease, with two replicas, while pods keep arriving.

Replica a leads and binds; it is frozen (SIGSTOP) while a renewal of its Lease is in
flight (renewals are slowed at an admission webhook to make that moment observable),
with pods arriving all the time.
b must take the Lease once it has expired and carry on. Then a is thawed (SIGCONT): its
clock has jumped past its renew deadline, and whatever it had queued or in flight it
must not bind anything any more: it is no longer the leader.

Invariants (audit log): no binding request from a received after SIGCONT; no pod bound
twice; no bind refused as a conflict; exactly one leader change; every pod of the
stream bound; no node over-committed."""

from __future__ import annotations

import os
import signal
import threading
import time

from kas_dev.cluster.nodes import NodeGroup
from tests.faults import invariants
from tests.faults.harness import FAST_LEASE, PRODUCTION_LEASE, Bed, SchedulerSettings, wait_until
from tests.faults.lease_webhook import LeaseDelayWebhook
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult
from tests.kube import pod_manifest

NS = "stream"


class PodStream:
    """Creates a pod every `interval` seconds in a thread until stopped."""

    def __init__(self, bed: Bed, interval: float) -> None:
        self.bed = bed
        self.interval = interval
        self.created: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-stream", daemon=True)

    def start(self) -> PodStream:
        self._thread.start()
        return self

    def _run(self) -> None:
        admin = self.bed.local.admin(timeout=30)
        i = 0
        while not self._stop.is_set():
            name = f"s-{i:05d}"
            status, out = admin.request(
                "POST", f"/api/v1/namespaces/{NS}/pods", pod_manifest(name, cpu="25m")
            )
            if status == 201:
                self.created.append(name)
            else:
                self.errors.append(f"{name}: HTTP {status} {out}")
            i += 1
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def run(ctx: RunContext, result: CaseResult) -> None:
    lease = PRODUCTION_LEASE if ctx.full else FAST_LEASE
    settings = SchedulerSettings(lease=lease)
    # 4 x 8 cpu hold 1280 pods of 25m: far more than the stream makes. The stream is
    # fast so that a wakes to a backlog of pods it saw arrive while frozen
    bed = Bed(ctx.workdir, [NodeGroup(count=4, name_prefix="lp", cpu="8", memory="64Gi")], ctx.say)
    stream: PodStream | None = None
    lease_hook: LeaseDelayWebhook | None = None
    try:
        bed.namespace(NS)
        a = bed.start_scheduler("a", settings)
        met, _ = wait_until(
            lambda: a.identity() and bed.lease().get("holderIdentity") == a.identity(),
            30 + lease.duration,
        )
        if not result.check("a leads", met, f"lease: {bed.lease()}"):
            return
        # every renewal of the Lease waits half a retry period at admission, so the
        # leader can be frozen with a renewal in flight: on waking it receives a success
        # for a request sent long ago, which must not count as a fresh renewal
        lease_hook = LeaseDelayWebhook(bed, delay=lease.retry_period / 2).start()
        if not result.check(
            "renewals pass the Lease webhook", lease_hook.wait_active(30 + lease.duration)
        ):
            return
        b = bed.start_scheduler("b", settings)
        transitions0 = int(bed.lease().get("leaseTransitions") or 0)
        stream = PodStream(bed, interval=0.08).start()

        def binds_by(user: str) -> int:
            return sum(1 for c in bed.audit.binds({NS}) if c.ok and c.user == user)

        wait_until(lambda: binds_by(a.user) >= 5, 30)
        met, _ = wait_until(lambda: lease_hook.renewing(a.user), 10 + 3 * lease.retry_period, 0.01)
        ctx.say(f"a has bound {binds_by(a.user)} pods; renewal in flight: {met}: SIGSTOP a")
        stopped_at = time.monotonic()
        a.signal(signal.SIGSTOP)
        result.figure("a frozen with a Lease renewal in flight", met)
        # b may take the Lease leaseDuration after it last saw it change, and it looks
        # every retryPeriod * (1 + 1.2 jitter)
        takeover_bound = lease.duration + 2.2 * lease.retry_period + 30
        met, _ = wait_until(
            lambda: bed.lease().get("holderIdentity") == b.identity(), takeover_bound, 0.1
        )
        takeover = time.monotonic() - stopped_at
        result.figure("seconds from SIGSTOP to b's takeover", round(takeover, 1))
        if not result.check("b takes over the Lease", met, f"lease: {bed.lease()}"):
            return
        wait_until(lambda: binds_by(b.user) >= 5, 30)
        # thaw a: from here on, any bind by a is a bind by a replica that is not leader
        cont_wall = time.time()
        os.kill(a.pid, signal.SIGCONT)
        ctx.say(f"SIGCONT a after {time.monotonic() - stopped_at:.1f}s frozen")
        # a notices within a renew round at most; watch the stream for that long and more
        time.sleep(lease.renew_deadline + 2 * lease.retry_period + 3)  # the observation window
        stream.stop()
        created = set(stream.created)
        result.figure("pods streamed", len(created))
        met, _ = wait_until(
            lambda: (
                created
                <= {p["metadata"]["name"] for p in bed.pods(NS) if p["spec"].get("nodeName")}
            ),
            60,
            1.0,
        )
        unbound = invariants.unbound(bed.pods(NS), created)
        result.check(
            "every pod of the stream bound", met, f"unbound: {unbound[:8]}" if unbound else ""
        )
        binds = bed.audit.binds({NS})
        late = [c for c in binds if c.user == a.user and c.received >= cont_wall]
        result.figure(
            "binds by a before SIGSTOP",
            sum(1 for c in binds if c.user == a.user and c.received < cont_wall),
        )
        result.figure("binds by b", sum(1 for c in binds if c.user == b.user and c.ok))
        result.figure("binding requests by a after SIGCONT", len(late))
        # accepted ones: pods the former leader bound while b led (two binders at once)
        result.figure("... of which accepted (201)", sum(1 for c in late if c.ok))
        if late:
            result.figure(
                "seconds from SIGCONT to a's last binding request",
                round(max(c.received for c in late) - cont_wall, 2),
            )
        result.check(
            "the thawed old leader binds nothing (audit: binding requests by a after SIGCONT)",
            not late,
            ", ".join(f"{c.pod} -> {c.code}" for c in late[:5]) or "none",
        )
        invariants.bound_at_most_once(result, binds)
        conflicts = sum(1 for c in binds if c.code == 409)
        result.check(
            "no bind refused as a conflict (two binders raced)",
            conflicts == 0,
            f"{conflicts} conflicts",
        )
        transitions = int(bed.lease().get("leaseTransitions") or 0) - transitions0
        result.check("exactly one leader change", transitions == 1, f"{transitions} transitions")
        result.figure("a after SIGCONT", "exited" if not a.alive() else
                      f"running, is_leader={a.metric_or_none('scheduler_leader_election_is_leader')}")  # fmt: skip
        result.check("stream creates succeeded", not stream.errors, "; ".join(stream.errors[:3]))
        invariants.no_overcommit(result, bed)
    finally:
        if stream is not None:
            stream.stop()
        if lease_hook is not None:
            lease_hook.stop()
        bed.close()


CASE = Case(
    "leader_pause",
    "the leader SIGSTOPped past its lease with two replicas; after SIGCONT it binds nothing",
    needs_cluster=True,
    run=run,
)
