"""The import rules of docs/layers.md hold: import-linter checks the contracts in
pyproject.toml ([tool.importlinter]) against the real import graph of scheduler, kas_dev,
tests and bench. A broken contract fails this test with the linter's report: the importer,
the imported module and the line of each import that breaks it."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from importlinter.api import read_configuration

REPO = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"

# The rules docs/layers.md states, by contract id: dropping one from pyproject.toml must be
# a visible decision here too, not a silent loss.
REQUIRED_CONTRACTS = {
    "scheduler-layers",
    "scheduler-acyclic",
    "framework-below-algorithm",
    "cache-queue-independent",
    "only-client-imports-kubernetes-asyncio",
    "only-metrics-imports-prometheus-client",
    "scheduler-ships-alone",
    "kas-dev-layers",
    "kas-dev-needs-no-tests",
}

# A separate interpreter, started in the repository root: import-linter puts the working
# directory first on sys.path to find the root packages (so this tree's, not another
# checkout's from PYTHONPATH), and the test process's own sys.path and cwd stay untouched.
LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
)


def test_every_rule_of_docs_layers_is_a_contract() -> None:
    config = read_configuration(str(PYPROJECT))
    ids = {contract["id"] for contract in config["contracts_options"]}
    missing = REQUIRED_CONTRACTS - ids
    assert not missing, sorted(missing)


def test_import_contracts_are_kept() -> None:
    # wide lines so the report's import chains are not wrapped
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    run = subprocess.run(
        [sys.executable, "-c", LINT, str(PYPROJECT)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report
    assert "0 broken" in report, report
