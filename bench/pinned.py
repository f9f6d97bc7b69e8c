"""The scheduler-bound ("pinned") suite: every contender on one core of its own.

    python -m bench run --suite pinned [--sizes 500,1000,5000] [--workloads A,B,...]
        [--schedulers upstream,ours-async,ceiling] [--shapes drain,arrival]
        [--rate 100] [--pods-scale 1.0] [--no-memory] [--contender-cpu 1]
        [--init-pods N [--init-concurrency 64]]

For each size, ONE local cluster (etcd, kube-apiserver, kube-controller-manager, kwok)
serves every workload and contender: the harness pins itself and so the control plane
to CPU 0 (every CPU but the contender's), creates the nodes itself (64 creates in
flight), and before each run restores the workload's init pods exactly (deletes every
other pod, recreates missing init pods such as preemption victims, waits until the
namespace holds just that set). Each run starts a fresh contender process pinned to
CPU 1, with GOMAXPROCS=1 for the Go binary.

Shapes (bench/stats.py window_figures says exactly how each figure is cut):
- drain: every measured pod exists before the contender starts; pods/s and CPU per pod
  are taken from the first bind to the last (in the preemption workloads from the
  first victim deletion, when the contender deleted one before its first bind);
  latency is from the contender's start;
- arrival: the contender binds a warm-up pod, then the measured pods are created at
  `--rate` pods/s; window from the first create to the last bind.

`--init-pods N` (issue 26, start-up at scale): right after its nodes, the cluster of
every size is filled with N bound pods shaped as a Deployment's (bench/scale_pods.py,
bench/scale_fill.py) in a namespace of their own, kept for every run of that size; both
contenders list them at start and hold them in their caches. From LARGE_POD_THRESHOLD
(50,000) pods the control plane runs in its `large` mode (kas_dev/cluster/local.py).

The ceiling (`python -m bench.binder`, pinned the same way) runs the drain shape of the
workloads marked for it (SchedulingBasic). The Memory workload (5000 nodes, 20000 pods
in the cache) runs after the plain workloads of the 5000-node size.

Between runs (nothing measured) the control plane may use every core (`widen`), so
restoring init sets and creating backlogs takes half the time; it is pinned back to its
core(s) before the contender starts, and the masks the kernel then reports for every
thread are kept in the run's result. The result file is rewritten after every run; the
control plane and the contender die with the harness (Ctrl-C or SIGTERM stops a
matrix without leaving processes behind). A size whose cluster cannot come up is
recorded as such for each of its runs, and the matrix goes on with the next size.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from bench import dra_setup, pinning, scale_fill, scrape, stats
from bench import pinned_workloads as pw
from bench.api import Api, retrying
from bench.procs import PROFILED, Monitor, command_for
from bench.runner import Recorder, _setup, create_pods, host_load
from bench.workloads import NAMESPACE, ROLE_LABEL, warmup_pod
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.ports import free_port

Progress = Callable[[str, bool], None]
PODGROUPS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups"
CONCURRENCY = 64
# the contender's CPU is sampled this often (psutil reads /proc/PID/stat: cheap, and it
# runs on the control-plane core, not the contender's)
CPU_SAMPLE_S = 0.02
# how long a gang run's last pod-group attempt may take to be observed after its members
# were seen bound (_pod_group_attempts)
SETTLE_S = 10.0


@dataclass
class PinnedOptions:
    qps: float = 5000.0
    burst: int = 5000
    rate: float = 100.0
    """Creates per second of the arrival shape."""
    concurrency: int = CONCURRENCY
    kwok_nodes: bool = True
    keep: bool = False
    generic_workload: bool = False
    """The GenericWorkload gate on the cluster and both schedulers (set when the matrix
    holds a gang workload)."""
    init_pods: int = 0
    """Bound pods (bench/scale_pods.py) the cluster of every size is filled with before
    its workloads (`--init-pods`)."""
    init_concurrency: int = CONCURRENCY
    large_cluster: bool = False
    """The control plane's `large` mode (kas_dev/cluster/local.py): set for
    LARGE_POD_THRESHOLD init pods or more."""


@dataclass
class Session:
    """One cluster of one size, reused by every run of that size."""

    nodes: int
    plan: pinning.PinningPlan
    opts: PinnedOptions
    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kas-pinned-")))
    cluster: LocalCluster | None = None
    api: Api | None = None
    kubeconfig: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)
    devices_published: bool = False
    generation: int = 0
    """Counts the runs of this cluster: every pod, churn node and Service name carries
    it, so no name is used twice (see pinned_workloads.init_pods)."""

    async def start(self, progress: Progress, label: str) -> None:
        self.cluster = LocalCluster(self.base / "cluster")
        t = time.monotonic()
        progress(f"{label}: starting the control plane on CPU(s) "
                 f"{sorted(self.plan.control_plane)}", True)  # fmt: skip
        await asyncio.to_thread(
            functools.partial(
                self.cluster.up,
                0,
                generic_workload=self.opts.generic_workload,
                large=self.opts.large_cluster,
            )
        )
        self.info["cluster_up_s"] = round(time.monotonic() - t, 1)
        self.info["large_mode"] = self.opts.large_cluster
        self.api = Api(
            self.cluster.kubeconfig,
            connections=max(self.opts.concurrency, self.opts.init_concurrency) + 8,
            user_agent="kas-bench-harness",
            timeout=120.0,
        )
        await self.api.__aenter__()
        t = time.monotonic()
        progress(f"{label}: creating {self.nodes} nodes", True)
        self.widen()
        await self._create_nodes(progress, label)
        self.info["nodes_created_s"] = round(time.monotonic() - t, 1)
        self.kubeconfig = await _setup(self.api, self.cluster, self.base)
        if self.opts.init_pods:
            # before any contender: both start with these pods in the cluster. The
            # harness's own loop (JSON and TLS of every create) may use every core too
            # meanwhile: nothing is measured
            pinning.pin_self(self.plan.control_plane | self.plan.contender)
            try:
                self.info["init_pods"] = await self._fill(progress, label)
            finally:
                pinning.pin_self(self.plan.control_plane)
            self.info["control_plane_rss_mib"] = self.control_plane_rss()
            progress(f"{label}: control plane RSS (MiB) {self.info['control_plane_rss_mib']}",
                     True)  # fmt: skip
        self.narrow()

        self.info["control_plane"] = await self.control_plane_load(5.0)
        self.info["control_plane_affinity"] = {
            name: pinning.affinity_of(pid)
            for name, pid in (self.cluster.state.pids if self.cluster.state else {}).items()
        }
        progress(
            f"{label}: cluster up in {self.info['cluster_up_s']}s, {self.nodes} nodes in "
            f"{self.info['nodes_created_s']}s; idle control plane "
            f"{self.info['control_plane']['cpu_percent']}",
            True,
        )

    async def _create_nodes(self, progress: Progress, label: str) -> None:
        assert self.api is not None
        api = self.api
        it = iter(range(self.nodes))
        done = 0

        async def worker() -> None:
            nonlocal done
            for i in it:
                body = pw.node_manifest(i, kwok=self.opts.kwok_nodes)
                await retrying(lambda b=body: api.request("POST", "/api/v1/nodes", b))
                done += 1
                if done % 500 == 0:
                    progress(f"{label}: {done}/{self.nodes} nodes", False)

        await asyncio.gather(*(worker() for _ in range(self.opts.concurrency)))

    async def _fill(self, progress: Progress, label: str) -> dict[str, Any]:
        assert self.api is not None
        return await scale_fill.fill(
            self.api, self.opts.init_pods, self.nodes, self.opts.init_concurrency, progress, label
        )

    def control_plane_rss(self) -> dict[str, float]:
        """Resident memory of each control-plane process now, MiB."""
        out = {}
        pids = self.cluster.state.pids if self.cluster and self.cluster.state else {}
        for name, pid in pids.items():
            with contextlib.suppress(psutil.Error):
                out[name] = round(psutil.Process(pid).memory_info().rss / 2**20, 1)
        return out

    async def control_plane_load(self, seconds: float) -> dict[str, Any]:
        """CPU of each control-plane process over `seconds` of idling (nothing scheduled),
        and how many node leases kwok renewed lately: whether the control plane keeps
        up with the nodes on its core(s)."""
        assert self.cluster is not None and self.cluster.state is not None and self.api
        procs = {}
        for name, pid in self.cluster.state.pids.items():
            with contextlib.suppress(psutil.Error):
                procs[name] = psutil.Process(pid)
                procs[name].cpu_percent()
        await asyncio.sleep(seconds)
        cpu = {}
        for name, p in procs.items():
            with contextlib.suppress(psutil.Error):
                cpu[name] = round(p.cpu_percent(), 1)
        leases = await self.api.request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        )
        now = time.time()
        fresh = 0
        for item in leases.get("items", []):
            renew = (item.get("spec") or {}).get("renewTime")
            if renew and now - _rfc3339(renew) < 60:
                fresh += 1
        return {
            "idle_seconds": seconds,
            "cpu_percent": cpu,
            "node_leases": len(leases.get("items", [])),
            "node_leases_renewed_last_60s": fresh,
        }

    async def stop(self) -> None:
        if self.api is not None:
            await self.api.__aexit__(None, None, None)
        if self.cluster is not None:
            await asyncio.to_thread(self.cluster.down)
        if not self.opts.keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def contender_gates(self, w: pw.PinnedWorkload) -> list[str]:
        """One `--feature-gates` argument for both schedulers: the cluster's gates when
        the matrix holds gangs, DynamicResourceAllocation for a DRA workload (GA and
        locked on in kube-scheduler v1.37.2, which accepts it set to true)."""
        gates = list(self.cluster.state.feature_gates) if self.opts.generic_workload and \
            self.cluster and self.cluster.state else []  # fmt: skip
        if w.dra:
            gates.append("DynamicResourceAllocation=true")
        return [f"--feature-gates={','.join(gates)}"] if gates else []

    # ----- between runs ----------------------------------------------------------------
    def widen(self) -> None:
        """Let the control plane use every core while the harness prepares a run
        (restoring the init set, creating the backlog): nothing is measured then, and on
        two cores this halves the time between runs. `narrow` undoes it before the
        contender starts."""
        self._set_control_plane(self.plan.control_plane | self.plan.contender)

    def narrow(self) -> dict[str, list[list[int]]]:
        """Back to the control-plane cores; returns the masks the kernel now reports."""
        self._set_control_plane(self.plan.control_plane)
        pids = self.cluster.state.pids if self.cluster and self.cluster.state else {}
        return {name: pinning.affinity_of(pid) for name, pid in pids.items()}

    def _set_control_plane(self, cpus: frozenset[int]) -> None:
        pids = self.cluster.state.pids if self.cluster and self.cluster.state else {}
        for pid in pids.values():
            pinning.set_affinity_all_threads(pid, cpus)

    async def reset(self, w: pw.PinnedWorkload, progress: Progress, label: str) -> dict[str, Any]:
        """Make the namespace hold exactly w's init pods (and no churn objects)."""
        assert self.api is not None
        api = self.api
        t = time.monotonic()
        pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        self.generation += 1
        gen = self.generation
        wanted = {b["metadata"]["labels"][pw.INIT_KEY_LABEL]: b for b in pw.init_pods(w, gen)}
        listing = await api.request("GET", pods_path)
        # every pod that is not in the set goes: measured, churn, warm-up, other init sets,
        # init pods of this set beyond its count, a second pod of one key (64 deletes in
        # flight: much faster than one DELETE collection, which the API server works
        # through one pod at a time)
        kept: set[str] = set()
        extra = []
        for p in listing["items"]:
            key = (p["metadata"].get("labels") or {}).get(pw.INIT_KEY_LABEL)
            # a pod on its way out (a victim kwok has not finished) is replaced
            going = bool(p["metadata"].get("deletionTimestamp"))
            if key in wanted and key not in kept and not going:
                kept.add(key)
            else:
                extra.append(p["metadata"]["name"])
        missing = [b for k, b in wanted.items() if k not in kept]
        progress(
            f"{label}: restoring the init set ({len(missing)} to create, {len(extra)} to delete)",
            True,
        )
        for i in range(0, len(extra), 1000):
            await _delete_pods(api, extra[i : i + 1000], self.opts.concurrency)
            progress(f"{label}: {min(i + 1000, len(extra))}/{len(extra)} pods deleted", False)
        await self._delete_churn_objects()
        if self.opts.generic_workload:
            await api.request("DELETE", f"{PODGROUPS}", ok=(404,))
        t_deleted = time.monotonic()
        fails = await _create_in_steps(
            api, missing, self.opts.concurrency, None, progress, f"{label}: init pods"
        )
        if fails:
            raise RuntimeError(f"{fails} init pods could not be created")
        # the namespace must hold exactly the init set before the contender starts
        deadline = time.monotonic() + 300
        while True:
            listing = await api.request("GET", f"{pods_path}?limit=0")
            keys = {(p["metadata"].get("labels") or {}).get(pw.INIT_KEY_LABEL)
                    for p in listing["items"]}  # fmt: skip
            names = listing["items"]
            if len(names) == len(wanted) and keys == set(wanted):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace still holds {len(names)} pods, want {len(wanted)}")
            await asyncio.sleep(0.5)
        return {
            "reset_s": round(time.monotonic() - t, 1),
            "reset_delete_s": round(t_deleted - t, 1),
            "reset_created": len(missing),
            "reset_deleted": len(extra),
        }

    async def _delete_churn_objects(self) -> None:
        assert self.api is not None
        sel = urllib.parse.quote(f"{ROLE_LABEL}=churn")
        await self.api.request("DELETE", f"/api/v1/nodes?labelSelector={sel}")
        svcs = await self.api.request(
            "GET", f"/api/v1/namespaces/{NAMESPACE}/services?labelSelector={sel}"
        )
        for s in svcs.get("items", []):
            await self.api.request(
                "DELETE",
                f"/api/v1/namespaces/{NAMESPACE}/services/{s['metadata']['name']}",
                ok=(404,),
            )

    # ----- one run -----------------------------------------------------------------------
    async def run(
        self,
        w: pw.PinnedWorkload,
        shape: str,
        contender: str,
        progress: Progress,
        label: str,
    ) -> dict[str, Any]:
        assert self.api is not None and self.cluster is not None and self.kubeconfig
        api = self.api
        result: dict[str, Any] = {
            "size": self.nodes,
            "workload": dataclasses.asdict(w),
            "shape": shape,
            "scheduler": contender,
            "ok": False,
            "error": None,
        }
        phases: dict[str, Any] = {}
        monitor: Monitor | None = None
        watcher: asyncio.Task[None] | None = None
        churner: asyncio.Task[None] | None = None
        stop_churn = asyncio.Event()
        try:
            self.widen()
            phases.update(await self.reset(w, progress, label))
            if w.dra:
                if not self.devices_published:
                    progress(f"{label}: publishing {self.nodes} ResourceSlices", True)
                    await dra_setup.publish_devices(api, self.nodes, self.opts.concurrency)
                    self.devices_published = True
                phases.update(
                    await dra_setup.reset_claims(api, w, self.opts.concurrency, progress, label)
                )
            # victims are init pods: only the preemption workloads watch those
            rec = Recorder(api, label_selector="" if w.preempts else f"{ROLE_LABEL}!=init")
            ready = asyncio.Event()
            watcher = asyncio.create_task(rec.run(ready))
            await asyncio.wait_for(ready.wait(), 120)
            created: dict[str, float] = {}
            churned: dict[str, float] = {}
            gen = self.generation
            manifests = list(pw.measured_pods(w, gen))
            n = len(manifests)
            groups = list(pw.pod_groups(w, gen))
            if groups:
                # the PodGroups first, as upstream's createPodGroups op
                progress(f"{label}: creating {len(groups)} PodGroups", True)
                for body in groups:
                    await retrying(lambda body=body: api.request("POST", PODGROUPS, body))
            if shape == "drain":
                t = time.monotonic()
                progress(f"{label}: creating the {n} measured pods (backlog)", True)
                fails = await _create_in_steps(
                    api, manifests, self.opts.concurrency, created, progress, f"{label}: backlog"
                )
                if fails:
                    raise RuntimeError(f"{fails} measured pods could not be created")
                await _wait(lambda: sum(1 for x in created if x in rec.pods) == n, 120,
                            "the watch to see the backlog")  # fmt: skip
                if w.dra:
                    phases["claims_made_s"] = await dra_setup.wait_for_claims(
                        api, n, progress, label
                    )
                phases["backlog_s"] = round(time.monotonic() - t, 1)
            result["control_plane_affinity"] = self.narrow()
            assert self.cluster.state is not None
            # a gang run's schedulers serve /metrics (bench/scrape.py); every other run
            # starts them exactly as before
            metrics_port = free_port() if w.gangs and contender != "ceiling" else None
            argv = command_for(
                contender,
                run_dir=self.base,
                bin_dir=Path(self.cluster.state.bin_dir),
                kubeconfig=self.kubeconfig,
                qps=self.opts.qps,
                burst=self.opts.burst,
                concurrency=self.opts.concurrency,
                feature_gates=self.contender_gates(w),
                metrics_port=metrics_port,
            )
            result["argv"] = argv
            env = {"GOMAXPROCS": str(self.plan.gomaxprocs)} if contender == "upstream" else {}
            monitor = Monitor(
                contender,
                argv,
                self.base / f"{contender}.log",
                interval=CPU_SAMPLE_S,
                preexec=pinning.preexec_for(self.plan.contender),
                env=env,
                keep_series=True,
            )
            monitor.start()
            started = monitor.started_at
            result["host"] = host_load()
            if shape == "arrival":
                warmup = warmup_pod()
                warmup["metadata"]["name"] = f"warmup-{gen}"
                await create_pods(api, [warmup], 1)
                await _wait(lambda: rec.count_bound("warmup") == 1 or not monitor.alive(),
                            120, "the warm-up pod to be bound")  # fmt: skip
                if not monitor.alive():
                    raise RuntimeError(f"{contender} exited: {monitor.tail()}")
                phases["start_to_ready_s"] = round(time.monotonic() - started, 2)
            churner = asyncio.create_task(self._churn(w, churned, stop_churn))
            creator = None
            t0 = time.monotonic()
            if shape == "arrival":
                creator = asyncio.create_task(
                    _create_paced(api, manifests, self.opts.rate, self.opts.concurrency, created)
                )
            affinity: list[list[int]] = []
            # a contender's start-up grows with the pods it lists first: four seconds per
            # thousand init pods more before a run counts as failed (at 150,000, with the
            # API server on one core, upstream's start-up took 234 s and ours' paged LIST
            # had not ended after 450 s)
            deadline = t0 + w.timeout_s + 4 * self.opts.init_pods / 1000
            last_print = 0.0
            while True:
                # a measured pod a preemptor evicted before its bind is settled too
                done = rec.count_bound("measured") + len(rec.evicted_unbound("measured"))
                now = time.monotonic()
                if not affinity and now - started > 0.5 and monitor.proc is not None:
                    # the masks every thread of the contender really has
                    affinity = pinning.affinity_of(monitor.proc.pid)
                if now - last_print >= 1.0 or done >= n:
                    progress(
                        f"{label}: bound {done}/{n} in {now - t0:.1f}s"
                        f" ({done / max(now - t0, 1e-9):.0f}/s)",
                        False,
                    )
                    last_print = now
                if done >= n or now > deadline or not monitor.alive():
                    break
                if watcher.done():
                    raise RuntimeError(f"the harness's pod watch ended: {watcher.exception()!r}")
                rec.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(rec.changed.wait(), 0.25)
            phases["run_s"] = round(time.monotonic() - t0, 1)
            if metrics_port is not None and monitor.alive():
                # after the last measured bind (the process started at zero)
                result["pod_group_attempts"] = await _pod_group_attempts(
                    metrics_port, len(groups), self.base / f"{contender}-{w.name}-metrics.txt"
                )
            if monitor.proc is not None and monitor.alive():
                affinity = pinning.affinity_of(monitor.proc.pid) or affinity
            stop_churn.set()
            await churner
            if creator is not None:
                await creator
            if w.churn == "preemptor":
                # let the last preemptors land (outside every window)
                with contextlib.suppress(TimeoutError):
                    await _wait(lambda: rec.count_bound("churn") >= len(churned), 10,
                                "the preemptors")  # fmt: skip
            alive_at_end = monitor.alive()
            # a profiling contender writes its last heap breakdown on the way out
            await monitor.stop(grace_s=180.0 if contender in PROFILED else 15.0)
            result.update(_figures(w, shape, contender, rec, started, created, churned, monitor))
            result["process"]["affinity"] = affinity
            result["process"]["gomaxprocs"] = env.get("GOMAXPROCS")
            if contender == "upstream":
                # what the binary itself reports at start ("Golang settings" line)
                result["process"]["gomaxprocs_logged"] = _logged_gomaxprocs(monitor.log)
            result["phases"] = phases
            result["control_plane_rss_mib"] = self.control_plane_rss()
            result["watch_restarts"] = rec.restarts
            evicted = rec.evicted_unbound("measured")
            result["measured"]["evicted_before_bind"] = len(evicted)
            if evicted and result["measured"]["bound"] + len(evicted) == n:
                result["measured"]["complete"] = True
            result["ok"] = bool(result["measured"]["complete"] and alive_at_end)
            if not result["ok"]:
                result["error"] = (
                    f"{contender} exited early: {monitor.tail(3)}"
                    if not alive_at_end
                    else f"only {result['measured']['bound']}/{n} measured pods bound "
                    f"in {w.timeout_s:.0f}s"
                )
        except Exception as exc:  # one failed run must not lose the others
            result["error"] = f"{type(exc).__name__}: {exc}"
            if monitor is not None:
                result["error"] += f"; last log lines: {monitor.tail(3)}"
            progress(f"{label}: FAILED: {result['error']}", True)
        finally:
            self.narrow()
            stop_churn.set()
            if churner is not None and not churner.done():
                churner.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await churner
            if monitor is not None and monitor.alive():
                await monitor.stop()
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher
            result["phases"] = phases
        return result

    async def _churn(
        self, w: pw.PinnedWorkload, created: dict[str, float], stop: asyncio.Event
    ) -> None:
        """Churn at w.churn_interval_s until `stop`: single pods, or (mixed, as upstream's
        recreate mode) a node, a 9-CPU pod and a Service replacing the previous ones."""
        if w.churn is None:
            return
        assert self.api is not None
        api = self.api
        start = time.monotonic()
        tasks: list[asyncio.Task[Any]] = []
        for i in range(w.churn_max):
            delay = start + i * w.churn_interval_s - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                break
            gen = self.generation
            body = pw.churn_pod(w, i, gen)
            tasks.append(asyncio.create_task(create_pods(api, [body], 1, created)))
            if w.churn == "mixed":
                tasks.append(asyncio.create_task(self._recreate(i, gen)))
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _recreate(self, i: int, gen: int) -> None:
        """Upstream's churn `recreate` mode: the new node and Service, then the previous
        node, Service and pod go."""
        assert self.api is not None
        api = self.api
        await api.request("POST", "/api/v1/nodes", pw.churn_node(i, gen))
        await api.request(
            "POST", f"/api/v1/namespaces/{NAMESPACE}/services", pw.churn_service(i, gen)
        )
        if i > 0:
            prev = f"{gen}-{i - 1}"
            await api.request("DELETE", f"/api/v1/nodes/{pw.CHURN_NODE_PREFIX}-{prev}", ok=(404,))
            await api.request(
                "DELETE",
                f"/api/v1/namespaces/{NAMESPACE}/services/{pw.CHURN_SERVICE_PREFIX}-{prev}",
                ok=(404,),
            )
            old = pw.churn_pod_name(i - 1, gen)
            await api.request(
                "DELETE",
                f"/api/v1/namespaces/{NAMESPACE}/pods/{old}?gracePeriodSeconds=0",
                ok=(404,),
            )


def _figures(
    w: pw.PinnedWorkload,
    shape: str,
    contender: str,
    rec: Recorder,
    started: float,
    created: dict[str, float],
    churned: dict[str, float],
    monitor: Monitor,
) -> dict[str, Any]:
    bound = rec.bound("measured")
    first_write = None
    if w.preemptor_role and shape == "drain":
        # the first victim the contender deleted (init pods deleted before it started
        # were the harness's restoring)
        deletions = [
            r.deleted_at
            for r in rec.pods.values()
            if r.role == "init" and r.deleted_at is not None and r.deleted_at >= started
        ]
        first_write = min(deletions, default=None)
    also = rec.bound("churn") if w.churn == "preemptor" else None
    measured = stats.window_figures(
        shape, started, created, bound, monitor.series, first_write=first_write, also_bound=also
    )
    measured["create_rate"] = stats.bind_rate(list(created.values())) if created else None
    measured["latency_origin"] = "contender start" if shape == "drain" else "create sent"
    out: dict[str, Any] = {"measured": measured}
    if w.churn:
        out["churn"] = stats.pod_figures(churned, rec.bound("churn"))
    role = w.preemptor_role
    if role and contender != "ceiling":
        names = created if role == "measured" else churned
        pre_nodes = {x: rec.pods[x].node for x in names if x in rec.pods and rec.pods[x].node}
        pre = stats.pod_figures(names, rec.bound(role))
        victims = [
            r.node
            for r in rec.pods.values()
            if r.deleted_at is not None and r.node and r.role == "init"
        ]
        vic = stats.victims_per_preemptor(
            {k: v for k, v in pre_nodes.items() if v}, [v for v in victims if v]
        )
        out["preemption"] = {
            "preemptors": pre["created"],
            "preemptors_bound": pre["bound"],
            "time_to_bind_s": pre["latency_s"],
            "victims": vic,
        }
    out["process"] = {
        "cpu_s_total": round(monitor.cpu_total, 3),
        "peak_rss_mib": round(monitor.peak_rss / 2**20, 1),
        "exit_code": monitor.exit_code,
        "cpu_samples": len(monitor.series),
    }
    return out


async def _pod_group_attempts(port: int, groups: int, keep: Path) -> dict[str, Any]:
    """The run's pod-group attempt figures from the contender's /metrics, or why not
    (a failed scrape costs the figure, not the run); the text is kept at `keep` (with the
    run's logs: removed unless --keep).

    The last group's members can be seen bound before its cycle observes the attempt:
    kube-scheduler starts the binding goroutines, then PATCHes the PodGroup's condition,
    then observes (schedule_one_podgroup.go:860, 920, 924-935). So /metrics is read again, every
    0.25 s for at most SETTLE_S, until every PodGroup of the run has a scheduled attempt
    (all are bound by then); the process is idle meanwhile, after the window."""
    t0 = time.monotonic()
    scrapes = 0
    try:
        while True:
            text = await scrape.fetch(port)
            scrapes += 1
            figures = scrape.attempt_figures(text)
            if figures["scheduled"]["attempts"] >= groups or time.monotonic() - t0 > SETTLE_S:
                break
            await asyncio.sleep(0.25)
    except (aiohttp.ClientError, OSError, TimeoutError, RuntimeError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "scrapes": scrapes}
    with contextlib.suppress(OSError):
        await asyncio.to_thread(keep.write_text, text)
    return {**figures, "scrapes": scrapes, "settle_s": round(time.monotonic() - t0, 2)}


async def _create_in_steps(
    api: Api,
    manifests: list[dict[str, Any]],
    concurrency: int,
    created: dict[str, float] | None,
    progress: Progress,
    what: str,
    step: int = 1000,
) -> int:
    """create_pods, a thousand at a time, saying how far it got."""
    fails = 0
    for i in range(0, len(manifests), step):
        fails += await create_pods(api, manifests[i : i + step], concurrency, created)
        progress(f"{what} {min(i + step, len(manifests))}/{len(manifests)} created", False)
    return fails


async def _delete_pods(api: Api, names: Iterable[str], concurrency: int) -> None:
    it = iter(list(names))

    async def worker() -> None:
        for name in it:
            await retrying(
                lambda n=name: api.request(
                    "DELETE",
                    f"/api/v1/namespaces/{NAMESPACE}/pods/{n}?gracePeriodSeconds=0",
                    ok=(404,),
                )
            )

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _create_paced(
    api: Api,
    manifests: list[dict[str, Any]],
    rate: float,
    concurrency: int,
    created: dict[str, float],
) -> None:
    """Create pod i at start + i / rate (at most `concurrency` in flight)."""
    sem = asyncio.Semaphore(concurrency)
    start = time.monotonic()

    async def one(body: dict[str, Any]) -> None:
        async with sem:
            await create_pods(api, [body], 1, created)

    tasks = []
    for i, body in enumerate(manifests):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(body)))
    await asyncio.gather(*tasks)


async def _wait(pred: Callable[[], bool], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {limit_s:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


def _logged_gomaxprocs(log: Path) -> str | None:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    # the log is appended to by every run: the last start is this run's
    found = re.findall(r'"Golang settings".*?GOMAXPROCS="([^"]*)"', text)
    return found[-1] if found else None


def _rfc3339(text: str) -> float:
    import datetime

    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def matrix(
    workloads: list[pw.PinnedWorkload],
    schedulers: list[str],
    shapes: list[str],
) -> list[tuple[pw.PinnedWorkload, str, str]]:
    """Every (workload, shape, contender) to run, in order: a workload's shapes and
    contenders follow each other so they share its init set; the ceiling runs only the
    drain shape of the workloads marked for it."""
    out = []
    for w in workloads:
        for shape in w.shapes:
            if shape not in shapes:
                continue
            for c in schedulers:
                if c == "ceiling" and not (w.ceiling and shape == "drain"):
                    continue
                out.append((w, shape, c))
    return out


def matrix_cost(todo: list[tuple[pw.PinnedWorkload, str, str]]) -> dict[int, dict[str, int]]:
    """Per size: runs, pods the contenders schedule, and pods the harness creates (init
    sets as the run order rebuilds or tops them up, drain backlogs, arrival pods; victims
    recreated are not counted). The wall time of a matrix follows these counts."""
    out: dict[int, dict[str, int]] = {}
    prev: pw.PinnedWorkload | None = None
    for w, *_ in todo:
        c = out.setdefault(w.nodes, {"runs": 0, "scheduled": 0, "created": 0})
        c["runs"] += 1
        c["scheduled"] += w.measured_pods
        c["created"] += w.measured_pods
        if prev is None or (prev.nodes, prev.init_set) != (w.nodes, w.init_set):
            c["created"] += w.init_pods
        elif w.init_pods > prev.init_pods:
            c["created"] += w.init_pods - prev.init_pods
        prev = w
    return out


async def run_suite(
    workloads: list[pw.PinnedWorkload],
    schedulers: list[str],
    shapes: list[str],
    plan: pinning.PinningPlan,
    opts: PinnedOptions,
    progress: Progress,
    on_result: Callable[[dict[str, Any]], None],
    on_cluster: Callable[[int, dict[str, Any]], None],
) -> None:
    """Run the matrix size by size (one cluster per size)."""
    # the control plane dies with the harness (kas_dev/cluster/process.py): an
    # interrupted matrix leaves no cluster behind
    os.environ["KAS_CLUSTER_DIE_WITH_PARENT"] = "1"
    todo = matrix(workloads, schedulers, shapes)
    opts.generic_workload = opts.generic_workload or any(w.gangs for w, _, _ in todo)
    total = len(todo)
    sizes = list(dict.fromkeys(w.nodes for w, _, _ in todo))
    i = 0
    t_suite = time.monotonic()
    for size in sizes:
        session = Session(size, plan, opts)
        try:
            try:
                await session.start(progress, f"[size {size}]")
            except Exception as exc:
                # the machine could not hold this size: say so for every run of it
                why = f"cluster of {size} nodes did not come up: {type(exc).__name__}: {exc}"
                progress(f"[size {size}] {why}", True)
                on_cluster(size, {**session.info, "error": why})
                for w, shape, c in [t for t in todo if t[0].nodes == size]:
                    i += 1
                    on_result({"size": size, "workload": dataclasses.asdict(w), "shape": shape,
                               "scheduler": c, "ok": False, "error": why})  # fmt: skip
                continue
            on_cluster(size, session.info)
            for w, shape, c in [t for t in todo if t[0].nodes == size]:
                i += 1
                elapsed = time.monotonic() - t_suite
                label = f"[{i}/{total} {elapsed:.0f}s] {size}n {w.name} {shape} x {c}"
                r = await session.run(w, shape, c, progress, label)
                on_result(r)
                m = r.get("measured") or {}
                tp, cpu = m.get("throughput"), m.get("cpu_ms_per_pod")
                status = "ok" if r["ok"] else f"NOT OK ({r['error']})"
                figs = ""
                if tp:
                    figs = f"; {tp:.0f} pods/s"
                if cpu:
                    figs += f", {cpu:.2f} CPU ms/pod"
                pga = r.get("pod_group_attempts") or {}
                pg = pga.get("scheduled") or {}
                if pg.get("mean_ms") is not None:
                    figs += (f"; pod-group attempt {pg['mean_ms']:.2f} ms mean over "
                             f"{pg['attempts']} scheduled")  # fmt: skip
                elif pga.get("error"):
                    figs += f"; no pod-group figures: {pga['error']}"
                progress(f"{label}: {status}{figs}", True)
        finally:
            await session.stop()
    print(f"bench: pinned suite: {total} runs in {time.monotonic() - t_suite:.0f}s",
          file=sys.stderr)  # fmt: skip
