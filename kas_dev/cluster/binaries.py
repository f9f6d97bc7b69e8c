"""Where the control-plane binaries are, and a clear error when one is missing.

hack/install-binaries.sh builds them into a cache folder keyed by version; this module
only finds them. KAS_BIN_DIR overrides the folder (tests and CI set it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kas_dev.cluster.errors import ClusterError

CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")
OPTIONAL = ("kube-scheduler", "kubectl", "helm")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("KAS_BIN_CACHE", str(Path(base) / "kube-async-scheduler")))


def default_bin_dir() -> Path:
    env = os.environ.get("KAS_BIN_DIR")
    return Path(env) if env else cache_root() / "bin"


@dataclass(frozen=True, slots=True)
class Binaries:
    bin_dir: Path
    kwok_stages: Path

    def path(self, name: str) -> Path:
        return self.bin_dir / name


def find_binaries(bin_dir: Path | None = None, needed: tuple[str, ...] = CONTROL_PLANE) -> Binaries:
    folder = bin_dir or default_bin_dir()
    for name in needed:
        p = folder / name
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ClusterError(
                f"binary {name!r} not found in {folder} (run hack/install-binaries.sh, "
                "or set KAS_BIN_DIR to the folder that has it)"
            )
    stages = Path(os.environ.get("KAS_KWOK_STAGES", str(folder.parent / "kwok-stages")))
    if "kwok" in needed and not (stages / "pod" / "fast").is_dir():
        raise ClusterError(
            f"kwok stage definitions not found in {stages} (run hack/install-binaries.sh)"
        )
    return Binaries(folder, stages)
