"""What the end-to-end tests need on the machine, and what happens without it: outside CI
a missing piece skips the test with the reason; in CI (CI=true) it fails it, so the
tests cannot silently stop running."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kas_dev.cluster.binaries import default_bin_dir


def missing_for_image() -> str:
    """hack/build-image.sh: root, buildah and debootstrap."""
    if os.geteuid() != 0:
        return "not root"
    return _missing_tools("buildah", "debootstrap")


def missing_for_real_node() -> str:
    """A real-node cluster with the image: the above, the binaries, containerd and runc."""
    if why := missing_for_image():
        return why
    for name in ("kubelet", "prometheus", "promtool", "helm", "kube-scheduler"):
        if not (default_bin_dir() / name).exists():
            return f"{name} not built (hack/install-binaries.sh realnode)"
    return _missing_tools("containerd", "runc")


def require(why: str) -> None:
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"end-to-end prerequisites missing in CI: {why}")
        pytest.skip(why)


def _missing_tools(*tools: str) -> str:
    for tool in tools:
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} not installed (hack/install-system-packages.sh)"
    return ""
