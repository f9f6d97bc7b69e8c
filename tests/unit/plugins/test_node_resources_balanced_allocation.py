"""balance()'s fast path (two resources, all allocatable > 0) and its general path give
the same integers as the original single formula, kept here as the reference."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.framework.interfaces import MAX_NODE_SCORE, IntArray
from scheduler.plugins.node_resources_balanced_allocation import balance, balanced_score


def reference_balance(requested: IntArray, alloc: IntArray) -> IntArray:
    """The formula as it stood before the fast path (one code path for every shape)."""
    valid = alloc > 0
    frac: npt.NDArray[np.float64] = np.where(valid, requested / np.where(valid, alloc, 1), 0.0)
    frac = np.minimum(frac, 1.0)
    count = valid.sum(axis=1)
    n_rows, n_res = frac.shape
    total = np.zeros(n_rows, dtype=np.float64)
    for j in range(n_res):
        total += frac[:, j]
    std = np.zeros(n_rows, dtype=np.float64)
    rank = np.cumsum(valid, axis=1)
    first = np.where(valid & (rank == 1), frac, 0.0).sum(axis=1)
    second = np.where(valid & (rank == 2), frac, 0.0).sum(axis=1)
    std = np.where(count == 2, np.abs((first - second) / 2), std)
    many = count > 2
    if many.any():
        mean = total / np.maximum(count, 1)
        sq = np.zeros(n_rows, dtype=np.float64)
        for j in range(n_res):
            d = frac[:, j] - mean
            sq += np.where(valid[:, j], d * d, 0.0)
        std = np.where(many, np.sqrt(sq / np.maximum(count, 1)), std)
    out: IntArray = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return out


def _random_case(
    rng: np.random.Generator, n_res: int, zero_alloc: bool
) -> tuple[IntArray, IntArray, IntArray]:
    """(requested-with-pod, requested-without-pod, alloc): realistic magnitudes (millicores,
    bytes up to TiB), requests both below and above allocatable, and small values where
    fractions land exactly on score boundaries."""
    rows = int(rng.integers(1, 600))
    scale = rng.choice(np.array([10, 4000, 1 << 20, 1 << 40], dtype=np.int64), size=(1, n_res))
    alloc = rng.integers(1, 4 * scale + 1, size=(rows, n_res), dtype=np.int64)
    small = rng.random(rows) < 0.2
    alloc[small] = rng.integers(1, 11, size=(int(small.sum()), n_res), dtype=np.int64)
    allocated = (alloc * rng.uniform(0, 1.5, size=(rows, n_res))).astype(np.int64)
    exact = rng.random((rows, n_res)) < 0.1  # requested exactly at allocatable
    allocated[exact] = alloc[exact]
    pod = rng.integers(0, scale + 1, size=(1, n_res), dtype=np.int64)
    if zero_alloc:
        alloc[rng.random((rows, n_res)) < 0.3] = 0
    requested = allocated + np.where(alloc > 0, pod, 0)
    return requested, allocated, alloc


def test_balance_matches_reference_on_random_inputs() -> None:
    rng = np.random.default_rng(20261201)
    fast_cases = 0
    for case in range(3000):
        n_res = int(rng.choice([1, 2, 2, 2, 3, 4]))
        requested, allocated, alloc = _random_case(rng, n_res, zero_alloc=case % 4 == 0)
        fast_cases += int(n_res == 2 and bool((alloc > 0).all()))
        for req in (requested, allocated):
            np.testing.assert_array_equal(balance(req, alloc), reference_balance(req, alloc))
        want = reference_balance(requested, alloc) - reference_balance(allocated, alloc)
        d = MAX_NODE_SCORE // 2 + want
        expected = MAX_NODE_SCORE // 2 + np.where(d >= 0, d // 2, -((-d) // 2))
        np.testing.assert_array_equal(balanced_score(requested, allocated, alloc), expected)
    assert fast_cases > 1000  # the fast path was exercised, not only the general one


def test_balance_fast_path_known_values() -> None:
    # cpu 1/4 used, memory 3/4 used: std 0.25 -> 75; both over capacity: capped, std 0 -> 100
    alloc = np.array([[4000, 16], [4000, 16]], dtype=np.int64)
    requested = np.array([[1000, 12], [9000, 40]], dtype=np.int64)
    assert balance(requested, alloc).tolist() == [75, 100]
