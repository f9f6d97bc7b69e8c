"""The image hack/build-image.sh builds, read from its archive's layers: the scheduler's
runtime and nothing to get a foothold with (no shell, no pip, no package manager), its
SBOM in the image and next to the archive, agreeing with the lock, and the scheduler
runs from it.

Needs root and buildah/debootstrap (the build), as the rest of tests/e2e; the build is
cached by source content, so after the e2e cluster fixture built it this costs seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name

from tests.e2e.prerequisites import missing_for_image, require
from tests.lock_files import ENVIRONMENTS, PYPROJECT, pinned, read_lock

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
SBOM = "usr/share/doc/kube-async-scheduler/sbom.cdx.json"
SHELLS = {"sh", "bash", "dash", "ash", "busybox", "zsh", "ksh"}
CHROOT = shutil.which("chroot") or ""
PACKAGE_TOOLS = {"apt", "apt-get", "apt-cache", "dpkg", "dpkg-query", "apk", "yum", "dnf", "rpm"}


@dataclass
class Image:
    archive: Path
    config: dict[str, Any]
    files: dict[str, tarfile.TarInfo]  # path (no leading /) -> entry, whiteouts applied
    layers: list[Path]
    rootfs: Path


def _apply_layer(files: dict[str, tarfile.TarInfo], layer: tarfile.TarFile) -> None:
    for member in layer.getmembers():
        path = member.name.removeprefix("./").rstrip("/")
        base = os.path.basename(path)
        parent = os.path.dirname(path)
        if base == ".wh..wh..opq":  # an opaque folder: the lower layers' content is gone
            for p in [p for p in files if p.startswith(parent + "/")]:
                del files[p]
        elif base.startswith(".wh."):
            gone = os.path.join(parent, base[4:])
            for p in [p for p in files if p == gone or p.startswith(gone + "/")]:
                del files[p]
        elif path:
            files[path] = member


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    require(missing_for_image())
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-image.sh")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, f"hack/build-image.sh failed:\n{proc.stderr[-3000:]}"
    archive = Path(proc.stdout.strip().splitlines()[-1])
    out = tmp_path_factory.mktemp("image")
    with tarfile.open(archive) as tar:
        tar.extractall(out / "archive", filter="tar")
    (manifest,) = json.loads((out / "archive" / "manifest.json").read_text())
    config = json.loads((out / "archive" / manifest["Config"]).read_text())
    layers = [out / "archive" / name for name in manifest["Layers"]]
    files: dict[str, tarfile.TarInfo] = {}
    rootfs = out / "rootfs"
    rootfs.mkdir()
    for layer in layers:
        with tarfile.open(layer) as tar:
            _apply_layer(files, tar)
        with tarfile.open(layer) as tar:
            tar.extractall(rootfs, filter="fully_trusted")
    yield Image(archive, config, files, layers, rootfs)


def test_no_shell_no_pip_no_package_manager(image: Image) -> None:
    names = {os.path.basename(p): p for p in image.files}
    assert {"libc.so.6", "kube-async-scheduler"} <= names.keys()  # the scan sees the files
    assert not SHELLS & names.keys(), [names[n] for n in SHELLS & names.keys()]
    assert not PACKAGE_TOOLS & names.keys(), [names[n] for n in PACKAGE_TOOLS & names.keys()]
    assert not [p for p in image.files if p.startswith(("var/lib/dpkg", "var/lib/apt", "etc/apt"))]
    pip = [
        p
        for p in image.files
        if os.path.basename(p) in ("pip", "pip3", "pip3.11", "easy_install")
        or "/site-packages/pip/" in p + "/"
        or "/site-packages/setuptools/" in p + "/"
        or "/ensurepip/" in p + "/"
    ]
    assert pip == []
    # what the build was given to reach the index is not in the image
    assert "etc/pip.conf" not in image.files
    assert not [p for p in image.files if p.startswith("run/kas-build")]
    # and it is all there is: one layer, the assembled root filesystem
    assert len(image.layers) == 1


def test_the_runtime_is_there_and_runs_as_the_charts_user(image: Image) -> None:
    # the environment below is the image's; chroot itself is found on this machine's PATH
    assert CHROOT, "chroot not found"
    cfg = image.config["config"]
    assert cfg["User"] == "65532:65532"
    assert cfg["Entrypoint"] == ["kube-async-scheduler"]
    assert "PATH=/opt/venv/bin" in cfg["Env"]
    assert "opt/venv/bin/kube-async-scheduler" in image.files
    passwd = (image.rootfs / "etc" / "passwd").read_text()
    assert ":65532:65532:" in passwd
    # the entry point starts in the image's own root: interpreter, standard library and
    # shared libraries all resolved inside it (a missing one fails the import)
    proc = subprocess.run(
        [
            CHROOT,
            "--userspec=65532:65532",
            str(image.rootfs),
            "/opt/venv/bin/python",
            "-c",
            "import scheduler.app, scheduler.process, ssl, uvloop, numpy, orjson, aiohttp, httptools, cryptography;"
            "ssl.create_default_context(); print(numpy.arange(3).sum())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/opt/venv/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3"
    proc = subprocess.run(
        [CHROOT, str(image.rootfs), "/opt/venv/bin/kube-async-scheduler", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/opt/venv/bin"},
    )
    assert proc.returncode == 0 and "--config" in proc.stdout, proc.stderr


def test_the_sbom_is_in_the_image_and_next_to_the_archive_and_matches_the_lock(
    image: Image,
) -> None:
    inside = (image.rootfs / SBOM).read_bytes()
    beside = image.archive.with_name(
        image.archive.name.removesuffix(".docker.tar") + ".sbom.cdx.json"
    )
    assert beside.read_bytes() == inside
    bom = json.loads(inside)
    assert bom["bomFormat"] == "CycloneDX"
    components = {canonicalize_name(c["name"]): c["version"] for c in bom["components"]}
    lock = read_lock("requirements.lock")
    env = ENVIRONMENTS[0]  # the image's Python 3.11 on Linux
    names = {p.name for p in lock if p.marker is None or p.marker.evaluate(env)}
    expected = {name: str(pinned(lock, name, env).version) for name in names}
    # and the scheduler itself
    expected[canonicalize_name(PYPROJECT["project"]["name"])] = PYPROJECT["project"]["version"]
    assert components == expected
