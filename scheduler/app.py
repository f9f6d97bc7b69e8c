"""The scheduler process: wiring of config, client, informers, cache, queue, frameworks,
the scheduling loop, the health/metrics server and leader election.

Start-up order: config (exit 2 on any problem, before touching the cluster) ->
connection -> informers (all replicas keep caches warm) -> server -> wait for caches ->
leader election (if enabled) -> queue and loop run while leading.

Shutdown (SIGTERM/SIGINT), in order: /readyz starts failing; the loop stops taking pods;
in-flight binds get a grace period, then are cancelled (each cancel forgets its
assumption); preemption tasks likewise; events are flushed; the lease is released so a
follower takes over at once; informers stop; the connection closes.

Losing the lease while leading ends the process with exit code 1, as kube-scheduler
does: the Deployment restarts it as a follower with fresh state. Scheduling stops the
moment renewal fails, before the lease could be taken by another replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler import catalog
from scheduler.algorithm import ProfileAlgorithm
from scheduler.cache import Cache, Nominator
from scheduler.client.connection import Connection
from scheduler.client.dispatcher import Dispatcher, DispatcherSettings
from scheduler.client.events import EventRecorder, pod_ref
from scheduler.client.informer import NODES, PODS, Informer, Resource, Store
from scheduler.client.lean_json import list_page, watch_event
from scheduler.config import (
    SchedulerConfiguration,
)
from scheduler.dra.device_state import DeviceState
from scheduler.dra_informers import dra_informers
from scheduler.eventhandlers import (
    NodeEventHandler,
    PodEventHandler,
    PodGroupEventHandler,
    raw_pod_summary,
)
from scheduler.explain import EXPLAIN_PATH, AttemptLog, Explainer
from scheduler.explain import http_handler as explain_http_handler
from scheduler.features import FeatureGates
from scheduler.framework.handle import Handle, InMemoryListers
from scheduler.framework.runtime import Framework
from scheduler.framework.waiting_pods import WaitingPods
from scheduler.group_status_writer import GroupStatusWriter
from scheduler.leader import LeaderElectionSettings, LeaderElector, LeaseFence
from scheduler.lister_informers import lister_informers, pdb_informer
from scheduler.loop import SchedulingLoop
from scheduler.metrics import (
    LabelledChildren,
    PodGroupMetrics,
    PolicyMetrics,
    SchedulerMetrics,
    UnitEvictionMetrics,
)
from scheduler.model import (
    NodeInfo,
    PodInfo,
    node_from_dict,
    pod_from_dict,
    pod_update_from_dict,
)
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod_group import pod_group_from_dict
from scheduler.policy.runtime import READINESS_CHECK as POLICIES_READINESS_CHECK
from scheduler.policy.runtime import PolicyRuntime
from scheduler.preemption import ExecutorSettings, PreemptionExecutor
from scheduler.preemption.default_preemption import PreemptionServices
from scheduler.preemption.pod_group_executor import PodGroupPreemptions
from scheduler.preemption.unit_evictions import UnitEvictions
from scheduler.queue import SchedulingQueue
from scheduler.server import DelegationOptions, HealthServer, ServingOptions
from scheduler.serving.certs import ServingCert
from scheduler.status_writer import StatusWriter
from scheduler.supervisor import Supervisor
from scheduler.workload_selectors import (
    WorkloadSelectors,
)

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2
SHUTDOWN_GRACE = 10.0
# pods in a terminal phase hold no resources and need no scheduling
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
# GenericWorkload: the PodGroups the pods name (the version upstream's informer reads)
POD_GROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups")


def pod_group_key(pod: PodInfo) -> str:
    """The queue's key for a pod's PodGroup ("" for a pod on its own)."""
    return f"{pod.namespace}/{pod.pod_group}" if pod.pod_group else ""


@dataclass
class RunOptions:
    kubeconfig: str | None = None
    serving: ServingOptions = field(default_factory=ServingOptions)
    serving_cert: ServingCert | None = None  # None: self-signed, in memory
    delegation: DelegationOptions = field(default_factory=DelegationOptions)
    leader_elect: bool | None = None  # None: as the config says
    identity: str = ""
    event_buffer_size: int = 1000
    """events held for the API server before a burst makes the recorder drop (counted)."""
    preemption_policies: bool = False  # reconcile PreemptionPolicy objects (scheduler.policy)
    features: FeatureGates = field(default_factory=FeatureGates)
    watch_list: bool = True
    """the pods' and nodes' informers fill their stores with a streaming watch list, as
    upstream's do (client/informer.py); off only for a test connection that cannot."""
    on_caches_synced: Callable[[], None] | None = None
    """called once, when every informer has first listed, before leader election and
    scheduling start: the process settles its heap there (scheduler/collector.py)."""


class SchedulerApp:
    def __init__(
        self,
        cfg: SchedulerConfiguration,
        connection: Connection,
        options: RunOptions,
        *,
        lease_connection: Connection | None = None,
    ) -> None:
        self.cfg = cfg
        self.connection = connection
        # upstream builds a separate clientset for leader election (its own connections
        # and its own rate limiter): the Lease must never queue behind scheduling writes.
        # A backlog of unschedulable pods once kept renewals waiting in the shared token
        # bucket for 36.7 s (issue 10). Without a connection of its own (tests) the
        # elector still gets its own dispatcher, hence its own token bucket.
        self.lease_connection = lease_connection or connection
        self.options = options
        self.tasks = Supervisor()
        # process state the callbacks below read: set before anything can call them
        self._leading = asyncio.Event()
        self._lost_lease = False
        self._stop = asyncio.Event()
        self.elector: LeaderElector | None = None  # created below when leader election is on
        self.identity = options.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.metrics = SchedulerMetrics()
        self.features = options.features
        # registered only with the gate, as upstream's (metrics.go)
        self.pod_group_metrics = (
            PodGroupMetrics(self.metrics.registry) if self.features.generic_workload else None
        )
        self.profile_names = [p.scheduler_name for p in cfg.profiles]
        self.leader_elect = (
            cfg.leader_election.leader_elect
            if options.leader_elect is None
            else options.leader_elect
        )
        # built in dependency order; each phase only uses what the earlier ones made
        self._build_client()
        self._build_cache()
        self._build_frameworks()
        self._build_queue_and_informers()
        self._build_loop_and_server()
        self._build_leader_election()

    def _build_client(self) -> None:
        """The dispatchers (scheduling and lease), the lease fence, the event recorder."""
        m = self.metrics
        cc = self.cfg.client_connection

        # children looked up once each (metrics.LabelledChildren), shared by both dispatchers
        api_requests = LabelledChildren(m.api_requests)
        api_request_duration = LabelledChildren(m.api_request_duration)

        def dispatcher(on: Connection) -> Dispatcher:
            # each with its own token bucket and slots; both counted in the same metrics
            return Dispatcher(
                on,
                DispatcherSettings(qps=cc.qps, burst=cc.burst),
                on_request=lambda verb, res, code: api_requests(verb, res, code).inc(),
                on_latency=lambda verb, res, s: api_request_duration(verb, res).observe(s),
                on_failed=lambda verb, res, why: m.api_write_failures.labels(
                    verb=verb, resource=res, reason=why
                ).inc(),
            )

        self.dispatcher = dispatcher(self.connection)
        self.lease_dispatcher = dispatcher(self.lease_connection)
        dispatchers = (self.dispatcher, self.lease_dispatcher)
        m.api_dispatcher_pending.set_function(
            lambda: sum(d.statistics().pending_calls for d in dispatchers)
        )
        # leader-only writes check the lease right before they are sent (leader.py);
        # the elector is attached below when leader election is on
        self.fence = LeaseFence(
            on_closed=lambda op: m.lease_fenced_writes.labels(operation=op).inc()
        )
        self.dispatcher.fence = self.fence.open
        self.dispatcher.lease_deadline = self.fence.held_until
        self.events = EventRecorder(
            self.dispatcher,
            # no default controller: every event names its pod's profile, as upstream's
            # recorder per profile does (pkg/scheduler/profile/profile.go newProfile)
            reporting_instance=self.identity,
            buffer_size=self.options.event_buffer_size,
            on_dropped=lambda reason: m.events_dropped.labels(reason=reason).inc(),
        )

    def _build_cache(self) -> None:
        """The cache (and its size metrics), the nominator, the listers."""
        m = self.metrics
        self.cache = Cache()
        # read at scrape time; upstream sets the same three from its cache every second
        m.cache_size.labels(type="nodes").set_function(self.cache.node_count)
        m.cache_size.labels(type="pods").set_function(self.cache.pod_count)
        m.cache_size.labels(type="assumed_pods").set_function(
            lambda: self.cache.statistics()["assumed_pods"]
        )
        self.nominator = Nominator()
        # the pods as the API server last said (the pod informer's store): the parts built
        # before the informer (the volume binder's pod_exists, the status writer, explain)
        # read this, not the informer
        self.pods: Store[PodInfo] = Store()
        self.listers = InMemoryListers()
        self.workloads = WorkloadSelectors()

    def _build_frameworks(self) -> None:
        """One Framework per profile, with DefaultPreemption and its executor."""
        m = self.metrics
        self.frameworks: dict[str, Framework] = {}
        self.pdb_informer: Informer[PDBInfo] = pdb_informer(self.connection)
        # GenericWorkload: an all-members PodGroup's victims are deleted together or not
        # at all, by both executors (dry-run DELETEs first, a torn group's survivors retried)
        self.unit_evictions: UnitEvictions | None = (
            UnitEvictions(
                self.dispatcher,
                self.fence.open,
                self.cache.gang,
                self.cache.get_pod,
                metrics=UnitEvictionMetrics(m.registry),
                tasks=self.tasks.group("unit-retries"),
            )
            if self.features.generic_workload
            else None
        )
        self.executor = PreemptionExecutor(
            self.dispatcher,
            self.events,
            # the gate after a successful task watches every victim in the cache
            pod_lookup=self.cache.get_pod,
            metrics=m,
            # a preemptor whose tasks keep failing backs off as pods do
            settings=ExecutorSettings(
                retry_initial=float(self.cfg.pod_initial_backoff_seconds),
                retry_max=float(self.cfg.pod_max_backoff_seconds),
            ),
            fence=self.fence.open,
            tasks=self.tasks.group("preemptions"),
            units=self.unit_evictions,
        )
        self.policies: PolicyRuntime | None = None
        if self.options.preemption_policies:
            self.policies = self._policy_runtime()
        # GenericWorkload: preemption for whole pod groups shares the evictions
        self.pod_group_preemptions: PodGroupPreemptions | None = (
            PodGroupPreemptions(
                self.executor.evictions,
                self.events,
                pod_lookup=self.cache.get_pod,
                tasks=self.tasks.group("podgroup-preemptions"),
                # a group whose tasks keep failing backs off as its pods do
                retry_initial=self.executor.settings.retry_initial,
                retry_max=self.executor.settings.retry_max,
                units=self.unit_evictions,
            )
            if self.features.generic_workload
            else None
        )
        services = PreemptionServices(
            executor=self.executor,
            own_schedulers=frozenset(self.profile_names),
            pod_lookup=self.cache.get_pod,
            pdbs=self.pdb_informer.list,
            metrics=m,
            victim_policy=self.policies.store if self.policies is not None else None,
            pod_group_preemptions=self.pod_group_preemptions,
            generic_workload=self.features.generic_workload,
        )
        registry = catalog.registry(services)
        # DynamicResourceAllocation: one view of slices, classes and claims for every
        # profile (upstream's DRA manager is shared the same way), filled by informers
        self.device_state = DeviceState() if self.features.dynamic_resource_allocation else None
        # one map of pods waiting at Permit for every profile, so preemption finds a
        # victim waiting in any of them
        self.waiting_pods = WaitingPods()
        for prof in self.cfg.profiles:
            handle = Handle.from_listers(
                self.listers, binder=self._bind, volume_api=self.dispatcher,
                node_lookup=self.cache.node, pod_exists=self._pod_exists,
                nominator=self.nominator, waiting_pods=self.waiting_pods,
            )  # fmt: skip
            handle.workload_selectors = self.workloads
            handle.gang_lookup = self.cache.gang
            if self.device_state is not None:
                handle.device_state = self.device_state
                handle.resource_claim_api = self.dispatcher
            self.frameworks[prof.scheduler_name] = Framework(
                prof,
                registry,
                handle,
                global_percentage_of_nodes_to_score=self.cfg.percentage_of_nodes_to_score,
            )

    def _build_queue_and_informers(self) -> None:
        """The queue (from the frameworks), then the informers that feed it."""
        m = self.metrics
        first = self.frameworks[self.profile_names[0]]
        events_to_register: dict[str, list[Any]] = {}
        for fwk in self.frameworks.values():
            for plugin, evs in fwk.events_to_register().items():
                events_to_register.setdefault(plugin, []).extend(evs)
        # a QueueSort plugin may state its order as a key too (PrioritySort does): activeQ
        # then compares keys in C; one with only `less` gets the less-function heap
        sort_key = getattr(first.queue_sort_plugin, "sort_key", None)
        self.queue: SchedulingQueue[PodInfo] = SchedulingQueue(
            less=first.queue_sort_less,
            sort_key=sort_key,
            pre_enqueue=self._pre_enqueue,
            events_to_register=events_to_register,
            pod_initial_backoff=float(self.cfg.pod_initial_backoff_seconds),
            pod_max_backoff=float(self.cfg.pod_max_backoff_seconds),
            metrics=m,
            group_of=pod_group_key,
        )
        self.queue.defer_moves()  # until the caches are first filled (run())
        for fwk in self.frameworks.values():
            fwk.set_pod_activator(self.queue)
        if self.policies is not None:
            queue = self.queue

            def requeue_waiting() -> None:
                # the rules changed: every waiting pod gets a fresh attempt now (rare: a
                # policy created, changed or deleted)
                queue.activate([i.pod for i, where in queue.pending_pods()])

            self.policies.set_requeue_waiting(requeue_waiting)
        self.pod_handler = PodEventHandler(
            self.cache, self.queue, self.nominator, self.profile_names,
            on_refused=self._refuse_pod, gangs=self.features.generic_workload,
            dra=self.features.dynamic_resource_allocation,
            # upstream RejectWaitingPod's words (framework/runtime/framework.go)
            reject_waiting=lambda uid: self.waiting_pods.reject(uid, "", "removed"),
        )  # fmt: skip
        self.node_handler = NodeEventHandler(self.cache, self.queue)
        self.pod_informer: Informer[PodInfo] = Informer(
            self.connection, PODS, pod_from_dict, self.pod_handler,
            update_transform=pod_update_from_dict,
            field_selector=POD_FIELD_SELECTOR, on_transform_error=self._bad_pod, name="pods",
            store=self.pods, list_decoder=list_page, event_decoder=watch_event,
            watch_list=self.options.watch_list,
        )  # fmt: skip
        self.node_informer: Informer[NodeInfo] = Informer(
            self.connection, NODES, node_from_dict, self.node_handler, name="nodes",
            list_decoder=list_page, event_decoder=watch_event,
            watch_list=self.options.watch_list,
        )  # fmt: skip
        self.other_informers: list[Informer[Any]] = [
            self.pdb_informer,
            *lister_informers(self.connection, self.listers, self.workloads, self.queue),
        ]
        if self.device_state is not None:
            queue = self.queue
            self.other_informers.extend(
                dra_informers(self.connection, self.device_state, lambda: queue)
            )
        if self.features.generic_workload:
            pod_groups = PodGroupEventHandler(self.cache, self.queue)
            self.other_informers.append(
                Informer(
                    self.connection,
                    POD_GROUPS,
                    pod_group_from_dict,
                    pod_groups,
                    name="podgroups",
                )
            )
        # one child cache for all informers (metrics.LabelledChildren)
        relists = LabelledChildren(m.informer_relists)
        informer_events = LabelledChildren(m.informer_events)
        for inf in self._informers():
            inf.on_list = lambda res: relists(res).inc()
            inf.on_event = lambda res, t: informer_events(res, t).inc()

    def _build_loop_and_server(self) -> None:
        """The status writer, the loop, the health/metrics/explain server."""
        m = self.metrics
        self.status_writer = StatusWriter(
            self.dispatcher.patch_pod_status,
            metrics=m,
            is_pending=self._is_pending,
            tasks=self.tasks.group("status-writes"),
        )
        self.loop = SchedulingLoop(
            cache=self.cache,
            queue=self.queue,
            nominator=self.nominator,
            frameworks=self.frameworks,
            algorithms={name: ProfileAlgorithm(fwk, m) for name, fwk in self.frameworks.items()},
            events=self.events,
            status_writer=self.status_writer,
            metrics=m,
            current_pod=self._current_pod,
            fence=self.fence.open,
            binds=self.tasks.group("binds"),
            pod_group_metrics=self.pod_group_metrics,
            pod_group_conditions=(
                GroupStatusWriter(
                    self.dispatcher.patch_pod_group_status,
                    metrics=self.pod_group_metrics,
                    tasks=self.tasks.group("podgroup-status-writes"),
                )
                if self.pod_group_metrics is not None
                else None
            ),
        )
        opts = self.options
        self.server = HealthServer.delegating(
            m.registry,
            lambda path, body: self.connection.request("POST", path, body=body),
            options=opts.serving,
            delegation=opts.delegation,
            cert=opts.serving_cert,
        )
        self.attempts = AttemptLog()
        self.loop.on_unschedulable = self.attempts.record
        self.explainer = Explainer(
            pod_lookup=self.pods.get,
            frameworks=self.frameworks,
            cache=self.cache,
            nominator=self.nominator,
            attempts=self.attempts,
            queue_of=self.queue.where,
            queued=self.queue.get,
            gangs=self.features.generic_workload,
            is_leader=lambda: not self.leader_elect or self._leading.is_set(),
        )
        explain = explain_http_handler(self.explainer, can_read_pods=self.server.can_read_pods)
        self.server.add_get(EXPLAIN_PATH, explain, authorizes_itself=True)
        self.server.add_explain(explain)
        self.server.add_readiness_check("sched-handler-sync", self._synced_check)
        if self.policies is not None:
            self.server.add_readiness_check(POLICIES_READINESS_CHECK, self.policies.readyz)
        self.server.add_health_check("background-tasks", self.tasks.healthz)

    def _build_leader_election(self) -> None:
        """The elector, when leader election is on."""
        le = self.cfg.leader_election
        if self.leader_elect:
            self.elector = LeaderElector(
                self.lease_dispatcher,
                LeaderElectionSettings(
                    namespace=le.resource_namespace,
                    name=le.resource_name,
                    identity=self.identity,
                    lease_duration=le.lease_duration,
                    renew_deadline=le.renew_deadline,
                    retry_period=le.retry_period,
                ),
                on_started_leading=self._started_leading,
                on_stopped_leading=self._stopped_leading,
            )
            self.fence.elector = self.elector
            self.server.add_health_check("leaderElection", self.elector.healthz)

    def _policy_runtime(self) -> PolicyRuntime:
        def ns_labels(name: str) -> Any:
            ns = self.listers.get_namespace(name)
            return ns.labels if ns is not None else None

        return PolicyRuntime(
            self.connection,  # the scheduler's own identity and server address
            self.dispatcher,
            ns_labels,
            is_leader=lambda: (
                (not self.leader_elect or self._leading.is_set()) and not self._lost_lease
            ),
            metrics=PolicyMetrics(self.metrics.registry),
        )

    # ------------------------------------------------------------------ callbacks
    async def _bind(self, pod: PodInfo, node: str) -> None:
        await self.dispatcher.bind(pod.namespace, pod.name, pod.uid, node)

    def _pre_enqueue(self, pod: PodInfo) -> Any:
        fwk = self.frameworks.get(pod.scheduler_name)
        from scheduler.framework.status import Status

        return fwk.run_pre_enqueue(pod) if fwk is not None else Status.success()

    def _pod_exists(self, pod: PodInfo) -> bool:
        current = self.pods.get(pod.key)
        return current is not None and current.uid == pod.uid

    def _current_pod(self, pod: PodInfo) -> PodInfo | None:
        return self.pods.get(pod.key)

    def _is_pending(self, pod: PodInfo) -> bool:
        current = self.pods.get(pod.key)
        return current is not None and current.uid == pod.uid and not current.node_name

    def _bad_pod(self, raw: dict[str, Any], exc: Exception) -> None:
        ns, name, uid, scheduler_name, node = raw_pod_summary(raw)
        if node or scheduler_name not in self.frameworks or not name:
            log.warning("cannot read pod %s/%s: %s", ns, name, exc)
            return
        message = f"the scheduler cannot understand this pod: {exc}"
        log.warning("invalid pod=%s/%s err=%s", ns, name, exc)
        self.events.event(
            pod_ref(ns, name, uid), "Warning", "FailedScheduling", "Scheduling", message,
            controller=scheduler_name,
        )  # fmt: skip

    def _refuse_pod(self, pod: PodInfo, message: str) -> None:
        """A pending pod this scheduler will not place (eventhandlers): say why, as a
        scheduling failure would."""
        self.events.event(
            pod_ref(pod.namespace, pod.name, pod.uid, pod.resource_version), "Warning",
            "FailedScheduling", "Scheduling", message, controller=pod.scheduler_name,
        )  # fmt: skip
        self.status_writer.unschedulable(pod, "Unschedulable", message, None)

    def _synced_check(self) -> str | None:
        informers = self._informers()
        if all(i.has_synced for i in informers):
            return None
        return "waiting for handlers to sync"

    def _started_leading(self) -> None:
        log.info("became leader identity=%s", self.identity)
        self.metrics.leader.set(1)
        self._leading.set()
        if self.policies is not None:
            self.policies.started_leading()

    def _stopped_leading(self) -> None:
        self.metrics.leader.set(0)
        if self._stop.is_set():
            return
        log.error("lost the lease; stopping scheduling identity=%s", self.identity)
        self._lost_lease = True
        self.tasks.begin_shutdown()  # the loop and the queue's flushes end now, on purpose
        self.loop.stop()
        self.queue.close()
        self._stop.set()

    def _informers(self) -> list[Informer[Any]]:
        return [self.pod_informer, self.node_informer, *self.other_informers]

    # ------------------------------------------------------------------ run
    def request_stop(self) -> None:
        # not ready from the signal on: the shutdown itself starts a few task switches
        # later, and a /readyz answered in between must not say ready
        self.server.begin_shutdown()
        self._stop.set()

    async def run(self) -> int:
        informers = self._informers()
        guard = self.tasks
        for inf in informers:
            guard.spawn(f"informer-{inf.name}", inf.run())
        guard.watch(self.events.start())
        await self.server.start()
        guard.spawn(
            "authentication-config",
            self.server.keep_authentication_config(
                lambda path: self.connection.request("GET", path)
            ),
        )
        if self.policies is not None:
            self.policies.start(guard)
        stop_wait: asyncio.Future[Any] = asyncio.create_task(self._stop.wait())
        synced: asyncio.Future[Any] = asyncio.ensure_future(
            asyncio.gather(*(i.wait_synced() for i in informers))
        )
        first: set[asyncio.Future[Any]] = {stop_wait, synced}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        loop_crashed = False
        if not self._stop.is_set():
            moved = self.queue.resume_moves()
            log.info(
                "caches synced nodes=%d pods=%d pods moved=%d",
                self.cache.node_count(),
                self.cache.pod_count(),
                moved,
            )
            if self.options.on_caches_synced is not None:
                self.options.on_caches_synced()
            if self.elector is not None:
                # returns when leadership ends (lost, or released on stop)
                guard.spawn("leader-election", self._run_elector(), may_return=True)
                # a standby keeps the loop's snapshot current, so its first cycle as
                # leader does not copy every node (loop.py keep_snapshot_current)
                guard.spawn(
                    "standby-snapshot",
                    self.loop.keep_snapshot_current(self._leading),
                    may_return=True,
                )
                lead = asyncio.create_task(self._leading.wait())
                await asyncio.wait({stop_wait, lead}, return_when=asyncio.FIRST_COMPLETED)
                lead.cancel()
            if not self._stop.is_set():
                self.queue.run()
                for flush in self.queue.tasks:
                    guard.watch(flush)
                guard.spawn("assumed-expiry", self._cleanup_assumed())
                loop_task = guard.spawn("scheduling-loop", self.loop.run())
                await asyncio.wait({stop_wait, loop_task}, return_when=asyncio.FIRST_COMPLETED)
                loop_crashed = loop_task.done() and not self._stop.is_set()
        synced.cancel()
        stop_wait.cancel()
        await self._shutdown()
        return EXIT_RUNTIME if self._lost_lease or loop_crashed else EXIT_OK

    async def _run_elector(self) -> None:
        assert self.elector is not None
        await self.elector.run()
        if not self._stop.is_set():
            self._stopped_leading()

    async def _cleanup_assumed(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            for pod in self.cache.cleanup_assumed_pods():
                log.warning("assumed pod expired (bind never confirmed) pod=%s", pod.key)
                self.queue.assigned_pod_deleted(pod)

    async def _shutdown(self) -> None:
        log.info("shutting down")
        self.tasks.begin_shutdown()
        self.server.begin_shutdown()
        self.loop.stop()
        self.queue.close()
        await self.loop.drain_binds(SHUTDOWN_GRACE if not self._lost_lease else 0.0)
        grace = SHUTDOWN_GRACE if not self._lost_lease else 0.0
        # both executors' running tasks get the same grace, at the same time
        drains = [self.executor.shutdown(grace)]
        if self.pod_group_preemptions is not None:
            drains.append(self.pod_group_preemptions.shutdown(grace))
        await asyncio.gather(*drains)
        if self.unit_evictions is not None:
            # a torn group's retries stop (counted as abandoned): the next leader decides
            await self.unit_evictions.close()
        await self.status_writer.drain(SHUTDOWN_GRACE)
        await self.events.stop(2.0)
        if self.policies is not None:
            await self.policies.stop()
        if self.elector is not None:
            self.elector.stop()
        tasks = self.tasks.tasks
        for t in tasks:
            if t.get_name() == "leader-election":
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(t), 5.0)
        for inf in self._informers():
            inf.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.server.stop()
        log.info("stopped")
