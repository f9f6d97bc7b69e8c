"""A fenced write ends with the lease, against the real API server: a victim DELETE held
at a slow admission webhook past the lease's sure validity is given up by the client
at that moment and is not applied by the server afterwards (the write carries the
`timeout` query parameter, and the client closes its connection). The same DELETE with
time to spare is applied: the check can fail."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from scheduler.client.connection import Connection
from scheduler.client.dispatcher import Dispatcher
from scheduler.client.errors import ServerError, Timeout
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import wait_running
from tests.webhook import DeleteWebhook

pytestmark = pytest.mark.cluster

LEASE_LEFT = 1.0
WEBHOOK_DELAY = 4.0


@pytest.fixture
async def dispatcher(cluster: ClusterHandle) -> AsyncIterator[Dispatcher]:
    conn = await Connection.from_kubeconfig(cluster.kubeconfig)
    failed: list[tuple[str, str, str]] = []
    d = Dispatcher(conn, on_failed=lambda *f: failed.append(f))
    d.failed = failed  # type: ignore[attr-defined]
    yield d
    await conn.close()


@pytest.mark.timeout(120)
async def test_a_fenced_delete_held_past_the_lease_is_not_applied_later(
    cluster: ClusterHandle, dispatcher: Dispatcher
) -> None:
    ns = cluster.create_namespace(f"fenced-{uuid.uuid4().hex[:6]}")
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
            assert (info.value.status, info.value.reason) == (504, "Timeout")
        assert len(dispatcher.failed) == 1  # type: ignore[attr-defined]
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
