"""scheduler.preemption.go_sort against Go's own sort.Slice.

tests/unit/helpers/go_sort/main.go is built with the machine's Go (the toolchain that built the
kube-scheduler binary, go1.26.8) and sorts the same inputs; elements compare by key
only, so every tie shows where each sort leaves equal elements. The inputs are
tie-heavy (few distinct keys) and of every length class: insertion sort (<= 12), median
of three (< 50), Tukey's ninther and partialInsertionSort's shifting (>= 50), plus
sorted, reversed and organ-pipe runs that drive the decreasing hint, pattern breaking
and the heapsort fallback.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from scheduler.preemption.go_sort import sort_slice

GO_PROGRAM = Path(__file__).parents[1] / "helpers" / "go_sort" / "main.go"


@pytest.fixture(scope="module")
def go_sort_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("the Go toolchain is not installed")
    out = tmp_path_factory.mktemp("gosort") / "gosort"
    subprocess.run(
        [go, "build", "-o", str(out), str(GO_PROGRAM)],
        check=True,
        timeout=600,
        cwd=GO_PROGRAM.parent,
        env={**os.environ, "GO111MODULE": "off"},
    )
    return out


def _cases(rng: random.Random) -> list[list[int]]:
    cases: list[list[int]] = []
    lengths = [*range(0, 30), 49, 50, 51, 64, 100, 127, 128, 200, 500, 1000]
    for n in lengths:
        for distinct in (1, 2, 3, 5, n or 1):
            for _ in range(12):
                cases.append([rng.randrange(distinct) for _ in range(n)])
    for _ in range(2000):  # random lengths around the thresholds
        n = rng.choice([rng.randint(0, 14), rng.randint(12, 60), rng.randint(40, 300)])
        distinct = rng.choice([1, 2, 3, 4, 8, 1000])
        cases.append([rng.randrange(distinct) for _ in range(n)])
    for n in (13, 20, 50, 64, 99, 150, 400):  # structured inputs
        base = sorted(rng.randrange(4) for _ in range(n))
        cases.append(base)
        cases.append(base[::-1])
        cases.append(base[: n // 2] + base[: n // 2][::-1] + base[n // 2 * 2 :])
        cases.append([i % 7 for i in range(n)])
        cases.append([(n - i) // 3 for i in range(n)])
        near = list(base)
        for _ in range(3):
            i, j = rng.randrange(n), rng.randrange(n)
            near[i], near[j] = near[j], near[i]
        cases.append(near)
    return cases


def _ours(keys: list[int]) -> list[int]:
    items = list(enumerate(keys))
    sort_slice(items, lambda x, y: x[1] < y[1])
    return [i for i, _ in items]


def test_go_sort_matches_go_sort_slice_on_tie_heavy_inputs(go_sort_binary: Path) -> None:
    cases = _cases(random.Random(20261203))
    assert len(cases) > 4000
    text = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    done = subprocess.run(
        [str(go_sort_binary)], input=text, capture_output=True, text=True, check=True, timeout=300
    )
    lines = done.stdout.split("\n")
    unstable = 0
    for case, line in zip(cases, lines, strict=False):
        want = [int(x) for x in line.split()]
        got = _ours(case)
        assert got == want, f"keys {case}: Go {want}, ours {got}"
        if got != sorted(range(len(case)), key=lambda i: case[i]):
            unstable += 1
    assert len(lines) >= len(cases)
    # the comparison saw Go leave ties out of their original order (not just stable sorts)
    assert unstable > 100


def test_go_sort_is_stable_up_to_twelve_and_sorts() -> None:
    rng = random.Random(7)
    for n in range(13):
        keys = [rng.randrange(3) for _ in range(n)]
        assert _ours(keys) == sorted(range(n), key=lambda i: keys[i])
    keys = [rng.randrange(50) for _ in range(777)]
    items = list(keys)
    sort_slice(items, lambda x, y: x < y)
    assert items == sorted(keys)
