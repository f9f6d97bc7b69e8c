"""Two LeaderElectors on one real Lease: exactly one leads; a release lets the other
take over within a retry period instead of a lease duration."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from scheduler.client.connection import Connection
from scheduler.client.dispatcher import Dispatcher
from scheduler.leader import LeaderElectionSettings, LeaderElector
from tests.kube import ClusterHandle

pytestmark = pytest.mark.cluster


async def until(predicate: Callable[[], bool], seconds: float) -> None:
    async with asyncio.timeout(seconds):
        while not predicate():  # noqa: ASYNC110 - polling elector state
            await asyncio.sleep(0.05)


async def test_exactly_one_leads_and_a_release_hands_over_fast(cluster: ClusterHandle) -> None:
    ns = cluster.create_namespace(f"lease-{uuid.uuid4().hex[:6]}")
    conn = await Connection.from_kubeconfig(cluster.kubeconfig)
    dispatcher = Dispatcher(conn)

    def elector(identity: str) -> LeaderElector:
        settings = LeaderElectionSettings(
            ns,
            "kube-async-scheduler",
            identity,
            lease_duration=6.0,
            renew_deadline=4.0,
            retry_period=0.5,
        )
        return LeaderElector(dispatcher, settings)

    a, b = elector("a"), elector("b")
    task_a = asyncio.create_task(a.run())
    await until(lambda: a.is_leader, 10)
    task_b = asyncio.create_task(b.run())
    await until(lambda: b.leader == "a", 10)
    for _ in range(30):  # 3 s, several renewals: never two leaders
        assert [a.is_leader, b.is_leader] == [True, False]
        await asyncio.sleep(0.1)

    a.stop()
    await asyncio.wait_for(task_a, 5)
    released = time.monotonic()
    lease = cluster.api(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/kube-async-scheduler"
    )
    assert lease["spec"]["holderIdentity"] in ("", "b")
    await until(lambda: b.is_leader, 6)
    assert time.monotonic() - released < 3.0  # far less than the 6 s lease
    lease = cluster.api(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/kube-async-scheduler"
    )
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    assert a.healthz() is None and b.healthz() is None
    b.stop()
    await asyncio.wait_for(task_b, 5)
    await conn.close()
