"""The metrics SchedulerApp wires to its informers, dispatchers and cache move.

Each test drives the real component inside a real SchedulerApp (only the connection is
scripted) and reads the sample from the app's registry, as a scrape would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

from scheduler.app import RunOptions, SchedulerApp
from scheduler.catalog import default_config
from scheduler.client.connection import Response
from scheduler.features import FeatureGates
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.watch_list import initial_events, is_watch_list

Raw = dict[str, Any]
GONE = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}


class ScriptedConnection:
    """Every LIST and watch list is empty; the first pods WATCH ends in 410 Gone (after
    its initial events, when a watch list), every later watch blocks; writes wait for `release` when it is given."""

    def __init__(self, release: asyncio.Event | None = None) -> None:
        self.release = release
        self.writes_started = 0
        self.pod_watches = 0

    async def request(self, method: str, path: str, **_: Any) -> Raw:
        return {"metadata": {"resourceVersion": "10"}, "items": []}

    async def watch(self, path: str, query: Any = None, **_: Any) -> AsyncGenerator[Raw, None]:
        if is_watch_list(query):  # an empty state, then as a watch
            for event in initial_events([]):
                yield event
        if path == "/api/v1/pods":
            self.pod_watches += 1
            if self.pod_watches == 1:
                yield GONE
        await asyncio.Event().wait()

    async def request_raw(self, method: str, path: str, **_: Any) -> Response:
        self.writes_started += 1
        if self.release is not None:
            await self.release.wait()
        return Response(201, {})


def make_app(conn: ScriptedConnection) -> SchedulerApp:
    return SchedulerApp(default_config(), conn, RunOptions(leader_elect=False))  # type: ignore[arg-type]


def sample(app: SchedulerApp, name: str, **labels: str) -> float | None:
    return app.metrics.registry.get_sample_value(name, labels)


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not predicate():  # noqa: ASYNC110 - the informer runs on this loop
            await asyncio.sleep(0)


async def test_an_informer_that_gets_410_counts_its_relist_and_the_error_event() -> None:
    app = make_app(ScriptedConnection())
    task = asyncio.create_task(app.pod_informer.run())
    relists = "scheduler_informer_relists_total"
    await until(lambda: sample(app, relists, resource="pods") == 2.0)
    assert app.pod_informer.statistics().gone == 1
    assert sample(app, "scheduler_informer_events_total", resource="pods", type="ERROR") == 1.0
    # another informer's series stays apart
    assert sample(app, relists, resource="nodes") is None
    app.pod_informer.stop()
    await task


async def test_api_calls_are_timed_and_counted_while_pending() -> None:
    release = asyncio.Event()
    conn = ScriptedConnection(release)
    app = make_app(conn)
    pending = "scheduler_api_dispatcher_pending_calls"
    assert sample(app, pending) == 0.0
    call = asyncio.create_task(app.dispatcher.create_event({"metadata": {"namespace": "ns"}}))
    await until(lambda: conn.writes_started == 1)
    assert sample(app, pending) == 1.0
    release.set()
    await call
    assert sample(app, pending) == 0.0
    count = "scheduler_api_request_duration_seconds_count"
    assert sample(app, count, verb="create", resource="events") == 1.0


def test_cache_size_reports_nodes_pods_and_assumed_pods_as_upstream() -> None:
    app = make_app(ScriptedConnection())
    app.cache.add_node(make_node("n1").obj())
    app.cache.add_pod(make_pod("bound").node("n1").obj())
    app.cache.assume_pod(make_pod("new").obj(), "n1")
    size = "scheduler_cache_size"
    assert sample(app, size, type="nodes") == 1.0
    assert sample(app, size, type="pods") == 2.0
    assert sample(app, size, type="assumed_pods") == 1.0


def test_all_members_groups_are_deleted_together_by_both_executors_under_the_gate() -> None:
    # one UnitEvictions for the single-pod and the pod-group executor, counting on the
    # app's registry; none (and no such series) without GenericWorkload
    gated = SchedulerApp(
        default_config(FeatureGates(generic_workload=True)),
        ScriptedConnection(),  # type: ignore[arg-type]
        RunOptions(leader_elect=False, features=FeatureGates(generic_workload=True)),
    )
    units = gated.unit_evictions
    assert units is not None
    assert gated.pod_group_preemptions is not None
    assert gated.executor._units is units and gated.pod_group_preemptions._units is units
    names = {m.name for m in gated.metrics.registry.collect()}
    assert {
        "scheduler_preemption_unit_preflights",
        "scheduler_preemption_unit_member_retries",
    } <= names
    plain = make_app(ScriptedConnection())
    assert plain.unit_evictions is None and plain.executor._units is None
    assert "scheduler_preemption_unit_preflights" not in {
        m.name for m in plain.metrics.registry.collect()
    }
