"""Every third-party package the code imports is declared in pyproject.toml, directly.

A package that is only present because something else depends on it (aiohttp and yarl
arrived with kubernetes_asyncio) has no floor of ours: the resolver may pick any version,
including one with a published advisory, and a dependency dropping it breaks us. So
each tree's imports are read from its source (the AST: imports inside functions and
`try` blocks count), their top-level names mapped to distributions through the installed
metadata (importlib.metadata.packages_distributions), and each distribution must be
named by the dependency set that tree ships with:

- scheduler/ (the wheel, the image): [project] dependencies only;
- kas_dev/ (the local control plane, run from a checkout): those plus the `local` extra;
- tests/: those plus the `dev` extra (what hack/setup-venv.sh installs);
- bench/: those plus the `bench` extra (it drives kas_dev and the tests' helpers).
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.source_imports import absolute_imports

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"scheduler", "kas_dev", "tests", "bench"}

# tree -> the pyproject extras it may use beyond [project] dependencies
TREES: dict[str, tuple[str, ...]] = {
    "scheduler": (),
    "kas_dev": ("local",),
    "tests": ("dev",),
    "bench": ("bench", "local", "dev"),
}


def normalize(name: str) -> str:
    """PEP 503: case, runs of '-', '_' and '.' do not distinguish distributions."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    assert m, f"unreadable requirement {req!r} in pyproject.toml"
    return normalize(m.group(1))


def declared(extras: tuple[str, ...]) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return {requirement_name(r) for r in reqs}


def local_module_names(tree: Path) -> set[str]:
    """Modules a file of the tree may import by bare name (pytest puts a test folder with
    no __init__.py on sys.path, so its modules import each other that way)."""
    names = set()
    for path in tree.rglob("*.py"):
        names.add(path.stem)
        names.update(p.name for p in path.relative_to(tree).parents if p.name)
    return names


def top_level_imports(tree: Path) -> dict[str, str]:
    """Absolute imports' top-level names -> the first file:line importing it."""
    found: dict[str, str] = {}
    for path in sorted(tree.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        for name, line in absolute_imports(path):
            top = name.partition(".")[0]
            found.setdefault(top, f"{path.relative_to(ROOT)}:{line}")
    return found


@cache
def distributions() -> Mapping[str, list[str]]:
    return packages_distributions()


def third_party(tree: str) -> dict[str, str]:
    local = local_module_names(ROOT / tree)
    return {
        name: where
        for name, where in top_level_imports(ROOT / tree).items()
        if name not in sys.stdlib_module_names
        and name not in FIRST_PARTY
        and name not in local
        and name != "__future__"
    }


@pytest.mark.parametrize("tree", sorted(TREES))
def test_every_imported_package_is_declared(tree: str) -> None:
    allowed = declared(TREES[tree])
    missing = []
    for name, where in sorted(third_party(tree).items()):
        dists = distributions().get(name)
        if not dists:
            missing.append(f"{name} ({where}): no installed distribution provides it")
        elif not {normalize(d) for d in dists} & allowed:
            missing.append(f"{name} ({where}) from {', '.join(dists)}")
    extras = " + ".join(("dependencies", *TREES[tree]))
    assert not missing, f"{tree}/ imports packages not declared in {extras}:\n" + "\n".join(missing)


def test_the_scan_sees_what_it_must() -> None:
    """The scan itself: imports inside functions and try blocks are found, and a package
    only present as someone else's dependency is told apart from a declared one."""
    found = third_party("scheduler")
    # uvloop is imported inside a try block, aiohttp inside modules of the server
    assert {"aiohttp", "yarl", "uvloop", "orjson", "yaml", "numpy"} <= set(found)
    assert "asyncio" not in found and "scheduler" not in found
    assert "pyyaml" in declared(()) and "pytest" not in declared(())
    assert "pytest" in declared(("dev",))
    # aiosignal is installed (aiohttp's dependency) but declared by nobody
    assert "aiosignal" in {normalize(d) for d in distributions()["aiosignal"]}
    assert "aiosignal" not in declared(("dev", "bench", "local"))
