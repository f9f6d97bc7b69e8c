"""Small Go programs of the project's own (hack/dra-oracle, hack/dra-test-driver), built
on first use into the binaries cache and reused while their source is unchanged.

Each folder is a module of its own, pinned by its go.mod and go.sum; the binary's name
carries a digest of those and of its .go files, so an edit builds a new binary and an old
checkout still finds its own."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from kas_dev.cluster.binaries import cache_root
from kas_dev.cluster.errors import ClusterError


def source_digest(source: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted([source / "go.mod", source / "go.sum", *source.glob("*.go")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build_cached(source: Path, name: str) -> Path:
    """The binary of the Go module in `source`, built now if this source never was."""
    binary = cache_root() / "bin" / f"{name}-{source_digest(source)}"
    if binary.is_file():
        return binary
    build(source, binary, name)
    return binary


def build(source: Path, out: Path, what: str) -> None:
    """`go build` of the module in `source` into `out`: static, stripped, and allowed to
    fill go.sum's gaps from the module proxy on a fresh machine."""
    go = shutil.which("go")
    if go is None:
        raise ClusterError(f"{what} needs the Go toolchain (hack/install-binaries.sh uses it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    proc = subprocess.run(
        [go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp), "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ClusterError(f"building {what} ({source}) failed:\n{proc.stderr[-3000:]}")
    # renamed into place whole, so a build killed half-way is never taken for a binary
    tmp.rename(out)
