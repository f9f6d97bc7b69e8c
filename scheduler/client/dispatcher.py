"""The API dispatcher: every write of the scheduler goes through here.

One place for client-side flow control and retries, as client-go's rest client gives
kube-scheduler:

- a token bucket (clientConnection qps/burst, default 50/100) taken before each attempt;
- a bound on requests in flight (a semaphore);
- retries only where they are safe, as client-go (`retries.may_retry`): a 429 or 5xx
  whose answer carries Retry-After (waiting that long, capped at retry_after_max), and a
  transport failure before anything was sent (backoff). A write that was sent and then
  timed out or lost its connection is not sent again: the caller gets the error (the
  outcome is unknown; it re-reads). 4xx answers, and 5xx without Retry-After, are final;
- a deadline per attempt: the request timeout, and for a fenced write also the end of
  the lease's sure validity (`lease_deadline`), carried to the server as client-go
  carries its timeout (the `timeout` query parameter): a write sent under our lease
  cannot commit after another replica could have taken it over;
- an `on_request(verb, resource, code)` callback per attempt (code "<error>" when no
  answer came), for scheduler_api_requests_total, `on_latency(verb, resource, s)`
  (from the wait for a token to the answer) for scheduler_api_request_duration_seconds,
  and `on_failed(verb, resource, why)` once per call that fails for good
  (scheduler_api_write_failures_total; `why` from `failure_kind`);
- `statistics().pending_calls`: calls not finished yet (waiting for a token, a slot or a
  retry, or on the wire), for scheduler_api_dispatcher_pending_calls.

Operations are coroutines; the caller decides where they run (the loop's binding tasks,
the preemption executor's tasks, the status writer), so the dispatcher keeps no tasks.

Bodies are plain dicts: nothing here builds generated model classes. In particular the
binding goes through the raw helper and checks the HTTP status, because
kubernetes_asyncio's create_namespaced_pod_binding fails on success (the server answers
a Status where the client expects a Binding).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from scheduler.client.backoff import Backoff
from scheduler.client.connection import (
    DEFAULT_REQUEST_TIMEOUT,
    JSON,
    LAST_CHECK,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    WRITES_IN_FLIGHT,
    Connection,
    Query,
    Response,
)
from scheduler.client.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    LeaseNotHeld,
    TransportError,
)
from scheduler.client.retries import may_retry
from scheduler.clock import SYSTEM_CLOCK, Clock

__all__ = [
    "Dispatcher",
    "DispatcherSettings",
    "DispatcherStatistics",
    "TokenBucket",
    "failure_kind",
]

log = logging.getLogger(__name__)

Sleep = Callable[[float], Coroutine[Any, Any, None]]


class TokenBucket:
    """`qps` tokens a second, at most `burst` saved up. `reserve()` takes a token now
    and says how long to wait before using it (the bucket may go into debt, so waiters
    are served in arrival order, as golang.org/x/time/rate's Reserve). qps <= 0 means
    no limit."""

    def __init__(self, qps: float, burst: int, clock: Clock = SYSTEM_CLOCK) -> None:
        if qps > 0 and burst < 1:
            raise ValueError("burst must be >= 1 when qps is limited")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.now()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def _refill(self) -> None:
        now = self._clock.now()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)

    def reserve(self) -> float:
        if self.unlimited:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self, sleep: Sleep = asyncio.sleep) -> float:
        wait = self.reserve()
        if wait > 0:
            await sleep(wait)
        return wait


@dataclass(frozen=True, slots=True)
class DispatcherSettings:
    qps: float = 50.0
    """clientConnection.qps: requests per second; <= 0 disables the limit."""
    burst: int = 100
    """clientConnection.burst: requests that may go at once after a quiet period."""
    max_in_flight: int = WRITES_IN_FLIGHT
    """requests on the wire at once (as many as the connection's write pool holds)."""
    max_attempts: int = 5
    """attempts per call when the failure is retryable (1 = no retries)."""
    retry_initial: float = 0.2
    """seconds before the first retry of a request that was not sent; doubles to
    retry_max, jittered."""
    retry_max: float = 5.0
    retry_after_max: float = 10.0
    """longest wait for a server's Retry-After (the API server asks for 1 s when it sheds
    load or shuts down: apiserver server/filters maxinflight.go, priority-and-fairness.go,
    with_retry_after.go)."""
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    """seconds for one attempt (also sent as the server-side timeout)."""


@dataclass(frozen=True, slots=True)
class DispatcherStatistics:
    in_flight: int
    pending_calls: int
    calls: int
    retries: int
    failures: int


RequestCallback = Callable[[str, str, str], None]
LatencyCallback = Callable[[str, str, float], None]
FailedCallback = Callable[[str, str, str], None]


def failure_kind(error: ApiError) -> str:
    """Why a call failed for good, for scheduler_api_write_failures_total: 'fenced' (not
    sent: the lease), 'not_sent' (no connection), 'unknown_outcome' (sent, no whole
    answer: it may have been applied), 'throttled' (429), 'server_error' (5xx and other
    unexpected statuses), 'rejected' (4xx)."""
    if isinstance(error, LeaseNotHeld):
        return "fenced"
    if isinstance(error, TransportError):
        return "unknown_outcome" if error.sent else "not_sent"
    if error.status == 429:
        return "throttled"
    if error.transient:
        return "server_error"
    return "rejected"


class Dispatcher:
    def __init__(
        self,
        connection: Connection,
        settings: DispatcherSettings | None = None,
        *,
        on_request: RequestCallback | None = None,
        on_latency: LatencyCallback | None = None,
        on_failed: FailedCallback | None = None,
        clock: Clock = SYSTEM_CLOCK,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.connection = connection
        self.settings = settings or DispatcherSettings()
        self._bucket = TokenBucket(self.settings.qps, self.settings.burst, clock)
        self._slots = asyncio.Semaphore(self.settings.max_in_flight)
        self._on_request = on_request
        self._on_latency = on_latency
        self._on_failed = on_failed
        self._clock = clock
        self._sleep = sleep
        self._rand = rand
        self._in_flight = 0
        self._pending = 0  # calls inside call(): waiting for a token, a slot or a retry, or sent
        self._calls = self._retries = self._failures = 0
        # the leader-election fence for writes only the leader may make (fenced=True):
        # called with "verb resource" right before each attempt is sent; False means
        # the attempt is not sent and the call raises LeaseNotHeld (see app.py)
        self.fence: Callable[[str], bool] | None = None
        # until when (self's clock) the lease is surely held, for the deadline of a fenced
        # write (leader.LeaseFence.held_until); None: no bound (no leader election)
        self.lease_deadline: Callable[[], float | None] | None = None

    # ---- the one path every call takes ------------------------------------------
    async def call(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry: bool = True,
        fenced: bool = False,
        idempotent: bool | None = None,
    ) -> Response:
        """One API call with rate limit, concurrency bound and safe retries.
        `verb`/`resource` are the metric labels ("create", "pods/binding"). A `fenced`
        call checks `self.fence` after the rate limiter and the concurrency slot, the
        last moment before the request leaves: a wait there must not carry a write
        past the end of our lease; its deadline ends with the lease's sure validity.
        `idempotent` (default: GET only) lets a call that was sent be sent again after
        a transport failure (retries.may_retry)."""
        self._calls += 1
        self._pending += 1
        if idempotent is None:
            idempotent = method == "GET"
        try:
            return await self._attempts(
                verb, resource, method, path, query, body, content_type, retry, fenced,
                idempotent,
            )  # fmt: skip
        except ApiError as exc:
            if self._on_failed is not None:
                self._on_failed(verb, resource, failure_kind(exc))
            raise
        finally:
            self._pending -= 1

    async def _attempts(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        query: Query | None,
        body: Any,
        content_type: str,
        retry: bool,
        fenced: bool,
        idempotent: bool,
    ) -> Response:
        attempts = self.settings.max_attempts if retry else 1
        guarded = fenced and (self.fence is not None or self.lease_deadline is not None)
        backoff: Backoff | None = None  # built at the first retry: most calls need none
        attempt = 0
        while True:
            attempt += 1
            started = self._clock.now()
            await self._bucket.acquire(self._sleep)
            try:
                async with self._slots:
                    operation = f"{verb} {resource}"
                    timeout = self.settings.request_timeout
                    if fenced:
                        timeout = self._lease_bound(operation, timeout)
                    self._in_flight += 1
                    last_check = (
                        LAST_CHECK.set(partial(self._recheck, operation)) if guarded else None
                    )
                    try:
                        response = await self.connection.request_raw(
                            method,
                            path,
                            query=query,
                            body=body,
                            content_type=content_type,
                            request_timeout=timeout,
                        )
                    finally:
                        self._in_flight -= 1
                        if last_check is not None:
                            LAST_CHECK.reset(last_check)
            except LeaseNotHeld:
                self._failures += 1
                raise  # nothing was sent: no request metric, no retry
            except ApiError as exc:
                self._observe(verb, resource, exc.code, started)
                if not may_retry(exc, idempotent=idempotent) or attempt >= attempts:
                    self._failures += 1
                    exc.attempts = attempt
                    raise
                if exc.retry_after is not None and not isinstance(exc, TransportError):
                    # the server asked: wait as long as it said, as client-go does
                    delay = min(exc.retry_after, self.settings.retry_after_max)
                else:
                    if backoff is None:
                        backoff = Backoff(
                            self.settings.retry_initial,
                            self.settings.retry_max,
                            jitter=0.5,
                            rand=self._rand,
                        )
                    delay = backoff.next_delay()
                self._retries += 1
                log.info(
                    "retrying API call verb=%s resource=%s attempt=%d delay=%.2fs error=%s",
                    verb,
                    resource,
                    attempt,
                    delay,
                    exc,
                )
                await self._sleep(delay)
                continue
            self._observe(verb, resource, str(response.status), started)
            return response

    def _lease_bound(self, operation: str, timeout: float) -> float:
        """A fenced attempt: the fence must be open, and the attempt's timeout ends
        with the lease's sure validity."""
        remaining = self._recheck(operation)
        return timeout if remaining is None else min(timeout, remaining)

    def _recheck(self, operation: str) -> float | None:
        """The fence (before the attempt, and once more when the request holds its
        connection: LAST_CHECK); the seconds the lease stays surely held (None: no
        bound). Raises LeaseNotHeld when it is not."""
        if self.fence is not None and not self.fence(operation):
            raise LeaseNotHeld(operation)
        held_until = self.lease_deadline() if self.lease_deadline is not None else None
        if held_until is None:
            return None
        remaining = held_until - self._clock.now()
        if remaining <= 0:
            raise LeaseNotHeld(operation)
        return remaining

    def _observe(self, verb: str, resource: str, code: str, started: float) -> None:
        if self._on_request is not None:
            self._on_request(verb, resource, code)
        if self._on_latency is not None:
            self._on_latency(verb, resource, self._clock.now() - started)

    def statistics(self) -> DispatcherStatistics:
        return DispatcherStatistics(
            in_flight=self._in_flight,
            pending_calls=self._pending,
            calls=self._calls,
            retries=self._retries,
            failures=self._failures,
        )

    # ---- pods ---------------------------------------------------------------------
    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST pods/{name}/binding. The uid is a precondition: a pod deleted and
        recreated under the same name is not bound. Raises Conflict when the pod is
        already bound elsewhere (or the uid does not match), NotFound when it is gone.

        A retry after a lost answer may meet our own earlier success ("already assigned
        to node X" with X our node): that counts as bound."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
        try:
            response = await self.call(
                "create", "pods/binding", "POST", path, body=body, fenced=True
            )
        except Conflict as exc:
            retried = exc.attempts > 1
            if retried and f'already assigned to node "{node}"' in exc.message:
                return
            raise
        if response.status not in (200, 201):
            raise ApiError(response.status, "UnexpectedStatus", f"binding answered {response}")

    async def patch_pod_status(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        """Strategic merge patch on pods/{name}/status: `conditions` merge by type, and
        a None value clears a field ({"status": {"nominatedNodeName": None}})."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        response = await self.call(
            "patch",
            "pods/status",
            "PATCH",
            path,
            body=patch,
            content_type=STRATEGIC_MERGE_PATCH,
            fenced=True,
        )
        return response.body

    async def patch_pod_group_status(
        self, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        """Strategic merge patch on podgroups/{name}/status (scheduling.k8s.io/v1beta1):
        the PodGroupInitiallyScheduled condition, as upstream's pod-group cycle writes it."""
        path = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{name}/status"
        response = await self.call(
            "patch",
            "podgroups/status",
            "PATCH",
            path,
            body=patch,
            content_type=STRATEGIC_MERGE_PATCH,
            fenced=True,
        )
        return response.body

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE the pod; `uid` makes it a precondition (a same-name successor is not
        deleted, 409). None grace means the pod's own terminationGracePeriodSeconds.
        Raises NotFound when the pod is already gone (the caller may count it done).

        `dry_run`: the API server runs the whole DELETE (preconditions, admission,
        webhooks included) and stores nothing (`dryRun: [All]`). It goes in the
        DeleteOptions body, which is what the server reads when a body is sent
        (apiserver endpoints/handlers/delete.go DeleteResource decodes the query only
        without a body), and in the query too, so the request line and the audit log's
        requestURI say so. Counted, fenced and answered like any DELETE; having no
        effect, it may be sent again after a transport failure (retries.may_retry)."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        query: Query | None = None
        if dry_run:
            options["dryRun"] = ["All"]
            query = {"dryRun": "All"}
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        response = await self.call(
            "delete", "pods", "DELETE", path, query=query, body=options, fenced=True,
            idempotent=dry_run,
        )  # fmt: skip
        return response.body

    # ---- volumes (VolumeBinding's PreBind) ------------------------------------------
    async def update_pv(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the PersistentVolume as given: its resourceVersion makes a concurrent
        change answer 409 (Conflict), as upstream's binder relies on. Fenced as a bind
        is: VolumeBinding's PreBind writes it for the pod this leader placed."""
        body = {**raw, "apiVersion": "v1", "kind": "PersistentVolume"}
        path = f"/api/v1/persistentvolumes/{raw['metadata']['name']}"
        response = await self.call(
            "update", "persistentvolumes", "PUT", path, body=body, fenced=True
        )
        return response.body

    async def update_pvc(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        meta = raw["metadata"]
        body = {**raw, "apiVersion": "v1", "kind": "PersistentVolumeClaim"}
        path = f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/{meta['name']}"
        response = await self.call(
            "update", "persistentvolumeclaims", "PUT", path, body=body, fenced=True
        )
        return response.body

    # ---- resource claims (DynamicResources' PreBind) --------------------------------
    def _claim_path(self, raw: Mapping[str, Any]) -> str:
        meta = raw["metadata"]
        return (
            f"/apis/resource.k8s.io/v1/namespaces/{meta['namespace']}"
            f"/resourceclaims/{meta['name']}"
        )

    async def get_resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
        response = await self.call("get", "resourceclaims", "GET", path)
        return response.body

    async def update_resource_claim(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the ResourceClaim as given (PreBind adds its finalizer this way); the
        resourceVersion makes a concurrent change answer 409. Fenced as a bind is."""
        body = {**raw, "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}
        response = await self.call(
            "update", "resourceclaims", "PUT", self._claim_path(raw), body=body, fenced=True
        )
        return response.body

    async def update_resource_claim_status(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the claim's status subresource: the allocation and reservedFor that
        PreBind writes, with the resourceVersion as the precondition."""
        body = {**raw, "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}
        response = await self.call(
            "update", "resourceclaims/status", "PUT", self._claim_path(raw) + "/status",
            body=body, fenced=True,
        )  # fmt: skip
        return response.body

    async def create_resource_claim(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """POST a ResourceClaim (the claim DynamicResources makes for a pod's extended
        resources backed by DRA; its name generated from metadata.generateName). Not
        sent again after a transport failure: a second create would make a second
        claim. Fenced as a bind is."""
        namespace = raw["metadata"]["namespace"]
        body = {**raw, "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        response = await self.call(
            "create", "resourceclaims", "POST", path, body=body, fenced=True
        )
        return response.body

    async def delete_resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
        """DELETE a ResourceClaim (the scheduler's own claim for extended resources, made
        in an earlier cycle or in a PreBind that failed). Raises NotFound when gone."""
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
        response = await self.call(
            "delete", "resourceclaims", "DELETE", path, fenced=True, idempotent=True
        )
        return response.body

    async def unreserve_resource_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> dict[str, Any]:
        """Drop the pod from the claim's status.reservedFor (upstream Unreserve's
        strategic merge patch: the claim's uid as a precondition, a delete directive for
        the pod's entry, which leaves any other consumer's entry alone)."""
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}/status"
        patch = {
            "metadata": {"uid": claim_uid},
            "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]},
        }
        response = await self.call(
            "patch", "resourceclaims/status", "PATCH", path, body=patch,
            content_type=STRATEGIC_MERGE_PATCH, fenced=True, idempotent=True,
        )  # fmt: skip
        return response.body

    # ---- events -------------------------------------------------------------------
    async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """POST an events.k8s.io/v1 Event (built by EventRecorder, which aggregates
        repeats into series; this is the raw write). Best effort, as upstream's event
        broadcaster: the Event has a fixed name, so it is sent again after a transport
        failure too, and an AlreadyExists on a later attempt is our own earlier create."""
        namespace = event["metadata"]["namespace"]
        path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
        try:
            response = await self.call(
                "create", "events", "POST", path, body=event, idempotent=True
            )
        except AlreadyExists as exc:
            if exc.attempts > 1:
                return event
            raise
        return response.body

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}"
        # the series' absolute count and time: sending it twice changes nothing
        response = await self.call(
            "patch", "events", "PATCH", path, body=patch, content_type=MERGE_PATCH,
            idempotent=True,
        )  # fmt: skip
        return response.body

    # ---- leases (no retries here: the elector has its own retry period) -----------
    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        return (await self.call("get", "leases", "GET", path, retry=False)).body

    async def create_lease(self, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        return (await self.call("create", "leases", "POST", path, body=lease, retry=False)).body

    async def update_lease(
        self, namespace: str, name: str, lease: dict[str, Any]
    ) -> dict[str, Any]:
        """PUT with the lease's metadata.resourceVersion: 409 when it changed."""
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        return (await self.call("update", "leases", "PUT", path, body=lease, retry=False)).body
