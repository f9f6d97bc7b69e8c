"""The fault suite's reduced form, run by the normal test suite (marker `faults`):
each case a few seconds to about a minute against its own real control plane. The
full forms run with `python -m tests.faults` (docs/reliability.md)."""

from __future__ import annotations

import shutil
import tempfile
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
def test_fault_case_reduced(name: str) -> None:
    # a work dir of its own, outside pytest's tmp_path (whose old runs other pytest
    # sessions on the machine remove): kept when the case fails, for its audit log and
    # scheduler logs, removed when it passes
    workdir = Path(tempfile.mkdtemp(prefix=f"kas-faults-{name}-"))
    result = run_case(CASES[name], RunContext(workdir, full=False, say=print))
    if result.passed:
        shutil.rmtree(workdir, ignore_errors=True)
    assert result.passed, f"{result.summary()}\n(logs and audit log kept in {workdir})"
