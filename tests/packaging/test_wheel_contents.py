"""The wheel built from pyproject.toml is the scheduler package and nothing else: no local
control plane, no demo, no test code (the image installs this wheel, see the Dockerfile).
An installed wheel answers the checkout-only commands (cluster, demo) with one line and
exit 2; a checkout runs them even where only `scheduler` is on the path (the editable
install maps nothing else).

The build runs on a copy of the tree (the files git tracks or would track), so no build/
or *.egg-info is left in the checkout, with the venv's own setuptools and no index: it
needs no network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.source_imports import absolute_imports

ROOT = Path(__file__).resolve().parents[2]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def _tree_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files: what a clean clone plus the work in
    progress would hold (never .venv, .cluster*, build/ or caches)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("the wheel is built from the files git lists: run from a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    # --cached still lists a file deleted but not yet committed
    return [f for f in listed.split("\0") if f and (ROOT / f).is_file()]


def _run(
    argv: list[str], *, cwd: Path, pythonpath: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    for name in _tree_files():
        dest = src / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest)
    dist = work / "dist"
    built = _run(
        [
            *PIP,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(dist),
            str(src),
        ],
        cwd=work,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = dist.glob("kube_async_scheduler-*.whl")
    return found


def test_the_wheel_is_the_scheduler_package_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"scheduler", next(t for t in top if t.endswith(".dist-info"))}, top
    for leaked in (
        "kas_dev/",
        "tests/",
        "bench/",
        "hack/",
        "/cluster/",
        "demo",
        "testing.py",
        "conftest",
    ):
        assert not [n for n in names if leaked in n], f"{leaked} is in the wheel"
    # and nothing of the scheduler is lost on the way
    in_tree = {f for f in _tree_files() if f.startswith("scheduler/") and f.endswith(".py")}
    assert in_tree == {n for n in names if n.endswith(".py")}
    for kept in ("scheduler/cli.py", "scheduler/__main__.py", "scheduler/py.typed"):
        assert kept in names, kept


def test_installed_wheel_refuses_the_checkout_commands(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    installed = _run(
        [*PIP, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        cwd=tmp_path,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    for argv in (["cluster", "status", "--dir", str(tmp_path / "c")], ["demo", "--nodes", "1"]):
        ran = _run([sys.executable, "-m", "scheduler", *argv], cwd=tmp_path, pythonpath=site)
        assert ran.returncode == 2, ran.stdout + ran.stderr
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1, ran.stderr
        assert "need a checkout of the repository" in lines[0]


def test_checkout_runs_the_cluster_command_with_only_scheduler_on_the_path(tmp_path: Path) -> None:
    # what .venv/bin/kube-async-scheduler sees after `pip install -e .`: the scheduler
    # package importable, the repository root not on sys.path
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "scheduler").symlink_to(ROOT / "scheduler", target_is_directory=True)
    ran = _run(
        [sys.executable, "-m", "scheduler", "cluster", "status", "--dir", str(tmp_path / "none")],
        cwd=tmp_path,
        pythonpath=tmp_path / "path",
    )
    assert ran.returncode == 3, ran.stdout + ran.stderr  # 3: no cluster there, as from the root
    assert ran.stdout.strip() == f"no cluster in {tmp_path / 'none'}", ran.stdout


def test_the_scheduler_package_imports_no_development_code() -> None:
    # the wheel holds scheduler/ alone, so one import of kas_dev (or tests, bench) would
    # break an installed scheduler; the CLI reaches kas_dev by name, at run time only
    offenders = []
    for path in sorted((ROOT / "scheduler").rglob("*.py")):
        for module, line in absolute_imports(path):
            if module.split(".")[0] in ("kas_dev", "tests", "bench"):
                offenders.append(f"{path.relative_to(ROOT)}:{line} {module}")
    assert offenders == []
