"""Leader fail-over and cold start as measured workloads (issue 26): upstream
kube-scheduler and ours side by side on one local real cluster.

    python -m bench failover [--nodes 5000] [--bound-pods 20000] [--pending 1000]
        [--schedulers upstream,ours-async] [--contender-cpu N] [--keep] [--out FILE]

The cluster is the pinned suite's (bench/pinned.py Session): etcd, kube-apiserver,
kube-controller-manager and kwok with the harness on the control-plane core(s),
`--nodes` kwok nodes, and `--bound-pods` pods created already bound through the API
(spec.nodeName; the pinned suite's "plain" init set, 100m each, round-robin over the
nodes). Every replica of a contender runs on the contender's core (Go: GOMAXPROCS=1),
with the pinned suite's KubeSchedulerConfiguration and leader election on, the same
settings for both, written explicitly: leaseDuration 15s, renewDeadline 10s,
retryPeriod 2s, on a Lease named for the run (no run finds an earlier run's holder).
Both serve HTTPS on a free port of 127.0.0.1 (/metrics open), as deployed: each makes
its self-signed serving certificate at start, inside the cold start's figure.
Before each run the namespace is reset to exactly the bound pods.

Fail-over (per contender): replica A starts and takes the Lease; then replica B starts,
and once B has logged that it is attempting to acquire the lease (both schedulers do so
only after their informers have synced) and SETTLE_S more have passed, A is SIGKILLed at
a recorded instant, and right after it the harness creates `--pending` pods that fit.

Why kill first, create after: a leader alive while the pods arrive would bind some of
them itself, and a SIGSTOPped one could still wake and bind (a second, uncontrolled
actor in the measurement). Created after the kill, every pod is bound by the new leader
and by it alone, and all of them are in its queue before it may take the Lease: creating
1000 pods takes a few seconds, the Lease 15 s to expire. The run records when the last
create returned and counts as failed if that was not before the lease was acquired.

Figures (bench/failover_figures.py): kill -> lease acquired (the new holder's
acquireTime, its own wall clock at the start of its winning attempt), kill -> first
bind, kill -> all bound, lease acquired -> first bind, and the new leader's CPU seconds
from the kill to all bound (/proc/PID/stat, read at both instants).

Cold start (per contender): the pending pods are created first (seen by the watch),
then one replica starts from nothing (a fresh Lease, free at its first attempt):
process start -> first bind, -> all bound, lease -> first bind, and its CPU from start
to all bound (start-up included: that is the point).

Bind instants are the pinned suite's (runner.Recorder: a watch on the namespace, the
harness's monotonic time when a pod's spec.nodeName first appears). Order: each
contender's fail-over, then each contender's cold start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import failover_figures as ff
from bench import pinned_workloads as pw
from bench import pinning
from bench.api import Api
from bench.pinned import PinnedOptions, Session
from bench.procs import Monitor, command_for
from bench.runner import Recorder, create_pods, host_load
from bench.workloads import ROLE_LABEL
from kas_dev.cluster.ports import free_port

Progress = Callable[[str, bool], None]
CONTENDERS = ("upstream", "ours-async")
LEASE_SETTINGS = {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"}
LEASE_NAMESPACE = "kube-system"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
# what both schedulers log once their informers have synced and they start to campaign
# (client-go's leaderelection.go and scheduler/leader.py say it in the same words)
CAMPAIGNING = "attempting to acquire leader lease"
# after the standby campaigns: its handlers finish the LIST's last events, its first
# lease attempts are made; the kill then finds it as a standby is in steady state
SETTLE_S = 5.0
POLL_S = 0.2


@dataclass
class FailoverOptions:
    nodes: int = 5000
    bound_pods: int = 20000
    pending: int = 1000
    schedulers: tuple[str, ...] = CONTENDERS
    qps: float = 5000.0
    burst: int = 5000
    concurrency: int = 64
    timeout_s: float = 300.0
    """How long a phase may take from its origin to the last bind."""
    keep: bool = False


def workload(opts: FailoverOptions) -> pw.PinnedWorkload:
    """The bound pods as the pinned suite's init set, the pending pods as its measured
    ones (the Session creates, restores and names them as for any pinned run)."""
    return pw.PinnedWorkload(
        "Failover",
        opts.nodes,
        "plain",
        opts.bound_pods,
        "plain",
        opts.pending,
        timeout_s=opts.timeout_s,
    )


def leader_election(lease: str) -> dict[str, Any]:
    """The leaderElection section both contenders get."""
    return {
        "leaderElect": True,
        **LEASE_SETTINGS,
        "resourceLock": "leases",
        "resourceName": lease,
        "resourceNamespace": LEASE_NAMESPACE,
    }


def proc_cpu_seconds(pid: int) -> float | None:
    """The process's user + system CPU seconds so far, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return ff.cpu_seconds_from_stat(stat, os.sysconf("SC_CLK_TCK"))


async def read_lease(api: Api, name: str) -> dict[str, Any]:
    """The Lease's spec ({} while it does not exist)."""
    lease = await api.request("GET", f"{LEASES}/{name}", ok=(404,))
    if not isinstance(lease, dict) or lease.get("kind") != "Lease":
        return {}
    spec = lease.get("spec") or {}
    return spec if isinstance(spec, dict) else {}


class FailoverBench:
    """The two phases on one Session; `run_*` each return one result entry."""

    def __init__(self, session: Session, opts: FailoverOptions, progress: Progress) -> None:
        self.session = session
        self.opts = opts
        self.progress = progress
        self.workload = workload(opts)

    # ----- pieces -------------------------------------------------------------------
    def _replica(self, contender: str, lease: str, tag: str) -> Monitor:
        s = self.session
        assert s.cluster is not None and s.cluster.state is not None and s.kubeconfig
        argv = command_for(
            contender,
            run_dir=s.base,
            bin_dir=Path(s.cluster.state.bin_dir),
            kubeconfig=s.kubeconfig,
            qps=self.opts.qps,
            burst=self.opts.burst,
            concurrency=self.opts.concurrency,
            leader_election=leader_election(lease),
            config_name=f"{contender}-{lease}.yaml",
            # both serve HTTPS, as deployed (kube-scheduler's default is port 10259 with a
            # self-signed certificate made at start): without a port upstream would skip
            # serving (its --secure-port=0) while ours serves on a free port, and the
            # start-up figures would compare unequal work
            metrics_port=free_port(),
        )
        env = {"GOMAXPROCS": str(s.plan.gomaxprocs)} if contender == "upstream" else {}
        return Monitor(
            f"{contender}-{tag}",
            argv,
            s.base / f"{contender}-{lease}-{tag}.log",
            interval=0.5,
            preexec=pinning.preexec_for(s.plan.contender),
            env=env,
        )

    async def _prepare(self, label: str) -> tuple[Recorder, asyncio.Task[None], str]:
        """Reset the namespace to the bound pods, start the watch; the run's Lease name."""
        s = self.session
        assert s.api is not None
        s.widen()  # nothing is measured yet: the control plane may use every core
        await s.reset(self.workload, self.progress, label)
        rec = Recorder(s.api, label_selector=f"{ROLE_LABEL}!=init")
        ready = asyncio.Event()
        watcher = asyncio.create_task(rec.run(ready))
        await asyncio.wait_for(ready.wait(), 120)
        return rec, watcher, f"kas-bench-failover-{s.generation}"

    async def _until_bound(self, rec: Recorder, proc: Monitor, origin: float, label: str) -> None:
        """Until every pending pod is seen bound, the process dies or the time is up."""
        n = self.opts.pending
        deadline = origin + self.opts.timeout_s
        last = 0.0
        while True:
            done = rec.count_bound("measured")
            now = time.monotonic()
            if now - last >= 1.0 or done >= n:
                self.progress(
                    f"{label}: bound {done}/{n}, {now - origin:.1f}s after the origin", done >= n
                )
                last = now
            if done >= n or now > deadline or not proc.alive():
                return
            rec.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(rec.changed.wait(), 0.25)

    async def _acquired(
        self, lease: str, wall_ref: float, mono_ref: float
    ) -> tuple[dict[str, Any], float | None]:
        assert self.session.api is not None
        spec = await read_lease(self.session.api, lease)
        when = spec.get("acquireTime")
        at = ff.wall_to_monotonic(ff.rfc3339_epoch(when), wall_ref, mono_ref) if when else None
        return spec, at

    # ----- fail-over ----------------------------------------------------------------------
    async def run_failover(self, contender: str) -> dict[str, Any]:
        label = f"[fail-over x {contender}]"
        result: dict[str, Any] = {
            "phase": ff.FAILOVER,
            "scheduler": contender,
            "ok": False,
            "error": None,
        }
        a = b = None
        watcher: asyncio.Task[None] | None = None
        try:
            rec, watcher, lease = await self._prepare(label)
            api = self.session.api
            assert api is not None
            result["lease_name"] = lease
            self.session.narrow()
            a = self._replica(contender, lease, "a")
            a.start()
            self.progress(f"{label}: replica A started; waiting for it to take Lease {lease}", True)
            holder_a = await _wait_holder(api, lease, lambda h: bool(h), a, 120.0)
            b = self._replica(contender, lease, "b")
            b.start()
            self.progress(
                f"{label}: A leads ({holder_a}); replica B started, waiting for it "
                "to sync and campaign",
                True,
            )
            await _wait_log(b, CAMPAIGNING, 300.0)
            await asyncio.sleep(SETTLE_S)
            if not (a.alive() and b.alive()):
                raise RuntimeError(f"a replica exited before the kill: {a.tail(3)} {b.tail(3)}")
            assert a.proc is not None and b.proc is not None
            result["host"] = host_load()
            # the kill: B's CPU, both clocks and the signal within microseconds
            cpu_at_kill = proc_cpu_seconds(b.proc.pid)
            mono_ref, wall_ref = time.monotonic(), time.time()
            os.kill(a.proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            self.progress(f"{label}: A SIGKILLed; creating {self.opts.pending} pending pods", True)
            created: dict[str, float] = {}
            manifests = list(pw.measured_pods(self.workload, self.session.generation))
            fails = await create_pods(api, manifests, self.opts.concurrency, created)
            created_done = time.monotonic()
            if fails:
                raise RuntimeError(f"{fails} pending pods could not be created")
            self.progress(
                f"{label}: {len(created)} pods created {created_done - killed:.1f}s "
                "after the kill; waiting for the new leader",
                True,
            )
            await self._until_bound(rec, b, killed, label)
            cpu_at_end = proc_cpu_seconds(b.proc.pid)
            spec, acquired = await self._acquired(lease, wall_ref, mono_ref)
            times = ff.PhaseTimes(
                killed, self.opts.pending, rec.bound("measured"), acquired, cpu_at_kill, cpu_at_end
            )
            figures = ff.phase_figures(times)
            result["figures"] = figures
            result["lease"] = {**spec, "previous_holder": holder_a}
            result["last_create_returned_s"] = round(created_done - killed, 3)
            before = acquired is not None and created_done < acquired
            result["created_before_lease"] = before
            new_holder = spec.get("holderIdentity")
            result["ok"] = bool(
                figures["complete"]
                and before
                and b.alive()
                and new_holder
                and new_holder != holder_a
            )
            if not result["ok"]:
                result["error"] = (
                    f"bound {figures['bound']}/{self.opts.pending}; pods created before the "
                    f"lease: {before}; new holder {new_holder!r} (was {holder_a!r}); "
                    f"B alive: {b.alive()}"
                )
            result["peak_rss_mib"] = round(b.peak_rss / 2**20, 1)
        except Exception as exc:  # one failed run must not lose the others
            result["error"] = f"{type(exc).__name__}: {exc}"
            self.progress(f"{label}: FAILED: {result['error']}", True)
        finally:
            await _stop(a, b, watcher)
            self.session.narrow()
        return result

    # ----- cold start ---------------------------------------------------------------------
    async def run_cold_start(self, contender: str) -> dict[str, Any]:
        label = f"[cold start x {contender}]"
        result: dict[str, Any] = {
            "phase": ff.COLD_START,
            "scheduler": contender,
            "ok": False,
            "error": None,
        }
        c = None
        watcher: asyncio.Task[None] | None = None
        try:
            rec, watcher, lease = await self._prepare(label)
            api = self.session.api
            assert api is not None
            result["lease_name"] = lease
            n = self.opts.pending
            self.progress(f"{label}: creating {n} pending pods before the start", True)
            manifests = list(pw.measured_pods(self.workload, self.session.generation))
            created: dict[str, float] = {}
            if await create_pods(api, manifests, self.opts.concurrency, created):
                raise RuntimeError("pending pods could not be created")
            deadline = time.monotonic() + 120
            while sum(1 for x in created if x in rec.pods) < n:
                if time.monotonic() > deadline:
                    raise TimeoutError("the watch did not see every pending pod")
                await asyncio.sleep(POLL_S)
            self.session.narrow()
            result["host"] = host_load()
            c = self._replica(contender, lease, "cold")
            mono_ref, wall_ref = time.monotonic(), time.time()
            c.start()
            assert c.proc is not None
            started = c.started_at
            self.progress(f"{label}: replica started; waiting for its binds", True)
            await self._until_bound(rec, c, started, label)
            cpu_at_end = proc_cpu_seconds(c.proc.pid)
            spec, acquired = await self._acquired(lease, wall_ref, mono_ref)
            times = ff.PhaseTimes(started, n, rec.bound("measured"), acquired, 0.0, cpu_at_end)
            figures = ff.phase_figures(times)
            result["figures"] = figures
            result["lease"] = spec
            result["ok"] = bool(figures["complete"] and c.alive())
            if not result["ok"]:
                result["error"] = f"bound {figures['bound']}/{n}; alive: {c.alive()}: {c.tail(3)}"
            result["peak_rss_mib"] = round(c.peak_rss / 2**20, 1)
        except Exception as exc:
            result["error"] = f"{type(exc).__name__}: {exc}"
            self.progress(f"{label}: FAILED: {result['error']}", True)
        finally:
            await _stop(c, None, watcher)
            self.session.narrow()
        return result


async def _wait_holder(
    api: Api, lease: str, pred: Callable[[str], bool], proc: Monitor, limit_s: float
) -> str:
    deadline = time.monotonic() + limit_s
    while True:
        holder = str((await read_lease(api, lease)).get("holderIdentity") or "")
        if pred(holder):
            return holder
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited: {proc.tail(3)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no holder of Lease {lease} after {limit_s:.0f}s")
        await asyncio.sleep(POLL_S)


async def _wait_log(proc: Monitor, text: str, limit_s: float) -> None:
    """Until the process's log holds `text` (read whole: a few hundred lines at most)."""
    deadline = time.monotonic() + limit_s
    needle = text.lower()
    while True:
        with contextlib.suppress(OSError):
            if needle in proc.log.read_text(errors="replace").lower():
                return
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited: {proc.tail(3)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{proc.name} did not log {text!r} within {limit_s:.0f}s")
        await asyncio.sleep(POLL_S)


async def _stop(a: Monitor | None, b: Monitor | None, watcher: asyncio.Task[None] | None) -> None:
    for m in (a, b):
        if m is not None:
            await m.stop()
    if watcher is not None:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher


async def run(
    opts: FailoverOptions,
    plan: pinning.PinningPlan,
    progress: Progress,
    on_result: Callable[[dict[str, Any]], None],
    on_cluster: Callable[[dict[str, Any]], None],
) -> None:
    """Both phases for every contender on one cluster."""
    # the control plane dies with the harness (kas_dev/cluster/process.py)
    os.environ["KAS_CLUSTER_DIE_WITH_PARENT"] = "1"
    session = Session(
        opts.nodes,
        plan,
        PinnedOptions(qps=opts.qps, burst=opts.burst, concurrency=opts.concurrency, keep=opts.keep),
    )
    try:
        await session.start(progress, f"[{opts.nodes} nodes]")
        on_cluster(session.info)
        bench = FailoverBench(session, opts, progress)
        for contender in opts.schedulers:
            on_result(await bench.run_failover(contender))
        for contender in opts.schedulers:
            on_result(await bench.run_cold_start(contender))
    finally:
        await session.stop()
