"""hack/image/assemble_rootfs.py, the builder's assembly of the final image's root
filesystem, on this machine's own files: symlinks are kept (a venv's python and a
merged-/usr layout are chains of them), the interpreter's shared libraries come along,
and the result runs Python."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "assemble_rootfs", ROOT / "hack" / "image" / "assemble_rootfs.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rootfs = load()


def test_symlinks_on_the_way_are_recreated_and_followed(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "usr" / "lib").mkdir(parents=True)
    (src / "usr" / "lib" / "libx.so.1.2").write_text("x")
    (src / "usr" / "lib" / "libx.so.1").symlink_to("libx.so.1.2")
    (src / "lib").symlink_to("usr/lib")  # merged /usr
    fs = rootfs.Rootfs(tmp_path / "out")
    real = fs.add(str(src / "lib" / "libx.so.1"))
    assert real == str(src / "usr" / "lib" / "libx.so.1.2")
    out = tmp_path / "out" / str(src).lstrip("/")
    assert os.readlink(out / "lib") == "usr/lib"
    assert os.readlink(out / "usr" / "lib" / "libx.so.1") == "libx.so.1.2"
    assert (out / "usr" / "lib" / "libx.so.1.2").read_text() == "x"
    assert fs.files == {real}


def test_the_loader_names_the_interpreters_libraries() -> None:
    loader = rootfs.elf_interpreter(os.path.realpath(sys.executable))
    assert loader.startswith("/") and "ld" in os.path.basename(loader)
    libs = rootfs.shared_libraries(loader, os.path.realpath(sys.executable))
    assert any(os.path.basename(lib).startswith("libc.so") for lib in libs)
    with pytest.raises(SystemExit, match="not an ELF"):
        rootfs.elf_interpreter(__file__)


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_an_assembled_venv_runs_in_a_chroot(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    out = tmp_path / "rootfs"
    subprocess.run(
        [sys.executable, str(ROOT / "hack" / "image" / "assemble_rootfs.py"), "--venv",
         str(venv), "--out", str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert not (out / "bin" / "sh").exists() and not (out / "usr" / "bin" / "sh").exists()
    stdlib = out / sysconfig.get_paths()["stdlib"].lstrip("/")
    assert (stdlib / "json" / "__init__.py").is_file()
    assert not (stdlib / "test").exists() and not (stdlib / "ensurepip").exists()
    proc = subprocess.run(
        ["chroot", str(out), str(venv / "bin" / "python"), "-c",
         "import ssl, json, uuid, sqlite3; ssl.create_default_context(); print('ok')"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
