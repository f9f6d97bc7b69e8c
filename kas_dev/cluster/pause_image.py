"""The pod sandbox ("pause") image of the real node, built here instead of pulled.

No registry is reachable on these machines, so the image every pod's sandbox runs is made
locally: a static Go program that does what upstream's pause does (sleep until SIGINT or
SIGTERM, reap children on SIGCHLD), in a one-layer OCI image archive that `ctr images
import` takes. Both are cached by Go version next to the other binaries, so only the first
real-node cluster on a machine compiles it (a second or two).
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from kas_dev.cluster.binaries import cache_root
from kas_dev.cluster.errors import ClusterError
from kas_dev.cluster.go_build import build

# the name containerd's CRI is told to use for sandboxes; "kas.local" says it was built here
PAUSE_IMAGE = "kas.local/pause:1"

_PAUSE_GO = """\
package main

// The pod sandbox's only process: it holds the pod's namespaces open, reaps orphans
// (it is PID 1 when the pod shares its PID namespace) and exits on INT or TERM.

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
"""

_GO_MOD = "module kas.local/pause\n\ngo 1.21\n"


def _go_version() -> str:
    try:
        out = subprocess.run(
            ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ClusterError(
            f"the pause image needs the Go toolchain ('go env' failed: {exc})"
        ) from exc
    return out or "unknown"


def pause_binary() -> Path:
    """Build (once per Go version) and return the static pause binary."""
    version = _go_version()
    out = cache_root() / "bin" / f"pause-{version}"
    if out.is_file():
        return out
    src = cache_root() / "src" / "pause"
    src.mkdir(parents=True, exist_ok=True)
    (src / "main.go").write_text(_PAUSE_GO)
    (src / "go.mod").write_text(_GO_MOD)
    build(src, out, "the pause binary")
    return out


def _blob(layout: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _add(layout, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}"


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def oci_archive(binary: Path, name: str = PAUSE_IMAGE) -> bytes:
    """A one-layer OCI image layout (as a tar) holding `binary` as /pause."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        _add(layer, "pause", binary.read_bytes(), mode=0o755)
    layer_bytes = layer_buf.getvalue()
    layer_digest = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        config_bytes = json.dumps(config, sort_keys=True).encode()
        config_digest = _blob(tar, config_bytes)
        _blob(tar, layer_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(config_bytes),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest,
                    "size": len(layer_bytes),
                }
            ],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_digest = _blob(tar, manifest_bytes)
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": manifest_digest,
                    "size": len(manifest_bytes),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    # ctr import names the image after this annotation
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        _add(tar, "index.json", json.dumps(index).encode())
    return out.getvalue()


def pause_archive() -> Path:
    """The pause image archive, built once per Go version and cached."""
    binary = pause_binary()
    path = binary.with_name(binary.name + ".oci.tar")
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(oci_archive(binary))
        tmp.rename(path)
    return path
