"""Where the test suite finds the binaries it drives directly (helm)."""

from __future__ import annotations

import os
import shutil

from kas_dev.cluster.binaries import default_bin_dir


def find_helm() -> str | None:
    """helm from the project's bin folder ($KAS_BIN_DIR or the cache), else PATH."""
    candidate = default_bin_dir() / "helm"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("helm")


def find_tool(name: str) -> str | None:
    """A binary hack/install-binaries.sh builds (promtool, prometheus, kubelet), else PATH."""
    candidate = default_bin_dir() / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)
