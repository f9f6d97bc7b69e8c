"""The lock files agree with pyproject.toml, offline: every requirement is pinned at a
version its specifier admits, every pin carries hashes, and the runtime lock holds nothing
the runtime does not need. (hack/lock.sh --check re-resolves against the index and
compares the text; this test needs no network.)"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
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


def check(lock: str, requirements: list[str]) -> None:
    pins = read_lock(lock)
    for env in ENVIRONMENTS:
        for raw in requirements:
            req = Requirement(raw)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            pin = pinned(pins, canonicalize_name(req.name), env)
            assert req.specifier.contains(pin.version, prereleases=True), (
                f"{lock}: {pin.name}=={pin.version} is outside {raw!r}: run bash hack/lock.sh"
            )


def test_runtime_lock_pins_every_dependency() -> None:
    check("requirements.lock", PYPROJECT["project"]["dependencies"])


def test_dev_lock_pins_every_dependency_and_the_dev_extra() -> None:
    project = PYPROJECT["project"]
    check(
        "requirements-dev.lock", project["dependencies"] + project["optional-dependencies"]["dev"]
    )


def test_build_lock_pins_the_image_builders_tools() -> None:
    check("requirements-build.lock", PYPROJECT["dependency-groups"]["image-build"])


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-dev.lock"])
def test_runtime_pins_agree_across_locks(lock: str) -> None:
    """A package of the runtime set has the same version in the dev lock: the tests run
    against what the image ships."""
    runtime = {(p.name, str(p.marker)): p.version for p in read_lock("requirements.lock")}
    for pin in read_lock(lock):
        key = (pin.name, str(pin.marker))
        if key in runtime:
            assert pin.version == runtime[key], f"{lock}: {pin.name}"


def test_runtime_lock_holds_no_development_tool() -> None:
    names = {p.name for p in read_lock("requirements.lock")}
    for tool in ("pip", "setuptools", "pytest", "cryptography", "hypothesis", "uv", "wheel"):
        assert tool not in names, tool


def test_the_parser_reads_what_it_must() -> None:
    pins = read_lock("requirements.lock")
    assert len(pins) >= len(PYPROJECT["project"]["dependencies"])
    assert all(p.hashes for p in pins)
    uvloop = pinned(pins, "uvloop", ENVIRONMENTS[0])
    assert uvloop.marker is not None and "win32" in str(uvloop.marker)
    with pytest.raises(AssertionError, match="outside"):
        check("requirements.lock", ["aiohttp<1"])
