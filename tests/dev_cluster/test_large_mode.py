"""`cluster up --large` (LocalCluster.up(large=True)): the settings a cluster of 150,000
pods needs (docs/local-control-plane.md, "Large mode") reach the processes, are kept in
cluster.json for a component restarted later, and the cluster serves as any other; in
every mode kwok leaves pods labelled KWOK_IGNORED_LABEL alone (the pinned benchmark's
--init-pods)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kas_dev.cluster.binaries import find_binaries
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.local import (
    KWOK_IGNORED_LABEL,
    LARGE_APISERVER_ARGS,
    LARGE_ENV,
    LocalCluster,
)

pytestmark = pytest.mark.cluster


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def _environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def test_large_mode_reaches_the_api_server_and_survives_a_restart(tmp_path: Path) -> None:
    try:
        find_binaries()
    except ClusterError as exc:
        pytest.fail(f"the control-plane binaries are missing: {exc}", pytrace=False)
    c = LocalCluster(tmp_path / "c")
    c.up(1, large=True)
    try:
        assert c.status()["large"] is True
        assert c.status()["nodes_ready"] == 1
        assert LocalCluster(tmp_path / "c").state.large  # type: ignore[union-attr]
        for _ in range(2):
            assert c.state is not None
            pid = c.state.pids["kube-apiserver"]
            args = _cmdline(pid)
            for flag in LARGE_APISERVER_ARGS:
                assert flag in args
            env = _environ(pid)
            for key, value in LARGE_ENV["kube-apiserver"].items():
                assert env.get(key) == value
            # a component restarted later (the fault tests do) gets the same settings
            c.stop_component("kube-apiserver")
            c.start_component("kube-apiserver")
        status, _ = c.admin().request("GET", "/api/v1/namespaces/default/pods")
        assert status == 200
    finally:
        c.down()


def test_default_mode_has_none_of_it(tmp_path: Path) -> None:
    c = LocalCluster(tmp_path / "c")
    c.up(0)
    try:
        assert c.state is not None and not c.status()["large"]
        pid = c.state.pids["kube-apiserver"]
        assert not set(LARGE_APISERVER_ARGS) & set(_cmdline(pid))
        # (unless this test process itself runs with one, which every child inherits)
        assert "GOMEMLIMIT" not in _environ(pid) or "GOMEMLIMIT" in os.environ
    finally:
        c.down()


def test_kwok_leaves_pods_with_the_ignore_label_pending(tmp_path: Path) -> None:
    c = LocalCluster(tmp_path / "c")
    c.up(1)
    try:
        admin = c.admin()
        node = sorted(c.ready_nodes())[0]
        for name, labels in (
            ("played", {}),
            ("ignored", {KWOK_IGNORED_LABEL[0]: KWOK_IGNORED_LABEL[1]}),
        ):
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": labels},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
            }
            status, _ = admin.request("POST", "/api/v1/namespaces/default/pods", body)
            assert status == 201

        def phase(name: str) -> str:
            _, pod = admin.request("GET", f"/api/v1/namespaces/default/pods/{name}")
            return str(pod["status"].get("phase"))

        deadline = time.monotonic() + 30
        while phase("played") != "Running":
            assert time.monotonic() < deadline, "kwok never marked the unlabelled pod Running"
            time.sleep(0.2)
        # kwok has played the other pod's stage by now; the labelled one was passed over
        time.sleep(1.0)
        assert phase("ignored") == "Pending"
    finally:
        c.down()
