"""The policy machinery runs on the scheduler's own client: no operator framework (kopf
was replaced by the project's Informer, scheduler/policy/watcher.py) and no kubeconfig
parser of its own (the app's wiring: test_wiring.py)."""

from __future__ import annotations

import pathlib

import scheduler

PACKAGE = pathlib.Path(scheduler.__file__).parent


def _imports(path: pathlib.Path) -> list[str]:
    return [
        line.strip()
        for line in path.read_text().splitlines()
        if line.lstrip().startswith(("import ", "from "))
    ]


def test_no_module_imports_kopf() -> None:
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(line.split()[1].split(".")[0] == "kopf" for line in _imports(path))
    ]
    assert offenders == []


def test_the_policy_package_builds_no_connection_of_its_own() -> None:
    """One identity: the watcher and the status writer get the app's Connection and
    Dispatcher; nothing in scheduler/policy/ parses a kubeconfig or opens a client."""
    for path in (PACKAGE / "policy").glob("*.py"):
        text = path.read_text()
        imported = {line.split()[1].split(".")[0] for line in _imports(path)}
        assert not imported & {"yaml", "kubernetes_asyncio", "aiohttp"}, path.name
        for call in ("Connection.connect", "Connection.from_", "Connection("):
            assert call not in text, f"{path.name}: {call}"
