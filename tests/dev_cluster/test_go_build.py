"""kas_dev.cluster.go_build: a Go program of the project's is built once per source and
found again by the digest of its files; an edit makes a new binary, a failed build
names what failed and leaves nothing behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kas_dev.cluster import go_build
from kas_dev.cluster.errors import ClusterError

PROGRAM = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("%s") }\n'


def _module(folder: Path, says: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "go.mod").write_text("module kas.local/probe\n\ngo 1.21\n")
    (folder / "go.sum").write_text("")
    (folder / "main.go").write_text(PROGRAM % says)
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain")
    monkeypatch.setenv("KAS_BIN_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_built_once_per_source_and_again_after_an_edit(cache: Path, tmp_path: Path) -> None:
    source = _module(tmp_path / "src", "one")
    first = go_build.build_cached(source, "probe")
    assert first.parent == cache / "bin" and first.name.startswith("probe-")
    stamp = first.stat().st_mtime_ns
    assert go_build.build_cached(source, "probe") == first
    assert first.stat().st_mtime_ns == stamp  # reused, not rebuilt
    (source / "main.go").write_text(PROGRAM % "two")
    second = go_build.build_cached(source, "probe")
    assert second != first and second.is_file() and first.is_file()


def test_a_failed_build_is_an_error_and_leaves_no_binary(cache: Path, tmp_path: Path) -> None:
    source = _module(tmp_path / "src", "x")
    (source / "main.go").write_text("package main\n\nfunc main() { undefined() }\n")
    with pytest.raises(ClusterError, match="undefined"):
        go_build.build_cached(source, "broken")
    assert not list((cache / "bin").glob("broken-*"))
