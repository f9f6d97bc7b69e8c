"""scheduler.client.dispatcher: token bucket, retries only where safe, request bodies."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import pytest

from scheduler.client.connection import MERGE_PATCH, STRATEGIC_MERGE_PATCH, Response
from scheduler.client.dispatcher import Dispatcher, DispatcherSettings, TokenBucket
from scheduler.client.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    ConnectionFailed,
    Forbidden,
    LeaseNotHeld,
    NotFound,
    ServerError,
    Timeout,
    TooManyRequests,
    TransportError,
)
from tests.unit.helpers.fake_clock import FakeClock


class FakeSleep:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        self.clock.advance(delay)


def test_the_bucket_allows_a_burst_then_spaces_requests_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)  # waiters queue behind each other


def test_the_bucket_refills_over_time_up_to_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=4, clock=clock)
    for _ in range(4):
        bucket.reserve()
    clock.advance(1.0)  # 2 tokens back: two calls go now, the third waits half a second
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0.0, 0.0, 0.5])
    clock.advance(100.0)  # refilled up to the burst of 4, no further
    assert [bucket.reserve() for _ in range(5)] == pytest.approx([0.0] * 4 + [0.5])


def test_a_non_positive_qps_means_no_limit() -> None:
    bucket = TokenBucket(qps=0, burst=0, clock=FakeClock())
    assert all(bucket.reserve() == 0.0 for _ in range(1000))


async def test_acquire_sleeps_for_the_reserved_wait() -> None:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    bucket = TokenBucket(qps=4, burst=1, clock=clock)
    await bucket.acquire(sleep)
    await bucket.acquire(sleep)
    assert sleep.delays == [pytest.approx(0.25)]


class FakeConnection:
    def __init__(self, *answers: Response | Exception) -> None:
        self.answers: deque[Response | Exception] = deque(answers)
        self.calls: list[dict[str, Any]] = []
        self.queries: list[Any] = []
        self.timeouts: list[float | None] = []

    async def request_raw(
        self,
        method: str,
        path: str,
        *,
        query: Any = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
        **_: Any,
    ) -> Response:
        self.calls.append(
            {"method": method, "path": path, "body": body, "content_type": content_type}
        )
        self.queries.append(query)
        self.timeouts.append(request_timeout)
        answer = self.answers.popleft()
        if isinstance(answer, Exception):
            raise answer
        return answer


def make(
    *answers: Response | Exception, **settings: Any
) -> tuple[Dispatcher, FakeConnection, FakeSleep, list[tuple[str, str, str]]]:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    conn = FakeConnection(*answers)
    seen: list[tuple[str, str, str]] = []
    dispatcher = Dispatcher(
        conn,  # type: ignore[arg-type]
        DispatcherSettings(**settings),
        on_request=lambda verb, res, code: seen.append((verb, res, code)),
        clock=clock,
        sleep=sleep,
        rand=lambda: 0.0,
    )
    return dispatcher, conn, sleep, seen


def ok(status: int = 200, body: dict[str, Any] | None = None) -> Response:
    return Response(status, body or {})


async def test_bind_posts_a_binding_with_the_uid_precondition() -> None:
    d, conn, _, seen = make(ok(201, {"kind": "Status", "status": "Success"}))
    await d.bind("ns", "p", "uid-1", "node-a")
    assert conn.calls == [
        {
            "method": "POST",
            "path": "/api/v1/namespaces/ns/pods/p/binding",
            "body": {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "p", "namespace": "ns", "uid": "uid-1"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
            },
            "content_type": "application/json",
        }
    ]
    assert seen == [("create", "pods/binding", "201")]


@pytest.mark.parametrize(
    "error",
    [
        Conflict(409, "Conflict", 'pod p is already assigned to node "other"'),
        NotFound(404, "NotFound", "pods p not found"),
        Forbidden(403, "Forbidden", "no"),
    ],
)
async def test_final_answers_are_not_retried(error: ApiError) -> None:
    d, conn, sleep, seen = make(error)
    with pytest.raises(type(error)):
        await d.bind("ns", "p", "u", "n")
    assert len(conn.calls) == 1
    assert sleep.delays == []
    assert seen == [("create", "pods/binding", str(error.status))]


async def test_what_the_server_asked_to_retry_and_what_was_not_sent_are_retried() -> None:
    d, _, sleep, seen = make(
        TooManyRequests(429, "TooManyRequests", "slow down", retry_after=3.0),
        ServerError(503, "ServiceUnavailable", retry_after=1.0),
        ConnectionFailed("refused", sent=False),
        ok(200, {"metadata": {"name": "p"}}),
    )
    body = await d.patch_pod_status("ns", "p", {"status": {"nominatedNodeName": None}})
    assert body == {"metadata": {"name": "p"}}
    # the server's Retry-After as it said; the backoff (0.2, jitter 0) for the refusal
    assert sleep.delays == [3.0, 1.0, 0.2]
    assert [code for _, _, code in seen] == ["429", "503", "<error>", "200"]
    assert d.statistics().retries == 3


async def test_a_retry_after_longer_than_the_cap_is_capped() -> None:
    d, _, sleep, _ = make(
        TooManyRequests(429, "TooManyRequests", retry_after=600.0), ok(), retry_after_max=7.0
    )
    await d.delete_pod("ns", "p")
    assert sleep.delays == [7.0]


@pytest.mark.parametrize(
    "error",
    [
        ServerError(500, "InternalError", "etcd timed out"),  # no Retry-After
        ServerError(503, "ServiceUnavailable"),
        TooManyRequests(429, "TooManyRequests"),  # client-go: 429 needs it too
        Timeout("no complete HTTP answer in time"),  # sent: may have been applied
        ConnectionFailed("connection closed before the whole answer"),
    ],
    ids=["500", "503", "429", "timeout after send", "cut after send"],
)
async def test_a_write_is_not_sent_again_unless_safe(error: ApiError) -> None:
    failed: list[tuple[str, str, str]] = []
    d, conn, sleep, _ = make(error, ok())
    d._on_failed = lambda *args: failed.append(args)
    with pytest.raises(type(error)):
        await d.bind("ns", "p", "u", "n")
    assert len(conn.calls) == 1
    assert sleep.delays == []
    why = "unknown_outcome" if isinstance(error, TransportError) else (
        "throttled" if error.status == 429 else "server_error"
    )
    assert failed == [("create", "pods/binding", why)]


async def test_an_event_is_sent_again_after_a_transport_failure_and_its_copy_counts() -> None:
    d, conn, _, _ = make(
        Timeout("no complete HTTP answer in time"),
        AlreadyExists(409, "AlreadyExists", "events \"e\" already exists"),
    )
    event = {"metadata": {"namespace": "ns", "name": "e"}}
    assert await d.create_event(event) == event  # our first attempt created it
    assert len(conn.calls) == 2


async def test_an_event_that_already_existed_at_the_first_attempt_is_an_error() -> None:
    d, _, _, _ = make(AlreadyExists(409, "AlreadyExists", "exists"))
    with pytest.raises(AlreadyExists):
        await d.create_event({"metadata": {"namespace": "ns", "name": "e"}})


async def test_retries_stop_after_max_attempts() -> None:
    d, conn, _, _ = make(
        *[ServerError(500, "InternalError", retry_after=1.0)] * 3, max_attempts=3
    )
    with pytest.raises(ServerError) as info:
        await d.delete_pod("ns", "p")
    assert info.value.attempts == 3
    assert len(conn.calls) == 3


async def test_a_retried_bind_that_meets_its_own_success_counts_as_bound() -> None:
    # a 503 with Retry-After is sent again; the first one may have been applied after all
    d, _, _, _ = make(
        ServerError(503, "ServiceUnavailable", retry_after=1.0),
        Conflict(409, "Conflict", 'pod p is already assigned to node "node-a"'),
    )
    await d.bind("ns", "p", "u", "node-a")


async def test_a_retried_bind_that_meets_another_node_is_still_a_conflict() -> None:
    d, _, _, _ = make(
        ConnectionFailed("refused", sent=False),
        Conflict(409, "Conflict", 'pod p is already assigned to node "node-b"'),
    )
    with pytest.raises(Conflict):
        await d.bind("ns", "p", "u", "node-a")


async def test_volume_writes_are_fenced_and_bounded_by_the_lease() -> None:
    d, conn, _, _ = make(ok(), ok())
    clock = d._clock
    asked: list[str] = []
    d.fence = lambda op: asked.append(op) is None
    d.lease_deadline = lambda: clock.now() + 4.0
    await d.update_pv({"metadata": {"name": "pv1", "resourceVersion": "3"}})
    await d.update_pvc({"metadata": {"name": "c", "namespace": "ns", "resourceVersion": "4"}})
    assert asked == ["update persistentvolumes", "update persistentvolumeclaims"]
    assert conn.timeouts == [4.0, 4.0]


async def test_a_fenced_write_gets_the_lease_validity_as_its_deadline() -> None:
    d, conn, _, _ = make(ok(), ok(), ok())
    clock = d._clock
    held_until = clock.now() + 2.5
    d.lease_deadline = lambda: held_until
    await d.bind("ns", "p", "u", "n")  # fenced: 2.5 s left of the lease
    await d.create_event({"metadata": {"namespace": "ns", "name": "e"}})  # not fenced
    assert conn.timeouts == [2.5, 30.0]
    clock.advance(3.0)  # past the lease's sure validity: nothing is sent
    with pytest.raises(LeaseNotHeld):
        await d.bind("ns", "q", "u", "n")
    assert len(conn.calls) == 2


async def test_status_patch_is_a_strategic_merge_patch_keeping_nulls() -> None:
    d, conn, _, _ = make(ok())
    patch = {"status": {"nominatedNodeName": None, "conditions": [{"type": "PodScheduled"}]}}
    await d.patch_pod_status("ns", "p", patch)
    assert conn.calls[0]["path"] == "/api/v1/namespaces/ns/pods/p/status"
    assert conn.calls[0]["method"] == "PATCH"
    assert conn.calls[0]["content_type"] == STRATEGIC_MERGE_PATCH
    assert conn.calls[0]["body"] is patch


async def test_delete_carries_the_uid_precondition_and_grace() -> None:
    d, conn, _, _ = make(ok(), ok())
    await d.delete_pod("ns", "p", uid="u1", grace_period_seconds=0)
    await d.delete_pod("ns", "q")
    assert conn.calls[0]["body"] == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u1"},
        "gracePeriodSeconds": 0,
    }
    assert conn.calls[1]["body"] == {"apiVersion": "v1", "kind": "DeleteOptions"}


async def test_a_dry_run_delete_says_so_in_its_options_and_is_fenced_and_counted() -> None:
    d, conn, _, seen = make(ok())
    asked: list[str] = []
    d.fence = lambda op: asked.append(op) is None
    await d.delete_pod("ns", "p", uid="u1", dry_run=True)
    assert conn.calls[0]["method"] == "DELETE"
    assert conn.calls[0]["path"] == "/api/v1/namespaces/ns/pods/p"
    assert conn.calls[0]["body"] == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u1"},
        "dryRun": ["All"],
    }
    assert conn.queries[0] == {"dryRun": "All"}
    assert asked == ["delete pods"]
    assert seen == [("delete", "pods", "200")]
    d.fence = lambda op: False
    with pytest.raises(LeaseNotHeld):
        await d.delete_pod("ns", "p", uid="u1", dry_run=True)
    assert len(conn.calls) == 1


async def test_lease_writes_are_never_retried_by_the_dispatcher() -> None:
    d, conn, _, _ = make(ServerError(500, "InternalError"))
    with pytest.raises(ServerError):
        await d.update_lease("kube-system", "s", {"metadata": {"resourceVersion": "1"}})
    assert len(conn.calls) == 1
    assert conn.calls[0]["method"] == "PUT"


async def test_event_paths() -> None:
    d, conn, _, _ = make(ok(201), ok())
    await d.create_event({"metadata": {"namespace": "ns", "name": "e"}})
    await d.patch_event("ns", "e", {"series": {"count": 2}})
    assert conn.calls[0]["path"] == "/apis/events.k8s.io/v1/namespaces/ns/events"
    assert conn.calls[1]["path"] == "/apis/events.k8s.io/v1/namespaces/ns/events/e"
    assert conn.calls[1]["content_type"] == MERGE_PATCH


async def test_every_attempt_waits_for_a_token() -> None:
    d, _, sleep, _ = make(ok(), ok(), ok(), qps=1.0, burst=1)
    for _ in range(3):
        await d.delete_pod("ns", "p")
    assert sleep.delays == [pytest.approx(1.0), pytest.approx(1.0)]


async def test_the_concurrency_bound_holds() -> None:
    gate = asyncio.Event()
    peak = 0
    running = 0

    class Slow:
        async def request_raw(self, *args: Any, **kwargs: Any) -> Response:
            nonlocal peak, running
            running += 1
            peak = max(peak, running)
            await gate.wait()
            running -= 1
            return ok()

    d = Dispatcher(Slow(), DispatcherSettings(qps=0, max_in_flight=2))  # type: ignore[arg-type]
    tasks = [asyncio.create_task(d.delete_pod("ns", f"p{i}")) for i in range(5)]
    for _ in range(10):
        await asyncio.sleep(0)
    assert peak == 2
    assert d.statistics().in_flight == 2
    assert d.statistics().pending_calls == 5  # 2 sent, 3 waiting for a slot
    gate.set()
    await asyncio.gather(*tasks)
    assert d.statistics().in_flight == 0
    assert d.statistics().pending_calls == 0
