"""The client package's surface: nothing outside scheduler/client imports
kubernetes_asyncio, and the error tree others catch does not load the transport."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import scheduler.client as client

PACKAGE = pathlib.Path(client.__file__).parent.parent


def test_the_error_tree_does_not_load_the_transport() -> None:
    code = (
        "import sys; import scheduler.client.errors; "
        "print(sorted(m for m in ('aiohttp', 'kubernetes_asyncio') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_only_the_client_layer_imports_kubernetes_asyncio() -> None:
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "kubernetes_asyncio" in path.read_text()
        and path.relative_to(PACKAGE).parts[0] != "client"
    ]
    assert offenders == []
