"""bench.api: the client-side token bucket and the Binding body."""

from __future__ import annotations

import time

from bench.api import TokenBucket, binding


async def test_token_bucket_allows_the_burst_then_the_rate() -> None:
    bucket = TokenBucket(qps=100.0, burst=5)
    t0 = time.monotonic()
    for _ in range(5):
        await bucket.take()
    assert time.monotonic() - t0 < 0.02  # the burst is free
    for _ in range(5):
        await bucket.take()
    elapsed = time.monotonic() - t0
    assert 0.04 <= elapsed < 0.5  # five more at 100/s take about 50 ms


async def test_token_bucket_without_qps_never_waits() -> None:
    bucket = TokenBucket(qps=0.0, burst=1)
    t0 = time.monotonic()
    for _ in range(1000):
        await bucket.take()
    assert time.monotonic() - t0 < 0.1


def test_binding_body() -> None:
    assert binding("ns", "p", "n1") == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ns"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
