"""scheduler.app: leader election has a client of its own (its own connection when the
process runs, and always its own token bucket), as upstream's leader-election clientset,
so Lease calls never queue behind scheduling writes."""

from __future__ import annotations

import asyncio
from typing import Any

from scheduler.app import RunOptions, SchedulerApp
from scheduler.catalog import default_config
from scheduler.client.connection import Response


class RecordingConnection:
    """Answers every request at once, recording it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[str, str]] = []

    async def request_raw(self, method: str, path: str, **kwargs: Any) -> Response:
        self.calls.append((method, path))
        return Response(200, {"metadata": {"name": "lease"}, "spec": {}})


async def test_the_elector_uses_its_own_connection_and_token_bucket() -> None:
    main, lease = RecordingConnection("main"), RecordingConnection("lease")
    app = SchedulerApp(
        default_config(),
        main,  # type: ignore[arg-type]
        RunOptions(leader_elect=True, identity="me"),
        lease_connection=lease,  # type: ignore[arg-type]
    )
    assert app.elector is not None
    assert app.elector._client is app.lease_dispatcher
    assert app.lease_dispatcher is not app.dispatcher
    assert app.lease_dispatcher.connection is lease

    # a backlog: the scheduling bucket owes 20 s of tokens (1000 calls at qps 50)
    for _ in range(1000):
        app.dispatcher._bucket.reserve()
    assert app.dispatcher._bucket.reserve() > 15  # the next scheduling call would wait ~20 s
    # the Lease call does not wait for any of it
    async with asyncio.timeout(5):
        await app.lease_dispatcher.get_lease("kube-system", "kube-async-scheduler")
    assert lease.calls == [
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-async-scheduler")
    ]
    assert main.calls == []


async def test_without_a_lease_connection_the_elector_still_has_its_own_bucket() -> None:
    main = RecordingConnection("main")
    app = SchedulerApp(
        default_config(),
        main,  # type: ignore[arg-type]
        RunOptions(leader_elect=True, identity="me"),
    )
    assert app.lease_dispatcher.connection is main
    assert app.lease_dispatcher._bucket is not app.dispatcher._bucket
