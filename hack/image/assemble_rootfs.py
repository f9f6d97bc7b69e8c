"""Assemble the final image's root filesystem: a Python runtime with nothing else.

Run in the Dockerfile's builder stage (standard library only, any Python 3.11+):

    python hack/image/assemble_rootfs.py --venv /opt/venv --out /rootfs [--add PATH ...]

What goes into OUT, at the same paths as in the builder:
- the venv (the scheduler and its locked dependencies; pip and setuptools already removed);
- the interpreter the venv points at (pyvenv.cfg's `home`), every symlink on the way;
- its standard library, without what a service never imports (tests, IDLE, tkinter,
  ensurepip, the system's site-packages) and without the `pip` a Debian layout keeps;
- every shared library any of those ELF files loads, found by asking the dynamic loader
  itself (`ld.so --list`, what ldd does) so the answer is the loader's and not a guess,
  plus the loader's cache so libraries outside its default folders are found;
- /etc/passwd, /etc/group (root and the non-root user 65532), /etc/nsswitch.conf, /etc/hosts, the
  CA bundle when the builder has one, an empty world-writable /tmp; and each --add PATH.

Nothing else: no shell, no coreutils, no package manager or its database, no pip. It
works the same on python:3.11-slim (interpreter under /usr/local, a shared libpython) and
on a Debian base (/usr/bin/python3.11, libraries under /usr/lib/<triplet>), so both
hack/build-image.sh (buildah, a debootstrap'd base) and `docker build` make the same image.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

UID = GID = 65532
# standard-library folders a service never imports
STDLIB_SKIP = frozenset(
    {
        "test",
        "idlelib",
        "tkinter",
        "turtledemo",
        "ensurepip",
        "lib2to3",
        "site-packages",
        "dist-packages",
    }
)
# extension modules of the standard library for a terminal or a GUI: they pull in
# readline, ncurses, Tcl/Tk and X11
STDLIB_SKIP_EXTENSIONS = frozenset({"_tkinter", "_curses", "_curses_panel", "readline"})
VENV_SKIP = frozenset({"activate", "activate.csh", "activate.fish", "Activate.ps1"})
LDD_LINE = re.compile(r"^\s*(?:\S+\s+=>\s+)?(/\S+)\s+\(0x[0-9a-f]+\)\s*$")


class Rootfs:
    """A folder mirroring chosen paths of this machine, symlinks kept as symlinks."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.files: set[str] = set()

    def _target(self, path: str) -> Path:
        return self.out / path.lstrip("/")

    def add(self, path: str) -> str:
        """Copy PATH (a file or an empty folder); every symlink met on the way, in a
        parent or at the end, is recreated and followed. Returns the real path."""
        parts = Path(path).parts[1:]
        cur = Path("/")
        for i, part in enumerate(parts):
            nxt = cur / part
            if nxt.is_symlink():
                link = os.readlink(nxt)
                dest = self._target(str(nxt))
                if not dest.is_symlink():
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.symlink_to(link)
                resolved = os.path.normpath(os.path.join(cur, link))
                return self.add(os.path.join(resolved, *parts[i + 1 :]))
            cur = nxt
        dest = self._target(str(cur))
        if cur.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
        elif str(cur) not in self.files:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cur, dest)
            self.files.add(str(cur))
        return str(cur)

    def add_tree(self, root: str, skip: frozenset[str] = frozenset()) -> None:
        real_root = self.add(root)
        for dirpath, dirnames, filenames in os.walk(real_root):
            # config-3.11-<triplet>: the static library and Makefile to build extensions
            dirnames[:] = [d for d in dirnames if d not in skip and not d.startswith("config-")]
            for name in dirnames:
                if os.path.islink(os.path.join(dirpath, name)):
                    self.add(os.path.join(dirpath, name))
            for name in filenames:
                if name not in skip and name.partition(".")[0] not in STDLIB_SKIP_EXTENSIONS:
                    self.add(os.path.join(dirpath, name))

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        dest = self._target(path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
        dest.chmod(mode)


def elf_interpreter(path: str) -> str:
    """PT_INTERP of an ELF executable: the dynamic loader it names."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF":
            raise SystemExit(f"{path} is not an ELF file")
        is64, little = head[4] == 2, head[5] == 1
        end = "<" if little else ">"
        if is64:
            (phoff,) = struct.unpack(end + "Q", head[32:40])
            phentsize, phnum = struct.unpack(end + "HH", head[54:58])
        else:
            (phoff,) = struct.unpack(end + "I", head[28:32])
            phentsize, phnum = struct.unpack(end + "HH", head[42:46])
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            entry = f.read(phentsize)
            (p_type,) = struct.unpack(end + "I", entry[:4])
            if p_type == 3:  # PT_INTERP
                if is64:
                    (offset,) = struct.unpack(end + "Q", entry[8:16])
                    (size,) = struct.unpack(end + "Q", entry[32:40])
                else:
                    (offset,) = struct.unpack(end + "I", entry[4:8])
                    (size,) = struct.unpack(end + "I", entry[16:20])
                f.seek(offset)
                return f.read(size).rstrip(b"\0").decode()
    raise SystemExit(f"{path} names no dynamic loader (statically linked?)")


def is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def shared_libraries(loader: str, elf: str) -> list[str]:
    """What the loader maps for ELF, as absolute paths (ldd's answer)."""
    proc = subprocess.run([loader, "--list", elf], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if "not a dynamic executable" in proc.stderr + proc.stdout:
            return []
        raise SystemExit(f"{loader} --list {elf} failed: {proc.stderr.strip()}")
    libs = []
    for line in proc.stdout.splitlines():
        if "not found" in line:
            raise SystemExit(f"{elf}: a library is missing: {line.strip()}")
        m = LDD_LINE.match(line)
        if m:
            libs.append(m.group(1))
    return libs


def interpreter_of(venv: Path) -> str:
    cfg = dict(
        (k.strip(), v.strip())
        for k, _, v in (
            line.partition("=") for line in (venv / "pyvenv.cfg").read_text().splitlines()
        )
    )
    home = cfg["home"]
    version = sys.version_info
    for name in (f"python{version.major}.{version.minor}", f"python{version.major}", "python"):
        candidate = os.path.join(home, name)
        if os.path.exists(candidate):
            return candidate
    raise SystemExit(f"no python in {home} (pyvenv.cfg home)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--add", action="append", default=[], help="one more file to keep")
    args = ap.parse_args()
    if args.out.exists() and any(args.out.iterdir()):
        ap.error(f"--out {args.out} is not empty")
    fs = Rootfs(args.out)

    python = interpreter_of(args.venv)
    real_python = fs.add(python)
    fs.add_tree(str(args.venv), skip=VENV_SKIP)
    # the venv's own python symlinks point at the interpreter by its full path
    for link in (args.venv / "bin").iterdir():
        if link.is_symlink():
            fs.add(os.path.join(os.path.dirname(link), os.readlink(link)))
    stdlib = sysconfig.get_paths()["stdlib"]
    fs.add_tree(stdlib, skip=STDLIB_SKIP)

    loader = elf_interpreter(os.path.realpath(real_python))
    fs.add(loader)
    for elf in sorted(p for p in list(fs.files) if is_elf(p)):
        for lib in shared_libraries(loader, elf):
            fs.add(lib)
    for optional in ("/etc/ld.so.cache", "/etc/ssl/certs/ca-certificates.crt", *args.add):
        if os.path.exists(optional):
            fs.add(optional)

    fs.write(
        "/etc/passwd",
        f"root:x:0:0:root:/root:/nonexistent\n"
        f"scheduler:x:{UID}:{GID}:scheduler:/nonexistent:/nonexistent\n",
    )
    fs.write("/etc/group", f"root:x:0:\nscheduler:x:{GID}:\n")
    fs.write("/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n")
    # a container runtime mounts its own over it; this one serves a bare `run` of the image
    fs.write("/etc/hosts", "127.0.0.1 localhost\n::1 localhost\n")
    tmp = args.out / "tmp"
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o777 | stat.S_ISVTX)

    total = sum((args.out / f.lstrip("/")).stat().st_size for f in fs.files)
    print(
        f"rootfs {args.out}: {len(fs.files)} files, {total / 2**20:.1f} MiB; "
        f"interpreter {real_python}, loader {loader}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
