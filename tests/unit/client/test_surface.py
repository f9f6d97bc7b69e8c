"""The client package's public surface: every exported name resolves, and nothing
outside scheduler/client imports kubernetes_asyncio."""

from __future__ import annotations

import pathlib

import scheduler.client as client

PACKAGE = pathlib.Path(client.__file__).parent.parent


def test_every_exported_name_resolves() -> None:
    for name in client.__all__:
        assert getattr(client, name) is not None, name


def test_only_the_client_layer_imports_kubernetes_asyncio() -> None:
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "kubernetes_asyncio" in path.read_text()
        and path.relative_to(PACKAGE).parts[0] != "client"
    ]
    assert offenders == []
