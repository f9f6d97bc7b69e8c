"""Layering: kopf is imported only by scheduler/policy/controller.py (the embedded
controller), and importing the scheduler's runtime without --preemption-policies does
not import kopf at all."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import scheduler

PACKAGE = pathlib.Path(scheduler.__file__).parent


def test_only_the_policy_controller_imports_kopf() -> None:
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(
            line.lstrip().startswith(("import kopf", "from kopf"))
            for line in path.read_text().splitlines()
        )
    ]
    assert offenders == ["policy/controller.py"]


def test_the_app_does_not_import_kopf_until_policies_are_enabled() -> None:
    code = "import sys, scheduler.app; print('kopf' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
