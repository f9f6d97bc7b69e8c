"""What a real node changes on the machine outside its cluster directory, and undoing it.

A kubelet and a containerd are not as tidy as the control plane: the kubelet rewrites six
kernel sysctls at start, creates cgroups (one tree per hierarchy under its cgroup root),
mounts tmpfs volumes and creates /var/log/containers; containerd's shims keep their
sockets under /run/containerd/s; container root filesystems are overlay mounts. `cluster
down` must leave the machine as `up` found it, so before the first node starts the values
and paths it may touch are recorded in the cluster directory, and teardown puts them back.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

# the sysctls kubelet's container manager sets when protectKernelDefaults is false
# (pkg/kubelet/cm/container_manager_linux.go, setupKernelTunables)
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
# directories outside the cluster directory that a kubelet or containerd create when
# missing (the kubelet's container-log symlink folder is fixed; containerd's shims put
# their sockets under its default state folder whatever `state` says; the CRI makes a
# pod's network namespace under /run/netns, even when the pod then fails for lack of an
# address)
OUTSIDE_DIRS = ("/var/log/containers", "/run/containerd/s", "/run/containerd", "/run/netns")
NETNS_DIR = Path("/run/netns")
CGROUP_FS = Path("/sys/fs/cgroup")
FOOTPRINT_FILE = "host-footprint.json"


@dataclass
class Footprint:
    sysctls: dict[str, str] = field(default_factory=dict)
    missing_dirs: list[str] = field(default_factory=list)
    cgroup_roots: list[str] = field(default_factory=list)
    netns_before: list[str] = field(default_factory=list)


def record(cluster_dir: Path, cgroup_roots: list[str]) -> Footprint:
    """Write down the machine's state before any node starts (kept if already recorded,
    so a second `up` after a crash restores the values of before the first)."""
    path = cluster_dir / FOOTPRINT_FILE
    if path.is_file():
        fp = load(cluster_dir)
        fp.cgroup_roots = sorted(set(fp.cgroup_roots) | set(cgroup_roots))
    else:
        values = {k: _read_sysctl(k) for k in KUBELET_SYSCTLS}
        fp = Footprint(
            sysctls={k: v for k, v in values.items() if v is not None},
            missing_dirs=[d for d in OUTSIDE_DIRS if not os.path.exists(d)],
            cgroup_roots=list(cgroup_roots),
            netns_before=sorted(p.name for p in NETNS_DIR.iterdir()) if NETNS_DIR.is_dir() else [],
        )
    path.write_text(json.dumps(asdict(fp), indent=2))
    return fp


def load(cluster_dir: Path) -> Footprint:
    path = cluster_dir / FOOTPRINT_FILE
    if not path.is_file():
        return Footprint()
    return Footprint(**json.loads(path.read_text()))


def _read_sysctl(key: str) -> str | None:
    try:
        return Path("/proc/sys", key).read_text().strip()
    except OSError:
        return None


def cgroup_dirs(root: str) -> list[Path]:
    """Every cgroup directory named `root` in the v1 hierarchies (and v2 if unified)."""
    out: list[Path] = []
    rel = root.strip("/")
    if not CGROUP_FS.is_dir():
        return out
    for hierarchy in sorted(CGROUP_FS.iterdir()):
        d = hierarchy / rel
        if d.is_dir():
            out.append(d)
    return out


def create_cgroup_root(root: str) -> None:
    """The kubelet refuses a cgroup root that does not exist; make it in every v1
    hierarchy. A new cpuset cgroup starts with no CPUs and no memory nodes, so those are
    copied from the parent (otherwise nothing could ever run in it)."""
    rel = root.strip("/")
    for hierarchy in sorted(CGROUP_FS.iterdir()):
        if not hierarchy.is_dir() or not (hierarchy / "cgroup.procs").exists():
            continue
        d = hierarchy / rel
        with contextlib.suppress(FileExistsError):
            d.mkdir()
        if hierarchy.name == "cpuset" or "cpuset" in hierarchy.name.split(","):
            for f in ("cpuset.cpus", "cpuset.mems"):
                if (d / f).exists() and not (d / f).read_text().strip():
                    (d / f).write_text((hierarchy / f).read_text())


def kill_cgroup_processes(root: str, timeout: float = 10.0) -> int:
    """SIGKILL every process still in a cgroup under `root` (pods left behind by a kubelet
    that was stopped). Returns how many were signalled."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = set()
        for top in cgroup_dirs(root):
            for procs in top.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids |= {int(p) for p in procs.read_text().split()}
        pids.discard(os.getpid())
        if not pids or time.monotonic() > deadline:
            return len(killed)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.1)


def remove_cgroups(root: str) -> list[str]:
    """rmdir the cgroup tree under `root` in every hierarchy, deepest first. Returns what
    could not be removed (still busy)."""
    left = []
    for top in cgroup_dirs(root):
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in [*dirs, top]:
            for _ in range(20):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                left.append(str(d))
    return left


def mounts_under(folder: Path) -> list[str]:
    """Mount points at or below `folder`, deepest first (from /proc/self/mountinfo)."""
    base = str(folder.resolve())
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split()
        if len(parts) < 5:
            continue
        mp = parts[4].encode().decode("unicode_escape")
        if mp == base or mp.startswith(base + "/"):
            found.append(mp)
    return sorted(set(found), key=lambda m: -m.count("/"))


def unmount_under(folder: Path) -> list[str]:
    """Unmount everything below `folder`; a busy mount is detached lazily. Returns what is
    still mounted afterwards."""
    for _ in range(3):
        mps = mounts_under(folder)
        if not mps:
            return []
        for mp in mps:
            if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", mp], capture_output=True)
    return mounts_under(folder)


def restore(cluster_dir: Path, own_markers: tuple[str, ...]) -> list[str]:
    """Put back the sysctls, remove the outside dirs that did not exist before (only if
    they hold nothing but what this cluster made) and the container-log symlinks pointing
    into the cluster directory. Returns problems (nothing is raised: teardown goes on)."""
    fp = load(cluster_dir)
    problems = []
    for key, value in fp.sysctls.items():
        if _read_sysctl(key) != value:
            try:
                Path("/proc/sys", key).write_text(value)
            except OSError as exc:
                problems.append(f"cannot restore sysctl {key}={value}: {exc}")
    logs = Path("/var/log/containers")
    if logs.is_dir():
        for link in logs.iterdir():
            if link.is_symlink() and any(m in os.readlink(link) for m in own_markers):
                link.unlink(missing_ok=True)
    # network namespaces the CRI made for pods that could not start (a bind mount each)
    if NETNS_DIR.is_dir():
        for ns in NETNS_DIR.iterdir():
            if ns.name.startswith("cni-") and ns.name not in fp.netns_before:
                subprocess.run(["umount", str(ns)], capture_output=True)
                with contextlib.suppress(OSError):
                    ns.unlink()
    # sockets of shims that were killed (they remove their own only on a clean exit, and
    # containerd 1.6 leaks some even then); only in the folder this cluster created, and
    # only sockets nobody listens on. A shim may still be exiting: retry for a while.
    ours = [d for d in OUTSIDE_DIRS if d in fp.missing_dirs]
    deadline = time.monotonic() + 10.0
    while True:
        if "/run/containerd/s" in ours and os.path.isdir("/run/containerd/s"):
            for sock in Path("/run/containerd/s").iterdir():
                if sock.is_socket() and not _listening(sock):
                    sock.unlink(missing_ok=True)
        left = []
        for d in ours:  # children first (/run/containerd/s before /run/containerd)
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(d)
        if not left:
            break
        if time.monotonic() > deadline:
            problems += [
                f"{d} was made by this cluster but is not empty; left in place" for d in left
            ]
            break
        time.sleep(0.2)
    return problems


def _listening(path: Path) -> bool:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True
