"""Fill a pinned-suite cluster with `--init-pods` bound pods (bench/scale_pods.py) before
its workloads: the namespace, one owner ConfigMap per "deployment", then the pods with
`concurrency` creates in flight, saying how far it got, at what rate, and when it should
be done. kwok leaves these pods alone (bench/scale_pods.py says why), so no status
write of kwok's for them lands in a measured window.

150,000 pods took 9-10 minutes with the workloads' creation path (64 in flight, a
thousand at a time, each thousand waiting for its slowest create); here the workers
never wait for each other, and the manifests are made as they are sent (a generator)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench import scale_pods as sp
from bench.api import Api, retrying

Progress = Callable[[str, bool], None]
# a progress line at least this often (the CLI prints one per 5 s when not on a terminal)
PROGRESS_S = 1.0
# and one that stays (a newline) at every tenth of the way
STEPS = 10


def _eta(done: int, total: int, elapsed: float) -> str:
    if done <= 0 or elapsed <= 0:
        return "?"
    left = (total - done) / (done / elapsed)
    return f"{int(left // 60)}m{int(left % 60):02d}s"


async def _post(api: Api, path: str, body: dict[str, Any], attempts: int = 8) -> Any:
    """POST, retried as every setup write (api.retrying); a 409 (the object is there: a
    retry of a create that went through) counts as done."""
    return await retrying(lambda: api.request("POST", path, body, ok=(409,)), attempts)


async def _create_all(
    api: Api,
    path: str,
    bodies: Iterator[dict[str, Any]],
    total: int,
    concurrency: int,
    progress: Progress,
    what: str,
) -> tuple[int, float]:
    """POST every body of `bodies` (`concurrency` workers sharing the iterator). Returns
    (created, seconds)."""
    done = 0
    t0 = time.monotonic()
    last = 0.0
    next_step = 1

    async def worker() -> None:
        nonlocal done, last, next_step
        for body in bodies:
            await _post(api, path, body)
            done += 1
            now = time.monotonic()
            stay = done * STEPS >= next_step * total
            if stay or now - last >= PROGRESS_S:
                if stay:
                    next_step += 1
                last = now
                el = now - t0
                progress(
                    f"{what}: {done}/{total} created in {el:.0f}s "
                    f"({done / max(el, 1e-9):.0f}/s, ETA {_eta(done, total, el)})",
                    stay,
                )

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return done, time.monotonic() - t0


async def fill(
    api: Api, total: int, nodes: int, concurrency: int, progress: Progress, label: str
) -> dict[str, Any]:
    """Create the scale pods; returns the figures the result file keeps."""
    sp.check_fits(total, nodes)
    what = f"{label}: init pods"
    ns = sp.SCALE_NAMESPACE
    await _post(api, "/api/v1/namespaces", {"metadata": {"name": ns}})
    deps = sp.deployments(total)
    progress(f"{what}: {len(deps)} owner ConfigMaps", True)
    uids: dict[str, str] = {}
    cm_path = f"/api/v1/namespaces/{ns}/configmaps"

    async def owner_worker(it: Iterator[sp.Deployment]) -> None:
        for d in it:
            made = await _post(api, cm_path, sp.owner_configmap(d))
            if not isinstance(made, dict) or made.get("kind") != "ConfigMap":
                # a 409: it existed already (a retried create went through)
                made = await api.request("GET", f"{cm_path}/{d.owner_name}")
            uids[d.owner_name] = made["metadata"]["uid"]

    dep_it = iter(deps)
    await asyncio.gather(*(owner_worker(dep_it) for _ in range(max(1, concurrency))))
    most = sp.per_node(total, nodes)
    progress(f"{what}: {total} pods over {nodes} nodes ({most} a node at most), "
             f"{concurrency} in flight", True)  # fmt: skip
    created, seconds = await _create_all(
        api,
        f"/api/v1/namespaces/{ns}/pods",
        sp.scale_pods(total, nodes, uids),
        total,
        concurrency,
        progress,
        what,
    )
    progress(f"{what}: {created} created in {seconds:.0f}s ({created / max(seconds, 1e-9):.0f}/s)",
             True)  # fmt: skip
    return {
        "pods": created,
        "deployments": len(deps),
        "max_per_node": sp.per_node(total, nodes),
        "concurrency": concurrency,
        "create_s": round(seconds, 1),
        "create_rate": round(created / max(seconds, 1e-9), 1),
    }
