"""Dispatcher and EventRecorder against the real apiserver: bind, 409 on a second bind,
status patches (merge by condition type, null clears), delete preconditions, events, the
lease fence and the lease's deadline on a fenced write."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from scheduler.client.connection import Connection
from scheduler.client.dispatcher import Dispatcher
from scheduler.client.errors import (
    Conflict,
    Forbidden,
    LeaseNotHeld,
    NotFound,
    ServerError,
    Timeout,
)
from scheduler.client.events import NORMAL, WARNING, EventRecorder, pod_ref
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import wait_running
from tests.webhook import DeleteWebhook

pytestmark = pytest.mark.cluster


@pytest.fixture
async def dispatcher(cluster: ClusterHandle) -> AsyncIterator[Dispatcher]:
    conn = await Connection.from_kubeconfig(cluster.kubeconfig)
    calls: list[tuple[str, str, str]] = []
    d = Dispatcher(conn, on_request=lambda *c: calls.append(c))
    d.calls = calls  # type: ignore[attr-defined]
    yield d
    await conn.close()


def namespace(cluster: ClusterHandle, prefix: str) -> str:
    return cluster.create_namespace(f"{prefix}-{uuid.uuid4().hex[:6]}")


async def test_bind_binds_and_a_second_bind_is_a_conflict(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    ns = namespace(cluster, "bind")
    pod = cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody"))
    uid = pod["metadata"]["uid"]
    await dispatcher.bind(ns, "p", uid, "kwok-node-1")
    bound = cluster.get_pod(ns, "p")
    assert bound is not None and bound["spec"]["nodeName"] == "kwok-node-1"
    with pytest.raises(Conflict):
        await dispatcher.bind(ns, "p", uid, "kwok-node-2")
    assert dispatcher.calls == [  # type: ignore[attr-defined]
        ("create", "pods/binding", "201"),
        ("create", "pods/binding", "409"),
    ]


async def test_bind_with_a_stale_uid_is_a_conflict_and_binds_nothing(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    ns = namespace(cluster, "bind")
    cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody"))
    with pytest.raises(Conflict):
        await dispatcher.bind(ns, "p", str(uuid.uuid4()), "kwok-node-1")
    pod = cluster.get_pod(ns, "p")
    assert pod is not None and not pod["spec"].get("nodeName")


async def test_binding_a_missing_pod_is_not_found(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    ns = namespace(cluster, "bind")
    with pytest.raises(NotFound):
        await dispatcher.bind(ns, "ghost", "u", "kwok-node-1")


async def test_status_patch_merges_conditions_by_type_and_null_clears(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    ns = namespace(cluster, "status")
    cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody"))
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/4 nodes are available",
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }
    await dispatcher.patch_pod_status(
        ns, "p", {"status": {"conditions": [condition], "nominatedNodeName": "kwok-node-3"}}
    )
    pod = cluster.get_pod(ns, "p")
    assert pod is not None
    assert pod["status"]["nominatedNodeName"] == "kwok-node-3"
    await dispatcher.patch_pod_status(
        ns,
        "p",
        {
            "status": {
                "nominatedNodeName": None,
                "conditions": [{**condition, "message": "0/5 nodes are available"}],
            }
        },
    )
    pod = cluster.get_pod(ns, "p")
    assert pod is not None
    assert "nominatedNodeName" not in pod["status"]
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert len(scheduled) == 1 and scheduled[0]["message"] == "0/5 nodes are available"


async def test_delete_honours_the_uid_precondition(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    ns = namespace(cluster, "delete")
    pod = cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody"))
    with pytest.raises(Conflict):
        await dispatcher.delete_pod(ns, "p", uid=str(uuid.uuid4()))
    await dispatcher.delete_pod(ns, "p", uid=pod["metadata"]["uid"], grace_period_seconds=0)
    for _ in range(100):
        if cluster.get_pod(ns, "p") is None:
            break
        await asyncio.sleep(0.1)
    assert cluster.get_pod(ns, "p") is None
    with pytest.raises(NotFound):
        await dispatcher.delete_pod(ns, "p")


async def test_a_dry_run_delete_stores_nothing_and_meets_admission_as_a_dry_run(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    # the preflight of an all-members PodGroup's DELETEs: the server runs the DELETE
    # (preconditions, webhooks) and keeps the pod as it was
    ns = namespace(cluster, "dry-run")
    cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody", nodeName="kwok-node-1"))
    wait_running(cluster, ns, ["p"])
    uid = (cluster.get_pod(ns, "p") or {})["metadata"]["uid"]
    hook = DeleteWebhook(cluster, ns)
    hook.start()
    try:
        answer = await dispatcher.delete_pod(ns, "p", uid=uid, dry_run=True)
        assert answer["metadata"].get("deletionTimestamp")  # what the DELETE would do
        assert hook.dry_runs["p"] == 1 and hook.deletes["p"] == 0
        with pytest.raises(Conflict):
            await dispatcher.delete_pod(ns, "p", uid=str(uuid.uuid4()), dry_run=True)
        hook.refuse_all = True
        with pytest.raises(Forbidden):
            await dispatcher.delete_pod(ns, "p", uid=uid, dry_run=True)
        assert hook.dry_run_refused["p"] == 1
        with pytest.raises(NotFound):
            await dispatcher.delete_pod(ns, "ghost", uid=str(uuid.uuid4()), dry_run=True)
        await asyncio.sleep(1.0)  # a dry run that had been applied would show by now
        pod = cluster.get_pod(ns, "p")
        assert pod is not None and pod["metadata"]["uid"] == uid
        assert not pod["metadata"].get("deletionTimestamp")
        # counted as the DELETEs they are
        assert [c for c in dispatcher.calls if c[:2] == ("delete", "pods")] == [  # type: ignore[attr-defined]
            ("delete", "pods", "200"),
            ("delete", "pods", "409"),
            ("delete", "pods", "403"),
            ("delete", "pods", "404"),
        ]
    finally:
        hook.stop()


async def test_recorded_events_land_as_events_k8s_io_with_series(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    ns = namespace(cluster, "events")
    pod = cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody"))
    ref = pod_ref(ns, "p", pod["metadata"]["uid"])
    recorder = EventRecorder(
        dispatcher, reporting_controller="kube-async-scheduler", reporting_instance="test-1"
    )
    recorder.start()
    recorder.event(ref, NORMAL, "Scheduled", "Binding", f"Successfully assigned {ns}/p to n1")
    for i in range(20):
        recorder.event(ref, WARNING, "FailedScheduling", "Scheduling", f"0/{i} nodes")
        await asyncio.sleep(0.01)
    await recorder.stop()
    events = {e["reason"]: e for e in cluster.events(ns)}
    assert set(events) == {"Scheduled", "FailedScheduling"}
    assert events["Scheduled"]["regarding"]["uid"] == pod["metadata"]["uid"]
    assert events["Scheduled"]["reportingController"] == "kube-async-scheduler"
    assert events["FailedScheduling"]["type"] == "Warning"
    assert events["FailedScheduling"]["series"]["count"] == 20
    assert recorder.statistics().failed == 0


@pytest.mark.parametrize("pooled", [False, True], ids=["new connection", "pooled connection"])
async def test_a_fence_closed_after_the_first_check_stops_the_bind_before_it_is_sent(
    cluster: ClusterHandle, dispatcher: Dispatcher, pooled: bool
) -> None:
    """The dispatcher checks the fence before the request, and once more when the request
    holds its connection (connection.LAST_CHECK): a task suspended in between - or a
    process frozen there and thawed after its lease ran out - sends nothing."""
    ns = namespace(cluster, "fence")
    pod = cluster.create_pod(ns, pod_manifest("p", scheduler_name="nobody"))
    if pooled:  # a kept-alive connection in the pool: the reuse path
        with pytest.raises(NotFound):
            await dispatcher.get_lease("kube-system", "none-such-lease")
    answers = iter([True, False])
    asked: list[str] = []

    def fence(operation: str) -> bool:
        asked.append(operation)
        return next(answers)

    dispatcher.fence = fence
    with pytest.raises(LeaseNotHeld):
        await dispatcher.bind(ns, "p", pod["metadata"]["uid"], "kwok-node-1")
    assert asked == ["create pods/binding"] * 2
    after = cluster.get_pod(ns, "p")
    assert after is not None and not after["spec"].get("nodeName")
    assert ("create", "pods/binding", "201") not in dispatcher.calls  # type: ignore[attr-defined]


LEASE_LEFT = 1.0
WEBHOOK_DELAY = 4.0


@pytest.mark.timeout(120)
async def test_a_fenced_delete_held_past_the_lease_is_not_applied_later(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    """A fenced write ends with the lease: a victim DELETE held at a slow admission
    webhook past the lease's sure validity is given up at that moment (by the server,
    which got the `timeout` parameter, or by the client, which closes its connection)
    and is not applied afterwards. The same DELETE with time to spare is applied."""
    failed: list[tuple[str, str, str]] = []
    dispatcher._on_failed = lambda *f: failed.append(f)
    ns = namespace(cluster, "fenced")
    for name in ("late", "in-time"):
        cluster.create_pod(ns, pod_manifest(name, scheduler_name="nobody", nodeName="kwok-node-1"))
    wait_running(cluster, ns, ["late", "in-time"])
    uid = {n: (cluster.get_pod(ns, n) or {})["metadata"]["uid"] for n in ("late", "in-time")}
    hook = DeleteWebhook(cluster, ns)
    hook.start()
    try:
        hook.delay = WEBHOOK_DELAY
        held_until = dispatcher._clock.now() + LEASE_LEFT
        dispatcher.lease_deadline = lambda: held_until
        started = time.monotonic()
        # whichever comes first: the server's own deadline (504 reason Timeout: it got the
        # `timeout` parameter) or ours (the client gives up and closes the connection)
        with pytest.raises((Timeout, ServerError)) as info:
            await dispatcher.delete_pod(ns, "late", uid=uid["late"], grace_period_seconds=0)
        assert time.monotonic() - started < LEASE_LEFT + 2.0  # not the 30 s request timeout
        if isinstance(info.value, ServerError):
            assert info.value.status == 504, info.value  # the server gave up by its deadline
        assert len(failed) == 1
        # the webhook answers "allowed" WEBHOOK_DELAY after it was asked; give the server
        # time to apply the DELETE if it still would
        wait_for(
            lambda: any(p == "late" and what == "end" for _, p, what in hook.log),
            timeout=30,
            what="the webhook's delayed answer",
        )
        await asyncio.sleep(2.0)
        pod = cluster.get_pod(ns, "late")
        assert pod is not None and not pod["metadata"].get("deletionTimestamp")

        # the same DELETE with the lease valid long enough goes through
        hook.delay = 1.0
        held_until = dispatcher._clock.now() + 15.0
        await dispatcher.delete_pod(ns, "in-time", uid=uid["in-time"], grace_period_seconds=0)
        wait_for(lambda: cluster.get_pod(ns, "in-time") is None, timeout=20, what="in-time gone")
    finally:
        hook.stop()
