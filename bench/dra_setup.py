"""What the pinned harness does to a cluster for its DRA workloads: publish the devices
once (as a driver would), and before each run make the namespace hold exactly that
run's fill claims, allocated, and no other claim.

Nothing here is measured: it runs while the control plane has every core.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from bench import dra_objects as do
from bench import pinned_workloads as pw
from bench.api import Api, retrying

Progress = Callable[[str, bool], None]
T = TypeVar("T")
SETTLE_LIMIT_S = 300.0


async def _each(items: Iterable[T], fn: Callable[[T], Awaitable[Any]], concurrency: int) -> None:
    it = iter(items)

    async def worker() -> None:
        for item in it:
            await fn(item)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def publish_devices(api: Api, nodes: int, concurrency: int) -> None:
    """The class, the template and one slice per node; what exists already stays."""
    await retrying(lambda: api.request("POST", do.CLASSES, do.device_class(), ok=(409,)))
    await retrying(lambda: api.request("POST", do.TEMPLATES, do.claim_template(), ok=(409,)))

    async def publish(i: int) -> None:
        body = do.resource_slice(pw.node_name(i))
        await retrying(lambda: api.request("POST", do.SLICES, body, ok=(409,)))

    await _each(range(nodes), publish, concurrency)


async def reset_claims(
    api: Api, w: pw.PinnedWorkload, concurrency: int, progress: Progress, label: str
) -> dict[str, Any]:
    """Delete every claim but w's fill claims (the measured pods' claims of earlier runs
    too: the resourceclaim controller lets them go once their pods are gone), then
    create and allocate the fill claims that are missing."""
    t = time.monotonic()
    wanted = {do.fill_claim_name(k): k for k in range(w.filled_devices)}
    deadline = t + SETTLE_LIMIT_S
    while True:
        items = (await api.request("GET", do.CLAIMS))["items"]
        extra = [c["metadata"] for c in items if c["metadata"]["name"] not in wanted]
        if not extra:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(extra)} claims still there after {SETTLE_LIMIT_S:.0f}s")
        progress(f"{label}: deleting {len(extra)} claims of earlier runs", False)

        async def delete(meta: dict[str, Any]) -> None:
            if not meta.get("deletionTimestamp"):
                await api.request("DELETE", f"{do.CLAIMS}/{meta['name']}", ok=(404,))

        await _each(extra, delete, concurrency)
        await asyncio.sleep(1.0)
    allocated = {c["metadata"]["name"] for c in items if (c.get("status") or {}).get("allocation")}
    present = {c["metadata"]["name"] for c in items}
    missing = [k for name, k in wanted.items() if name not in allocated]
    progress(f"{label}: allocating {len(missing)} fill claims", True)

    async def fill(k: int) -> None:
        if do.fill_claim_name(k) not in present:
            body = do.fill_claim(k)
            await retrying(lambda: api.request("POST", do.CLAIMS, body, ok=(409,)))
        patch = do.fill_allocation(k, w.nodes, pw.node_name(k % w.nodes))
        await retrying(
            lambda: api.request(
                "PATCH",
                f"{do.CLAIMS}/{do.fill_claim_name(k)}/status",
                patch,
                content_type="application/merge-patch+json",
            )
        )

    await _each(missing, fill, concurrency)
    return {"claims_reset_s": round(time.monotonic() - t, 1), "fill_claims_added": len(missing)}


async def wait_for_claims(api: Api, want: int, progress: Progress, label: str) -> float:
    """Until the resourceclaim controller has made `want` claims for the measured pods
    (a pod waits for its claim before any scheduler may place it); returns the wait."""
    t = time.monotonic()
    selector = f"!{do.FILL_LABEL}"
    while True:
        items = (await api.request("GET", f"{do.CLAIMS}?labelSelector={selector}"))["items"]
        if len(items) >= want:
            return round(time.monotonic() - t, 1)
        if time.monotonic() - t > SETTLE_LIMIT_S:
            raise TimeoutError(f"only {len(items)}/{want} claims made from the template")
        progress(f"{label}: {len(items)}/{want} claims made from the template", False)
        await asyncio.sleep(0.5)
