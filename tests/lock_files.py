"""The lock files made by hack/lock.sh, read: each pin with its version, marker and
hashes (tests/packaging/test_lock_files.py, tests/e2e/test_image_contents.py)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# the environments the locks serve: the image (CPython 3.11 on Linux) and newer Pythons
ENVIRONMENTS = [
    {"python_version": v, "python_full_version": f"{v}.0", "sys_platform": "linux"}
    for v in ("3.11", "3.12", "3.13")
]


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: tuple[str, ...]


def read_lock(name: str) -> list[Pin]:
    text = (ROOT / name).read_text()
    pins = []
    # one entry: `name==version [; marker] \` then `--hash=sha256:...` lines
    for m in re.finditer(
        r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?: ; (.+?))?((?: \\\n\s+--hash=sha256:[0-9a-f]{64})+)",
        text,
        re.MULTILINE,
    ):
        pins.append(
            Pin(
                name=canonicalize_name(m.group(1)),
                version=Version(m.group(2)),
                marker=Marker(m.group(3)) if m.group(3) else None,
                hashes=tuple(re.findall(r"sha256:([0-9a-f]{64})", m.group(4))),
            )
        )
    entries = [ln for ln in text.splitlines() if re.match(r"^[A-Za-z0-9].*==", ln)]
    assert len(pins) == len(entries), f"{name}: an entry without hashes or unreadable"
    return pins


def pinned(pins: list[Pin], name: str, env: dict[str, str]) -> Pin:
    found = [p for p in pins if p.name == name and (p.marker is None or p.marker.evaluate(env))]
    assert len(found) == 1, f"{name}: {len(found)} pins for {env['python_version']}"
    return found[0]
