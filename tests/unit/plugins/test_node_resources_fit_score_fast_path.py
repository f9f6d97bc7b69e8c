"""NodeResourcesFit's score fast path (every resource allocatable on every node: an
integer dot product with the weights) gives the integers of the original formula, kept
here as the reference, for LeastAllocated and MostAllocated."""

from __future__ import annotations

import numpy as np

from scheduler.config import names
from scheduler.config.args import LEAST_ALLOCATED, MOST_ALLOCATED, parse_plugin_args
from scheduler.framework.interfaces import MAX_NODE_SCORE, IntArray
from scheduler.plugins.node_resources_fit import NodeResourcesFit


def reference_score(kind: str, w_row: IntArray, alloc: IntArray, req: IntArray) -> IntArray:
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    if kind == LEAST_ALLOCATED:
        per = np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // safe)
    else:
        per = np.minimum(req, alloc) * MAX_NODE_SCORE // safe
    w = w_row[None, :] * valid
    wsum = w.sum(axis=1)
    total = (per * w).sum(axis=1)
    out: IntArray = np.where(wsum > 0, total // np.maximum(wsum, 1), 0).astype(np.int64)
    return out


def test_fit_score_matches_reference_on_random_inputs() -> None:
    rng = np.random.default_rng(20261201)
    fast_cases = 0
    for case in range(600):
        kind = LEAST_ALLOCATED if case % 2 else MOST_ALLOCATED
        n_res = int(rng.integers(1, 4))
        w = rng.integers(1, 6, size=n_res)
        resources = [
            {"name": r, "weight": int(w[j])}
            for j, r in enumerate(["cpu", "memory", "ephemeral-storage"][:n_res])
        ]
        raw = {"scoringStrategy": {"type": kind, "resources": resources}}
        plugin = NodeResourcesFit(parse_plugin_args(names.NODE_RESOURCES_FIT, raw, "t"))
        rows = int(rng.integers(1, 600))
        scale = rng.choice(np.array([10, 4000, 1 << 34], dtype=np.int64), size=(1, n_res))
        alloc = rng.integers(1, 4 * scale + 1, size=(rows, n_res), dtype=np.int64)
        if case % 3 == 0:
            alloc[rng.random((rows, n_res)) < 0.3] = 0  # the general path
        req = (alloc * rng.uniform(0, 1.5, size=(rows, n_res))).astype(np.int64)
        exact = rng.random((rows, n_res)) < 0.1  # requested exactly at allocatable
        req[exact] = alloc[exact]
        got = plugin._score(alloc, req)
        fast_cases += int(bool((alloc > 0).all()))
        np.testing.assert_array_equal(got, reference_score(kind, w.astype(np.int64), alloc, req))
    assert fast_cases > 300  # the fast path was exercised
