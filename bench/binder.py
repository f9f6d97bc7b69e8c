"""The ceiling: a raw binder that does no scheduling at all.

Run as its own process, like the schedulers under test:

    python -m bench.binder --kubeconfig FILE --scheduler-name NAME [--qps Q --burst B]
                           [--concurrency C]

It lists the nodes, then binds every pending pod of `--scheduler-name` (first the ones a
LIST finds, then new ones from a WATCH) to the nodes in round-robin order through the
pods/binding subresource, with at most C requests in flight and the same client-side
qps/burst as the schedulers. Its rate is what the API server accepts: the upper bound
any scheduler on this machine can reach.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import signal
import sys
from collections.abc import Iterator
from typing import Any

from bench.api import Api, ApiError, binding


async def _bind_all(args: argparse.Namespace) -> int:
    async with Api(
        args.kubeconfig,
        qps=args.qps,
        burst=args.burst,
        connections=args.concurrency,
        user_agent="kas-bench-binder",
    ) as api:
        nodes = sorted(
            n["metadata"]["name"] for n in (await api.request("GET", "/api/v1/nodes"))["items"]
        )
        if not nodes:
            print("binder: no nodes", file=sys.stderr)
            return 1
        rr: Iterator[str] = itertools.cycle(nodes)
        sem = asyncio.Semaphore(args.concurrency)
        seen: set[str] = set()
        tasks: set[asyncio.Task[None]] = set()
        failures = 0

        async def bind(ns: str, name: str, node: str) -> None:
            nonlocal failures
            async with sem:
                try:
                    await api.request(
                        "POST",
                        f"/api/v1/namespaces/{ns}/pods/{name}/binding",
                        binding(ns, name, node),
                    )
                except (TimeoutError, ApiError, OSError) as exc:
                    failures += 1
                    print(f"binder: {ns}/{name}: {exc}", file=sys.stderr)

        def offer(pod: dict[str, Any]) -> None:
            meta = pod["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            spec = pod.get("spec", {})
            if key in seen or spec.get("nodeName") or meta.get("deletionTimestamp"):
                return
            if spec.get("schedulerName") != args.scheduler_name:
                return
            seen.add(key)
            t = asyncio.create_task(bind(meta["namespace"], meta["name"], next(rr)))
            tasks.add(t)
            t.add_done_callback(tasks.discard)

        sel = f"spec.nodeName=,spec.schedulerName={args.scheduler_name}"
        listing = await api.request("GET", f"/api/v1/pods?fieldSelector={sel}&limit=0")
        for p in listing["items"]:
            offer(p)
        rv = listing["metadata"]["resourceVersion"]
        print(f"binder: {len(nodes)} nodes, {len(seen)} pods pending at start", flush=True)
        while True:
            try:
                async for ev in api.watch(f"/api/v1/pods?fieldSelector={sel}", rv):
                    obj = ev.get("object", {})
                    if ev.get("type") == "BOOKMARK":
                        rv = obj["metadata"]["resourceVersion"]
                        continue
                    if ev.get("type") == "ERROR":
                        raise ApiError("WATCH", "pods", 410, obj)
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        offer(obj)
            except (TimeoutError, ApiError, OSError) as exc:
                print(f"binder: watch ended ({exc}); re-listing", file=sys.stderr)
                listing = await api.request("GET", f"/api/v1/pods?fieldSelector={sel}")
                for p in listing["items"]:
                    offer(p)
                rv = listing["metadata"]["resourceVersion"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.binder", description=__doc__.split("\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--scheduler-name", required=True)
    ap.add_argument("--qps", type=float, default=0.0)
    ap.add_argument("--burst", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args(argv)

    async def run() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(_bind_all(args))
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            return await task
        return 0

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
