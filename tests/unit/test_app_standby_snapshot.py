"""scheduler.app: a standby (leader election on, another replica holds the Lease) keeps
the scheduling loop's snapshot current, so the cycle that follows a won lease does not
copy every node first (loop.py keep_snapshot_current). The real SchedulerApp runs; only
the connection is scripted: a LIST or watch list of nodes, watches that never end, a Lease another
replica holds for an hour."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from scheduler.app import RunOptions, SchedulerApp
from scheduler.catalog import default_config
from scheduler.client.connection import Response
from scheduler.server import ServingOptions
from tests.unit.helpers.builders import make_node
from tests.unit.helpers.watch_list import initial_events, is_watch_list

Raw = dict[str, Any]
NODES = [make_node(f"n{i}").raw() for i in range(30)]


class StandbyConnection:
    def __init__(self) -> None:
        self.lease_gets = 0

    async def request(self, method: str, path: str, **_: Any) -> Raw:
        items = NODES if path == "/api/v1/nodes" else []
        return {"metadata": {"resourceVersion": "10"}, "items": items}

    async def watch(self, path: str, query: Any = None, **_: Any) -> AsyncGenerator[Raw, None]:
        if is_watch_list(query):
            for event in initial_events(NODES if path == "/api/v1/nodes" else []):
                yield event
        await asyncio.Event().wait()

    async def request_raw(self, method: str, path: str, **_: Any) -> Response:
        if "/leases/" in path and method == "GET":
            self.lease_gets += 1
            spec = {"holderIdentity": "other", "leaseDurationSeconds": 3600}
            return Response(200, {"metadata": {"name": "l", "resourceVersion": "1"}, "spec": spec})
        return Response(201, {})


async def test_a_standby_holds_a_current_snapshot_before_it_ever_leads() -> None:
    conn = StandbyConnection()
    options = RunOptions(
        leader_elect=True,
        identity="standby",
        serving=ServingOptions(bind_address="127.0.0.1", secure_port=0),
    )
    app = SchedulerApp(default_config(), conn, options)  # type: ignore[arg-type]
    # made with the loop, before anything was listed
    assert app.loop.snapshot.get("n29") is None
    task = asyncio.create_task(app.run())
    try:
        async with asyncio.timeout(20):
            while app.loop.snapshot.get("n29") is None:  # noqa: ASYNC110 - the app runs here
                await asyncio.sleep(0.01)
        assert conn.lease_gets >= 1  # campaigning, not leading
        assert not app._leading.is_set()
        # what the first cycle would copy once the lease is won: nothing
        assert app.cache.update_snapshot(app.loop.snapshot) == 0
    finally:
        app.request_stop()
        async with asyncio.timeout(30):
            await task


async def test_the_caches_synced_hook_runs_once_before_the_lease_is_sought() -> None:
    # the process settles its heap there (scheduler/collector.py): it must see the
    # listed caches, and the one collection must not land after campaigning began
    conn = StandbyConnection()
    calls: list[tuple[int, int]] = []
    app: SchedulerApp | None = None

    def hook() -> None:
        assert app is not None
        calls.append((app.cache.node_count(), conn.lease_gets))

    options = RunOptions(
        leader_elect=True,
        identity="standby",
        serving=ServingOptions(bind_address="127.0.0.1", secure_port=0),
        on_caches_synced=hook,
    )
    app = SchedulerApp(default_config(), conn, options)  # type: ignore[arg-type]
    task = asyncio.create_task(app.run())
    try:
        async with asyncio.timeout(20):
            while conn.lease_gets < 2:  # noqa: ASYNC110 - the app runs here
                await asyncio.sleep(0.01)
        assert calls == [(len(NODES), 0)]
    finally:
        app.request_stop()
        async with asyncio.timeout(30):
            await task
