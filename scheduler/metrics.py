"""Every Prometheus metric of the project, in one place.

Names follow upstream kube-scheduler (pkg/scheduler/metrics, subsystem ``scheduler_``) so
existing dashboards and alerts work unchanged. Metrics that upstream does not have (the
API dispatcher, the binding task, the informers, the preemption policy) carry the same
``scheduler_`` prefix and a name that says what they count.

Each :class:`SchedulerMetrics` owns a dedicated :class:`CollectorRegistry`, so tests create
fresh instances and never see each other's samples. The process makes one instance (app.py)
and hands it to every component that records; the /metrics endpoint serves its ``registry``.

Every metric here is recorded somewhere (tests/unit/test_metrics_recorded.py fails on one
that nothing records): a series that always reads zero misleads whoever alerts on it. So
upstream's framework_extension_point_duration_seconds and plugin_execution_duration_seconds
are left out until the framework times its extension points, and permit_wait_duration_seconds
because no Permit plugin makes a pod wait.

Labels are bounded: result/plugin/profile/queue/event names, resources, watch event types,
HTTP verbs and codes. Never pod or node names.

Timing coroutines: prometheus-client's ``Histogram.time()`` used as a decorator on an
``async def`` times only the creation of the coroutine object (microseconds), not its
execution. Take ``clock.now()`` before and after the awaited work and ``.observe()`` the
difference, as the loop and the preemption executor do.

Buckets are exponential where upstream's are; each is stated with its range below.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

__all__ = [
    "LabelledChildren",
    "PodGroupMetrics",
    "SchedulerMetrics",
    "UnitEvictionMetrics",
    "exponential_buckets",
]

M = TypeVar("M", bound=MetricWrapperBase)


class LabelledChildren(Generic[M]):
    """The children of one labelled metric, each looked up once.

    ``metric.labels(...)`` validates and joins the values and takes the metric's lock on
    every call (5-13 us); on the per-request and per-bind paths that added up to a few
    percent of the process's CPU (issue 12). Label sets are bounded (see above), so keeping
    every child seen in a dict costs little and makes each later call one dict hit. The
    child is the very object ``labels()`` returns, so the samples are the same.

    Call with the label values positionally, in the metric's ``labelnames`` order. Nothing
    here removes a child; a metric whose children are removed must not use this.
    """

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: M) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._metric.labels(*values)
            self._children[values] = child
        return child

NAMESPACE = "scheduler"


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Upper bounds start, start*factor, ... (count of them), as Go's ExponentialBuckets."""
    if count < 1 or start <= 0 or factor <= 1:
        raise ValueError("exponential_buckets needs count >= 1, start > 0, factor > 1")
    return tuple(start * factor**k for k in range(count))


# 1 ms .. 16.384 s
ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)
# 10 ms .. ~5242 s (87 min)
SLI_BUCKETS = exponential_buckets(0.01, 2, 20)
# 1, 2, 4, 8, 16 attempts
ATTEMPTS_BUCKETS = exponential_buckets(1, 2, 5)
# 1 .. 64 victims
VICTIMS_BUCKETS = exponential_buckets(1, 2, 7)
# 10 ms .. ~5242 s, as upstream's preemption_goroutines_duration_seconds
PREEMPTION_TASK_BUCKETS = exponential_buckets(0.01, 2, 20)
# 1 ms .. ~33 s (API round trips, binding task)
API_BUCKETS = exponential_buckets(0.001, 2, 16)
# 0.01 ms .. ~20 ms, as upstream's opportunistic batching histograms
BATCH_BUCKETS = exponential_buckets(0.00001, 2, 12)


class SchedulerMetrics:
    """All metrics of one scheduler process, registered in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        ns = NAMESPACE

        # --- scheduling cycle (upstream names) ---
        self.schedule_attempts = Counter(
            "schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            namespace=ns,
            registry=r,
        )
        self.scheduling_attempt_duration = Histogram(
            "scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            namespace=ns,
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.scheduling_algorithm_duration = Histogram(
            "scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds.",
            namespace=ns,
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.pod_scheduling_sli_duration = Histogram(
            "pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue (excluding time gated by PreEnqueue) and might involve multiple attempts.",
            ["attempts"],
            namespace=ns,
            buckets=SLI_BUCKETS,
            registry=r,
        )
        self.pod_scheduling_attempts = Histogram(
            "pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            namespace=ns,
            buckets=ATTEMPTS_BUCKETS,
            registry=r,
        )

        # --- opportunistic batching (upstream names, framework/runtime/batch.go) ---
        self.batch_attempts = Counter(
            "batch_attempts_total",
            "Counts of results when we attempt to use batching.",
            ["profile", "result"],
            namespace=ns,
            registry=r,
        )
        self.batch_cache_flushed = Counter(
            "batch_cache_flushed_total",
            "Counts of cache flushes by reason.",
            ["profile", "reason"],
            namespace=ns,
            registry=r,
        )
        self.batch_rescore_attempts = Counter(
            "batch_rescore_attempts_total",
            "Counts of rescore attempts during opportunistic batching.",
            ["profile"],
            namespace=ns,
            registry=r,
        )
        self.get_node_hint_duration = Histogram(
            "get_node_hint_duration_seconds",
            "Latency for getting a node hint.",
            ["hinted", "profile"],
            namespace=ns,
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.store_schedule_results_duration = Histogram(
            "store_schedule_results_duration_seconds",
            "Latency for storing scheduling results.",
            ["profile"],
            namespace=ns,
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.batch_rescore_duration = Histogram(
            "batch_rescore_duration_seconds",
            "Latency for rescoring a node during opportunistic batching.",
            ["profile"],
            namespace=ns,
            buckets=BATCH_BUCKETS,
            registry=r,
        )

        # --- preemption (upstream names) ---
        self.preemption_attempts = Counter(
            "preemption_attempts_total",
            "Total preemption attempts in the cluster till now.",
            namespace=ns,
            registry=r,
        )
        self.preemption_victims = Histogram(
            "preemption_victims",
            "Number of selected preemption victims.",
            namespace=ns,
            buckets=VICTIMS_BUCKETS,
            registry=r,
        )
        self.preemption_goroutines_execution = Counter(
            "preemption_goroutines_execution_total",
            "Number of preemption tasks (upstream: goroutines) run, by result.",
            ["result"],
            namespace=ns,
            registry=r,
        )
        self.preemption_goroutines_duration = Histogram(
            "preemption_goroutines_duration_seconds",
            "Duration in seconds of preemption tasks (upstream: goroutines), by result.",
            ["result"],
            namespace=ns,
            buckets=PREEMPTION_TASK_BUCKETS,
            registry=r,
        )
        self.goroutines = Gauge(
            "goroutines",
            "Number of running background tasks (upstream: goroutines) split by the work they "
            "do, such as binding and preemption.",
            ["operation"],
            namespace=ns,
            registry=r,
        )

        # --- queue (upstream names) ---
        self.pending_pods = Gauge(
            "pending_pods",
            "Number of pending pods, by the queue type: 'active' means activeQ, 'backoff' "
            "backoffQ, 'unschedulable' unschedulable pods, 'gated' pods gated by PreEnqueue.",
            ["queue"],
            namespace=ns,
            registry=r,
        )
        self.queue_incoming_pods = Counter(
            "queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            namespace=ns,
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod increments "
            "the gauge of every plugin that rejected it.",
            ["plugin", "profile"],
            namespace=ns,
            registry=r,
        )

        # --- cache (upstream name) ---
        self.cache_size = Gauge(
            "cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            namespace=ns,
            registry=r,
        )

        # --- this project's own ---
        self.binding_duration = Histogram(
            "binding_duration_seconds",
            "Duration of the binding task (PreBind, Bind API call, PostBind), by result.",
            ["result"],
            namespace=ns,
            buckets=API_BUCKETS,
            registry=r,
        )
        self.api_requests = Counter(
            "api_requests_total",
            "API server requests made by the dispatcher, by verb, resource and HTTP code "
            "('<error>' when no response arrived).",
            ["verb", "resource", "code"],
            namespace=ns,
            registry=r,
        )
        self.api_write_failures = Counter(
            "api_write_failures_total",
            "API calls of the dispatcher that failed for good (after any retries), by "
            "verb, resource and reason: 'unknown_outcome' (sent, then timed out or cut "
            "off: it may have been applied; never sent again), 'not_sent' (no connection "
            "in time), 'fenced' (not sent: the leader lease), 'throttled' (429), "
            "'server_error' (5xx), 'rejected' (4xx).",
            ["verb", "resource", "reason"],
            namespace=ns,
            registry=r,
        )
        self.api_request_duration = Histogram(
            "api_request_duration_seconds",
            "Latency of API server requests made by the dispatcher, including client-side "
            "rate limiting wait.",
            ["verb", "resource"],
            namespace=ns,
            buckets=API_BUCKETS,
            registry=r,
        )
        self.api_dispatcher_pending = Gauge(
            "api_dispatcher_pending_calls",
            "API calls not finished in the dispatchers (the scheduling one and the leader "
            "lease's): waiting for a rate-limiter token, a concurrency slot or a retry, or "
            "sent and waiting for the answer.",
            namespace=ns,
            registry=r,
        )
        self.informer_events = Counter(
            "informer_events_total",
            "Watch events received by the informers, by resource and type (ADDED, MODIFIED, "
            "DELETED, BOOKMARK, ERROR).",
            ["resource", "type"],
            namespace=ns,
            registry=r,
        )
        self.informer_relists = Counter(
            "informer_relists_total",
            "Complete LISTs done by the informers, by resource: the first, and one after "
            "each 410 Gone (the watch window was lost).",
            ["resource"],
            namespace=ns,
            registry=r,
        )
        self.pod_status_patches = Counter(
            "pod_status_patches_total",
            "PodScheduled=False status writes for pods that failed a cycle, by result: "
            "'written', 'unchanged' (skipped: the pod already shows it, as upstream's "
            "updatePod), 'coalesced' (replaced by a later status of the same pod before it "
            "was sent), 'gone' (404), 'failed', 'fenced' (not sent: the leader lease was not "
            "surely held, see lease_fenced_writes_total).",
            ["result"],
            namespace=ns,
            registry=r,
        )
        # client-go's event broadcaster only logs its drops ("too many queued events,
        # dropped event"; a TODO asks for a metric): this is that metric
        self.events_dropped = Counter(
            "events_dropped_total",
            "Events that never reached the API server, by reason: 'buffer_full' (the "
            "recorder's buffer overflowed in a burst), 'rejected' (the API server refused "
            "the write, e.g. 404 namespace gone; not resent), 'failed' (no answer after "
            "retries), 'stopped' (recorded after shutdown began).",
            ["reason"],
            namespace=ns,
            registry=r,
        )
        self.lease_fenced_writes = Counter(
            "lease_fenced_writes_total",
            "Leader-only writes not sent because the leader lease was not surely held "
            "(its last successful renewal started renewDeadline ago or more; e.g. the "
            "process was frozen): binds ('create pods/binding'), victim DELETEs "
            "('delete pods'), pod status patches ('patch pods/status'), VolumeBinding's "
            "PV/PVC updates ('update persistentvolumes', 'update persistentvolumeclaims') "
            "and PreemptionPolicy status patches ('patch preemptionpolicies/status').",
            ["operation"],
            namespace=ns,
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_is_leader",
            "1 when this instance holds the scheduler's lease, else 0.",
            namespace=ns,
            registry=r,
        )


class PodGroupMetrics:
    """The pod-group cycle's metrics, registered only with the GenericWorkload gate, as
    upstream's (k8s.io/kubernetes v1.37.2 pkg/scheduler/metrics/metrics.go)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        ns = NAMESPACE
        self.schedule_attempts = Counter(
            "podgroup_schedule_attempts_total",
            "Number of attempts to schedule pod groups, by the result. 'unschedulable' means "
            "a pod group could not be scheduled, 'waiting_on_preemption' that it waits for "
            "its victims to go, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            namespace=ns,
            registry=r,
        )
        self.attempt_duration = Histogram(
            "podgroup_scheduling_attempt_duration_seconds",
            "Pod group scheduling attempt latency in seconds (the whole pod-group cycle).",
            ["result", "profile"],
            namespace=ns,
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.status_patches = Counter(
            "podgroup_status_patches_total",
            "PodGroupInitiallyScheduled condition writes by outcome: written, unchanged "
            "(nothing to write), coalesced (replaced by a newer one before it was sent), "
            "gone, failed, fenced (this replica did not surely hold the lease).",
            ["result"],
            namespace=ns,
            registry=r,
        )
        self.workload_preemption_attempts = Counter(
            "workload_preemption_attempts_total",
            "Pod-group preemption attempts (PodGroupPostFilter), by the status code.",
            ["result"],
            namespace=ns,
            registry=r,
        )
        self.workload_preemption_victims = Histogram(
            "workload_preemption_victims",
            "Number of victims chosen by one pod-group preemption.",
            namespace=ns,
            buckets=exponential_buckets(1, 2, 11),
            registry=r,
        )
        self.algorithm_duration = Histogram(
            "podgroup_scheduling_algorithm_duration_seconds",
            "Pod group scheduling algorithm latency in seconds (every member tried).",
            namespace=ns,
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )


class PolicyMetrics:
    """The PreemptionPolicy counters (scheduler.policy), registered only when the
    process reconciles PreemptionPolicies (the app builds them on its registry then;
    tests without a registry get unregistered counters)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        ns = "scheduler"
        self.refusals = Counter(
            "preemption_policy_refusals_total",
            "Preemption attempts that found no node while a PreemptionPolicy refused victims "
            "(or capped their number), by the refusing policy.",
            ["policy"],
            namespace=ns,
            registry=registry,
        )
        self.victims = Counter(
            "preemption_policy_victims_total",
            "Victims chosen by preemptions a PreemptionPolicy applied to, by policy.",
            ["policy"],
            namespace=ns,
            registry=registry,
        )
        self.status_writes = Counter(
            "preemption_policy_status_writes_total",
            "PreemptionPolicy status writes by the leader, by result (success, not_found, error).",
            ["result"],
            namespace=ns,
            registry=registry,
        )
        # fail closed (scheduler.policy.sync): whether the view of the policies is current
        self.synced = Gauge(
            "preemption_policies_synced",
            "1 while the PreemptionPolicies in memory are known to be current (listed, watch "
            "unbroken, CRD served); 0 while preemption is refused for want of them.",
            namespace=ns,
            registry=registry,
        )
        self.watch_failures = Counter(
            "preemption_policies_watch_failures_total",
            "Failed LISTs and WATCHes of PreemptionPolicies (each is followed by a re-list).",
            namespace=ns,
            registry=registry,
        )
        self.watcher_restarts = Counter(
            "preemption_policies_watcher_restarts_total",
            "Restarts of the PreemptionPolicy watcher after it died (backoff between them).",
            namespace=ns,
            registry=registry,
        )
        self.unsynced_refusals = Counter(
            "preemption_policies_unsynced_refusals_total",
            "Preemption attempts refused because the PreemptionPolicies were not in sync.",
            namespace=ns,
            registry=registry,
        )


class UnitEvictionMetrics:
    """How the victims of all-members PodGroups are deleted together (beyond upstream;
    scheduler.preemption.unit_evictions), registered with the GenericWorkload gate only
    (the app builds them on its registry then; tests without a registry get unregistered
    counters)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        ns = NAMESPACE
        self.preflights = Counter(
            "preemption_unit_preflights_total",
            "Dry-run DELETEs of every member of an all-members PodGroup chosen as one victim "
            "unit, sent before any write to its members, by result: 'passed' (every member "
            "may be deleted: the unit is then deleted), 'refused' (a member's may not: no "
            "member is touched and the preemption fails).",
            ["result"],
            namespace=ns,
            registry=registry,
        )
        self.member_retries = Counter(
            "preemption_unit_member_retries_total",
            "Retries of a member of an all-members PodGroup whose DELETE failed after a "
            "sibling was deleted, by outcome: 'deleted' (gone now), 'failed' (refused again: "
            "retried later), 'gone' (the informer shows it gone or terminating: no call), "
            "'abandoned' (the lease is not surely held, or shutdown: no more retries by "
            "this process).",
            ["result"],
            namespace=ns,
            registry=registry,
        )
