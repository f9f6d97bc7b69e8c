"""An event burst the recorder cannot keep (issue 10, item 2): drops are never silent.

The scheduler runs in this process against a real control plane, with a small event
buffer and the production rate limit, so a burst of pods that fit nowhere overflows
the buffer. Once everything is written, the pods that have no FailedScheduling Event in
the API server must be exactly as many as scheduler_events_dropped_total says.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest

from kas_dev.cluster.nodes import NodeGroup
from scheduler.app import RunOptions, SchedulerApp
from scheduler.catalog import default_config
from scheduler.client.connection import Connection
from scheduler.server import ServingOptions
from tests.kube import ClusterHandle, pod_manifest
from tests.workloads import create_all

pytestmark = pytest.mark.cluster

PODS = 300


async def until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    try:
        async with asyncio.timeout(seconds):
            while not predicate():  # noqa: ASYNC110 - polling state fed by the API server
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"timed out after {seconds:.0f}s waiting for {what}") from None


def _sample(app: SchedulerApp, name: str, **labels: str) -> float:
    total = 0.0
    for family in app.metrics.registry.collect():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


async def test_every_pod_without_an_event_is_counted_as_a_dropped_event(
    make_cluster: Callable[..., ClusterHandle],
) -> None:
    cluster = make_cluster([NodeGroup(2)])
    ns = cluster.create_namespace(f"burst-{uuid.uuid4().hex[:6]}")
    cfg = default_config()  # production client settings: qps 50, burst 100
    conn = await Connection.from_kubeconfig(cluster.kubeconfig)
    app = SchedulerApp(
        cfg,
        conn,
        RunOptions(serving=ServingOptions(bind_address="127.0.0.1", secure_port=0), leader_elect=False, event_buffer_size=20),
    )
    run = asyncio.create_task(app.run())
    try:
        await until(lambda: app.pod_informer.has_synced, 30, "the informers")
        scheduler = cfg.profiles[0].scheduler_name
        pods = [
            (ns, pod_manifest(f"p-{i}", cpu="64", scheduler_name=scheduler)) for i in range(PODS)
        ]
        await asyncio.to_thread(create_all, cluster, pods)

        def attempted() -> bool:
            return _sample(app, "scheduler_schedule_attempts_total", result="unschedulable") >= PODS

        await until(attempted, 120, f"{PODS} failed attempts")
        # everything the recorder still holds goes out (or is counted) when it stops
        await app.events.stop(grace=60.0)
        dropped = _sample(app, "scheduler_events_dropped_total")
        assert dropped > 0, "the burst did not overflow the buffer: the test proves nothing"

        events = await asyncio.to_thread(cluster.events, ns)
        with_event = {
            e["regarding"]["name"] for e in events if e.get("reason") == "FailedScheduling"
        }
        without = PODS - len(with_event)
        print(f"pods={PODS} without_event={without} events_dropped_total={dropped:.0f}")
        assert without == dropped, (without, dropped, app.events.statistics())
        assert _sample(app, "scheduler_events_dropped_total", reason="buffer_full") == dropped
    finally:
        app.request_stop()
        await asyncio.wait_for(run, 60)
        await conn.close()
