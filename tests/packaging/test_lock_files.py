"""The lock files agree with pyproject.toml, offline: every requirement is pinned at a
version its specifier admits, every pin carries hashes, and the runtime lock holds nothing
the runtime does not need. (hack/lock.sh --check re-resolves against the index and
compares the text; this test needs no network.)"""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.lock_files import ENVIRONMENTS, PYPROJECT, pinned, read_lock


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
    for tool in ("pip", "setuptools", "pytest", "hypothesis", "mypy", "uv", "wheel"):
        assert tool not in names, tool


def test_the_parser_reads_what_it_must() -> None:
    pins = read_lock("requirements.lock")
    assert len(pins) >= len(PYPROJECT["project"]["dependencies"])
    assert all(p.hashes for p in pins)
    uvloop = pinned(pins, "uvloop", ENVIRONMENTS[0])
    assert uvloop.marker is not None and "win32" in str(uvloop.marker)
    with pytest.raises(AssertionError, match="outside"):
        check("requirements.lock", ["aiohttp<1"])
