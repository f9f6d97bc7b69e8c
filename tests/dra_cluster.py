"""Helpers for the DRA tests against the real API server: the DRA informers running into
a DeviceState for the length of a block, and the cluster-scoped objects a test made
(device classes, resource slices) removed after it, so the session's shared cluster
stays as the next test expects it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from scheduler.client.connection import Connection
from scheduler.dra.device_state import DeviceState
from scheduler.dra_informers import dra_informers
from tests.kube import ClusterHandle, wait_for

RESOURCE = "/apis/resource.k8s.io/v1"


@contextlib.asynccontextmanager
async def running_dra_informers(
    connection: Connection, state: DeviceState, sink: Callable[[], Any] = lambda: None
) -> AsyncIterator[None]:
    """Synced on entry; stopped (and awaited) on exit."""
    informers = dra_informers(connection, state, sink)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        await asyncio.gather(*(i.wait_synced() for i in informers))
        yield
    finally:
        for i in informers:
            i.stop()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t


@contextlib.contextmanager
def cluster_scoped(cluster: ClusterHandle, *paths: str) -> Iterator[None]:
    """Delete these resource.k8s.io objects ("deviceclasses/x") after the block; one
    that is absent (the test failed before making it) is passed over."""
    try:
        yield
    finally:
        for path in paths:
            with contextlib.suppress(AssertionError):
                cluster.api("DELETE", f"{RESOURCE}/{path}")


def publish_devices(
    cluster: ClusterHandle,
    driver: str,
    node: str,
    devices: int,
    attributes: dict[str, Any] | None = None,
) -> None:
    """What a DRA driver on `node` would publish: one pool named after the node, one
    slice `<node>-gpus` with devices gpu-0.. carrying `attributes`."""
    publish_slice(cluster, driver, node, [attributes or {}] * devices)


def publish_slice(
    cluster: ClusterHandle, driver: str, node: str, attributes: list[dict[str, Any]]
) -> None:
    """The same pool and slice, with one device gpu-<i> per entry of `attributes`, each
    carrying its own (devices of one pool that differ, as a driver's partitions do)."""
    cluster.api(
        "POST",
        f"{RESOURCE}/resourceslices",
        {
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"gpu-{i}", **({"attributes": attrs} if attrs else {})}
                    for i, attrs in enumerate(attributes)
                ],
            },
        },
    )


def pending_message(cluster: ClusterHandle, namespace: str, name: str) -> str:
    """The message of the pod's PodScheduled=False condition, once written."""

    def refused() -> str | None:
        pod = cluster.get_pod(namespace, name)
        for c in (pod or {}).get("status", {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("message"):
                return str(c["message"])
        return None

    message: str = wait_for(refused, timeout=60, what=f"{name}'s PodScheduled condition")
    return message
