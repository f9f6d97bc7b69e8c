"""One benchmark run: a fresh cluster, one workload, one contender.

Steps: start a LocalCluster in a temporary directory (API server with an audit policy
that records the contender's requests only), create the nodes, the namespace, the
PriorityClasses and the contender's ServiceAccount token; create the init pods already
bound (spec.nodeName); start a watch that records, with monotonic timestamps, when each
pod is first seen bound and when it is first seen deleted; start the contender as a
process; bind one warm-up pod (proves the contender has synced); create the measured
pods through a bounded pool, and the churn pods at their rate; wait until every measured
pod is bound or the deadline passes; stop the contender; count its API calls from the
audit log; tear the cluster down.

The ceiling differs in one way: its measured pods are all created (and seen by the
watch) before the raw binder starts, and its figure is the bind rate alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import os
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
import yaml

from bench import audit, stats
from bench.api import Api, ApiError
from bench.procs import Monitor, command_for
from bench.workloads import (
    NAMESPACE,
    ROLE_LABEL,
    Workload,
    churn_pod,
    init_pods,
    measured_pods,
    node_groups,
    priority_classes,
    warmup_pod,
)
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import node_manifests


@dataclass
class Options:
    qps: float = 5000.0
    burst: int = 5000
    concurrency: int = 64
    """In-flight creates of the harness and in-flight binds of the ceiling."""
    delete_latency: float = 0.0
    """Seconds a real admission webhook holds every pod DELETE in the bench namespace
    (tests/webhook.py), to measure preemption when the API answers deletes slowly."""
    keep: bool = False
    workdir: Path | None = None


@dataclass
class PodRecord:
    role: str
    node: str | None = None
    bound_at: float | None = None
    deleted_at: float | None = None
    priority: int = 0


@dataclass
class Recorder:
    """Watches the benchmark namespace and notes, per pod, when it was first seen bound
    and first seen terminating or gone (monotonic clock of this process)."""

    api: Api
    pods: dict[str, PodRecord] = field(default_factory=dict)
    watching_since: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    label_selector: str = ""
    restarts: int = 0
    """Watches that broke and were resumed by a fresh LIST."""
    """Only pods matching it (the pinned suite leaves its many init pods out where no
    victim can come from them)."""

    def _note(self, obj: dict[str, Any], deleted: bool, now: float) -> None:
        meta = obj.get("metadata", {})
        name = meta.get("name")
        if not name:
            return
        rec = self.pods.get(name)
        if rec is None:
            rec = PodRecord(
                role=(meta.get("labels") or {}).get(ROLE_LABEL, "?"),
                priority=int(obj.get("spec", {}).get("priority") or 0),
            )
            self.pods[name] = rec
        node = obj.get("spec", {}).get("nodeName")
        if node and rec.bound_at is None:
            rec.node = node
            rec.bound_at = now
            self.changed.set()
        if (deleted or meta.get("deletionTimestamp")) and rec.deleted_at is None:
            rec.deleted_at = now

    async def _list(self, path: str) -> str:
        listing = await self.api.request("GET", path)
        now = time.monotonic()
        for p in listing["items"]:
            self._note(p, False, now)
        return str(listing["metadata"]["resourceVersion"])

    async def run(self, ready: asyncio.Event) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        if self.label_selector:
            path += "?labelSelector=" + urllib.parse.quote(self.label_selector)
        rv = await self._list(path)
        self.watching_since = time.monotonic()
        ready.set()
        while True:
            try:
                async for ev in self.api.watch(path, rv):
                    now = time.monotonic()
                    kind = ev.get("type")
                    obj = ev.get("object", {})
                    if kind == "ERROR":
                        raise ApiError("WATCH", path, int(obj.get("code", 500)), obj)
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        self._note(obj, kind == "DELETED", now)
            except (TimeoutError, ApiError, OSError, aiohttp.ClientError, ValueError) as exc:
                # the API server drops a watcher that falls behind (the harness shares
                # its core with the control plane in the pinned suite): list again, so
                # nothing bound in the gap is missed (its time is the re-list's; counted)
                self.restarts += 1
                print(f"\n  watch interrupted ({exc!r}); listing again", file=sys.stderr)
                await asyncio.sleep(0.2)
                with contextlib.suppress(TimeoutError, ApiError, OSError, aiohttp.ClientError):
                    rv = await self._list(path)

    def bound(self, role: str) -> dict[str, float]:
        return {
            n: r.bound_at for n, r in self.pods.items() if r.role == role and r.bound_at is not None
        }

    def evicted_unbound(self, role: str) -> list[str]:
        """Pods of `role` deleted before anyone saw them bound: a measured pod has
        upstream's priority 0, the victims' own, so a preemptor may evict it while its
        bind is in flight (both schedulers take assumed pods as candidates)."""
        return [n for n, r in self.pods.items()
                if r.role == role and r.bound_at is None and r.deleted_at is not None]  # fmt: skip

    def count_bound(self, role: str) -> int:
        return sum(1 for r in self.pods.values() if r.role == role and r.bound_at is not None)


async def create_pods(
    api: Api,
    manifests: Iterable[dict[str, Any]],
    concurrency: int,
    created: dict[str, float] | None = None,
) -> int:
    """Create pods with at most `concurrency` in flight; notes the monotonic time each
    create was sent. Retries 429/5xx a few times. Returns the number of failures."""
    it = iter(manifests)
    failures = 0

    async def worker() -> None:
        nonlocal failures
        for body in it:
            ns = body["metadata"]["namespace"]
            for attempt in range(5):
                t = time.monotonic()
                try:
                    await api.request("POST", f"/api/v1/namespaces/{ns}/pods", body)
                except ApiError as exc:
                    if exc.status in (429, 500, 503, 504) and attempt < 4:
                        await asyncio.sleep(0.1 * (attempt + 1))
                        continue
                    failures += 1
                    print(f"\n  create {body['metadata']['name']}: {exc}", file=sys.stderr)
                    break
                except (TimeoutError, OSError) as exc:
                    if attempt < 4:
                        await asyncio.sleep(0.1 * (attempt + 1))
                        continue
                    failures += 1
                    print(f"\n  create {body['metadata']['name']}: {exc}", file=sys.stderr)
                    break
                if created is not None:
                    created.setdefault(body["metadata"]["name"], t)
                break

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failures


async def churn(api: Api, w: Workload, created: dict[str, float], stop: asyncio.Event) -> None:
    """Churn pods at w.churn_per_second, at most w.churn_max, until `stop` is set."""
    if not w.churn_role or w.churn_per_second <= 0:
        return
    interval = 1.0 / w.churn_per_second
    start = time.monotonic()
    tasks = []
    for i in range(w.churn_max):
        delay = start + i * interval - time.monotonic()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
        if stop.is_set():
            break
        tasks.append(asyncio.create_task(create_pods(api, [churn_pod(w, i)], 1, created)))
    await asyncio.gather(*tasks)


async def _setup(api: Api, cluster: LocalCluster, run_dir: Path) -> Path:
    """Namespace, PriorityClasses, and the contender's own ServiceAccount (cluster-admin)
    and a kubeconfig with its token."""
    await api.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    for pc in priority_classes():
        await api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", pc)
    ns, sa = audit.SA_NAMESPACE, audit.SA_NAME
    await api.request(
        "POST", f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": sa}}
    )
    await api.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": sa},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
        },
    )
    tr = await api.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 86400},
        },
    )
    ca = base64.b64encode(cluster.ca_file.read_bytes()).decode()
    kc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": cluster.api_url, "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": sa, "user": {"token": tr["status"]["token"]}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": sa}}],
        "current-context": "local",
    }
    path = run_dir / "scheduler-kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    path.chmod(0o600)
    return path


async def _untaint_nodes(api: Api, w: Workload, concurrency: int) -> None:
    """Leave each node only the workload's own taints. The API server's
    TaintNodesByCondition admission gives every new node node.kubernetes.io/not-ready,
    and the local cluster runs no node-lifecycle controller to take it off again."""
    wanted = {
        m["metadata"]["name"]: m["spec"].get("taints") for m in node_manifests(node_groups(w))
    }
    sem = asyncio.Semaphore(concurrency)

    async def fix(name: str, taints: list[dict[str, str]] | None) -> None:
        async with sem:
            await api.request(
                "PATCH",
                f"/api/v1/nodes/{name}",
                {"spec": {"taints": taints}},
                content_type="application/merge-patch+json",
            )

    await asyncio.gather(*(fix(n, t) for n, t in wanted.items()))


async def _wait(pred: Callable[[], bool], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {limit_s:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


Progress = Callable[[str, bool], None]


async def run_one(
    w: Workload, contender: str, opts: Options, progress: Progress, label: str = ""
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="kas-bench-", dir=opts.workdir))
    cluster = LocalCluster(base / "cluster")
    policy_file = base / "audit-policy.yaml"
    policy_file.write_text(yaml.safe_dump(audit.policy()))
    audit_log = base / "audit.log"
    result: dict[str, Any] = {
        "workload": dataclasses.asdict(w),
        "scheduler": contender,
        "ok": False,
        "error": None,
        "dir": str(base) if opts.keep else None,
    }
    phases: dict[str, float] = {}
    t = time.monotonic()
    monitor: Monitor | None = None
    hook: Any = None
    try:
        progress(f"{label}: starting a cluster with {w.nodes} nodes", True)
        for attempt in (1, 2):
            try:
                await asyncio.to_thread(
                    cluster.up,
                    node_groups(w),
                    extra_apiserver_args=audit.apiserver_args(policy_file, audit_log),
                )
                break
            except ClusterError as exc:
                if attempt == 2:
                    raise
                progress(f"{label}: cluster did not start ({exc}); one more try", True)
                await asyncio.to_thread(cluster.purge)
                audit_log.unlink(missing_ok=True)
        phases["cluster_up_s"] = time.monotonic() - t
        assert cluster.state is not None
        bin_dir = Path(cluster.state.bin_dir)
        async with Api(
            cluster.kubeconfig, connections=opts.concurrency + 8, user_agent="kas-bench-harness"
        ) as api:
            await _untaint_nodes(api, w, opts.concurrency)
            kubeconfig = await _setup(api, cluster, base)
            if opts.delete_latency > 0:
                hook = await asyncio.to_thread(_start_delete_latency, cluster, opts.delete_latency)
            t = time.monotonic()
            progress(f"{label}: creating {w.init_pods} init pods (bound by spec.nodeName)", True)
            fails = await create_pods(api, init_pods(w), opts.concurrency)
            if fails:
                raise RuntimeError(f"{fails} init pods could not be created")
            phases["init_pods_s"] = time.monotonic() - t

            rec = Recorder(api)
            ready = asyncio.Event()
            watcher = asyncio.create_task(rec.run(ready))
            await asyncio.wait_for(ready.wait(), 30)

            created: dict[str, float] = {}
            churned: dict[str, float] = {}
            manifests = list(measured_pods(w))
            if contender == "ceiling":
                progress(f"{label}: pre-creating {len(manifests)} measured pods", True)
                fails = await create_pods(api, manifests, opts.concurrency, created)
                await _wait(
                    lambda: all(n in rec.pods for n in created),
                    60,
                    "the watch to see the pre-created pods",
                )

            argv = command_for(
                contender,
                run_dir=base,
                bin_dir=bin_dir,
                kubeconfig=kubeconfig,
                qps=opts.qps,
                burst=opts.burst,
                concurrency=opts.concurrency,
            )
            result["argv"] = argv
            monitor = Monitor(contender, argv, base / f"{contender}.log")
            t = time.monotonic()
            monitor.start()
            if contender != "ceiling":
                await create_pods(api, [warmup_pod()], 1)
                try:
                    await _wait(
                        lambda: rec.count_bound("warmup") == 1 or not monitor.alive(),
                        90,
                        "the warm-up pod to be bound",
                    )
                except TimeoutError as exc:
                    raise RuntimeError(f"{exc}; last log lines:\n{monitor.tail()}") from exc
                if not monitor.alive():
                    raise RuntimeError(f"{contender} exited: {monitor.tail()}")
            phases["start_to_ready_s"] = time.monotonic() - t
            monitor.mark("measure_start")
            result["host"] = host_load()

            t0 = time.monotonic()
            stop_churn = asyncio.Event()
            # the ceiling measures binding alone: no churn for it
            churner = asyncio.create_task(
                churn(api, w, churned, stop_churn) if contender != "ceiling" else asyncio.sleep(0)
            )
            creator = None
            if contender != "ceiling":
                creator = asyncio.create_task(
                    create_pods(api, manifests, opts.concurrency, created)
                )
            deadline = t0 + w.timeout_s
            last_print = 0.0
            n = len(manifests)
            while True:
                done = rec.count_bound("measured")
                now = time.monotonic()
                if now - last_print >= 1.0 or done >= n:
                    extra = ""
                    if w.churn_role:
                        extra = f", churn {rec.count_bound('churn')}/{len(churned)} bound"
                    progress(
                        f"{label}: bound {done}/{n} in {now - t0:.1f}s"
                        f" ({done / max(now - t0, 1e-9):.0f}/s){extra}",
                        False,
                    )
                    last_print = now
                if done >= n or now > deadline or not monitor.alive():
                    break
                rec.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(rec.changed.wait(), 0.25)
            phases["measure_s"] = time.monotonic() - t0
            monitor.mark("measure_end")
            stop_churn.set()
            await churner
            if creator is not None:
                await creator
            if w.kind == "preemption-async" and contender != "ceiling":
                # give the last preemptors a moment (outside the measured window)
                with contextlib.suppress(TimeoutError):
                    await _wait(
                        lambda: rec.count_bound("churn") >= len(churned), 10, "the preemptors"
                    )
            alive_at_end = monitor.alive()
            await monitor.stop()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

        result.update(_figures(w, contender, rec, created, churned, monitor, audit_log))
        result["phases"] = phases
        result["exited_early"] = not alive_at_end
        result["ok"] = result["measured"]["complete"] and alive_at_end
        if not result["ok"]:
            result["error"] = (
                f"{contender} exited early: {monitor.tail(3)}"
                if not alive_at_end
                else f"only {result['measured']['bound']}/{len(created)} measured pods bound "
                f"in {w.timeout_s:.0f}s"
            )
    except Exception as exc:  # one failed run must not lose the others
        result["error"] = f"{type(exc).__name__}: {exc}"
        progress(f"{label}: FAILED: {result['error']}", True)
    finally:
        if monitor is not None and monitor.alive():
            await monitor.stop()
        if hook is not None:
            await asyncio.to_thread(hook.stop)
        await asyncio.to_thread(cluster.down)
        _reap_leftovers(base)
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)
    return result


def _start_delete_latency(cluster: LocalCluster, seconds: float) -> Any:
    """The test suite's DELETE webhook (a real ValidatingWebhookConfiguration), holding
    every pod DELETE in the bench namespace for `seconds`; kwok's own final deletes pass."""
    from tests.kube import ClusterHandle
    from tests.webhook import DeleteWebhook

    hook = DeleteWebhook(ClusterHandle(cluster), NAMESPACE, name="bench-delete-latency")
    hook.start()
    hook.delay = seconds
    return hook


def _reap_leftovers(run_dir: Path) -> None:
    """Stop any child of this process still running out of `run_dir` after the cluster
    is down (a component the cluster manager restarted and lost track of). Only our own
    children, matched by pid and by the run's own temporary directory."""
    marker = str(run_dir)
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any(marker in arg for arg in child.cmdline()):
                print(f"\n  stopping leftover pid {child.pid} ({child.name()})", file=sys.stderr)
                child.terminate()
                try:
                    child.wait(10)
                except psutil.TimeoutExpired:
                    child.kill()


def host_load() -> dict[str, Any]:
    """What else runs on the machine as measuring starts: the 1-minute load average and
    how many other kube-apiservers / schedulers (other people's clusters) are running."""
    apiservers = schedulers = 0
    for p in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmd = " ".join(p.info["cmdline"] or [])
            if p.info["name"] == "kube-apiserver":
                apiservers += 1
            elif (
                "kube-async-scheduler run" in cmd
                or "scheduler run" in cmd
                or (p.info["name"] == "kube-scheduler")
            ):
                schedulers += 1
    return {
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "other_apiservers": max(0, apiservers - 1),
        "other_schedulers": max(0, schedulers - 1),
    }


def _figures(
    w: Workload,
    contender: str,
    rec: Recorder,
    created: dict[str, float],
    churned: dict[str, float],
    monitor: Monitor,
    audit_log: Path,
) -> dict[str, Any]:
    bound = rec.bound("measured")
    measured = stats.pod_figures(created, bound)
    # how fast the harness sent the creates: shows the creator was not the bottleneck
    measured["create_rate"] = stats.bind_rate(list(created.values()))
    if contender == "ceiling":
        measured["throughput"] = stats.bind_rate(list(bound.values()))
        measured["latency_s"] = {k: None for k in measured["latency_s"]}
    preemptor_role = {"preemption-basic": "measured", "preemption-async": "churn"}.get(w.kind)
    out: dict[str, Any] = {"measured": measured}
    if bound:
        origin = min(bound.values()) if contender == "ceiling" else min(created.values())
        out["timeline"] = stats.timeline(list(bound.values()), origin, step=0.25)
    if w.churn_role:
        out["churn"] = stats.pod_figures(churned, rec.bound("churn"))
    if preemptor_role and contender != "ceiling":
        names = created if preemptor_role == "measured" else churned
        pre_nodes = {n: rec.pods[n].node for n in names if n in rec.pods and rec.pods[n].node}
        pre_bound = rec.bound(preemptor_role)
        pre = stats.pod_figures(names, pre_bound)
        victims = [
            r.node
            for r in rec.pods.values()
            if r.deleted_at is not None
            and r.node
            and r.role in ("init", "measured")
            and r.priority < 10000
        ]
        out["preemption"] = {
            "preemptors": pre["created"],
            "preemptors_bound": pre["bound"],
            "time_to_bind_s": pre["latency_s"],
            "victims": stats.victims_per_preemptor(pre_nodes, [v for v in victims if v]),
        }
    calls = audit.count_file(audit_log)
    scheduled = sum(
        1
        for r in rec.pods.values()
        if r.role in ("measured", "churn", "warmup") and r.bound_at is not None
    )
    calls["scheduled_pods"] = scheduled
    calls["per_scheduled_pod"] = stats.ratio(calls["total"], scheduled)
    calls["source"] = f"kube-apiserver audit log, user {audit.SA_USER}, whole process lifetime"
    out["api_calls"] = calls
    window = monitor.marks.get("measure_end", 0.0) - monitor.marks.get("measure_start", 0.0)
    out["process"] = {
        "cpu_s_total": round(monitor.cpu_total, 3),
        "cpu_s_measured": round(window, 3),
        "peak_rss_mib": round(monitor.peak_rss / 2**20, 1),
        "exit_code": monitor.exit_code,
    }
    return out
