"""The fault suite's reduced form, run by the normal test suite (marker `faults`):
each case a few seconds to about a minute against its own real control plane. The
full forms run with `python -m tests.faults` (docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.registry import RunContext, cases, run_case

CASES = cases()


@pytest.mark.faults
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[pytest.mark.cluster] if c.needs_cluster else [], id=n)
        for n, c in CASES.items()
    ],
)
def test_fault_case_reduced(name: str, tmp_path: Path) -> None:
    result = run_case(CASES[name], RunContext(tmp_path, full=False, say=print))
    assert result.passed, result.summary()
