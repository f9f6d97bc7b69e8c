"""scheduler.config.safe_yaml: what it accepts as upstream's decoder does, what it refuses
and where it says the problem is. (Outcomes marked "upstream" were checked against the
kube-scheduler v1.37.2 binary with --write-config-to.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.catalog import config_from_yaml, load_config
from scheduler.config import ConfigError
from scheduler.config.errors import brief, one_line
from scheduler.config.safe_yaml import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, parse_document

HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize(
    ("text", "parallelism"),
    [("16.0", 16), ("1e3", 1000), ("1.0e6", 1_000_000), ("2e9", 2_000_000_000), ("0x10", 16),
     ("0o10", 8), ("010", 8), ("+8", 8), ("8_0", 80), ("!!float 8", 8)],
)  # fmt: skip
def test_numbers_decode_as_upstream(text: str, parallelism: int) -> None:
    assert config_from_yaml(f"{HEAD}parallelism: {text}\n").parallelism == parallelism


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("16.5", "must be an integer"), ("3e9", "int32"), ('"8"', "must be an integer, got string"),
     (".inf", "must be an integer"), ("1:20", "got string")],
)  # fmt: skip
def test_numbers_refused_as_upstream(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_yaml(f"{HEAD}parallelism: {text}\n")
    assert info.value.field == "parallelism"
    assert fragment in info.value.detail


def test_anchors_aliases_and_merge_keys_work_within_bounds() -> None:
    doc = parse_document(
        "a: &a {x: 1, y: [1, 2]}\nb: *a\nc:\n  <<: *a\n  x: 2\n"
    )  # fmt: skip
    assert doc == {"a": {"x": 1, "y": [1, 2]}, "b": {"x": 1, "y": [1, 2]},
                   "c": {"x": 2, "y": [1, 2]}}  # fmt: skip
    cfg = config_from_yaml(
        "<<: {apiVersion: kubescheduler.config.k8s.io/v1, kind: KubeSchedulerConfiguration}\n"
        "leaderElection: &le {leaderElect: false}\n"
    )
    assert cfg.leader_election.leader_elect is False


def test_the_alias_bound_counts_expanded_values() -> None:
    width = 10
    levels = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, 5):  # 10^5 values once expanded, from a few hundred bytes
        levels.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    text = "\n".join(levels) + "\n"
    assert len(text) < 400
    with pytest.raises(ConfigError, match=f"more than {MAX_NODES} values"):
        parse_document(text)
    # one level less (about 11,000 values) is within the bound
    assert len(parse_document("\n".join(levels[:4]) + "\n")["a3"]) == width


def test_depth_bound() -> None:
    ok = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert parse_document(ok) is not None
    deep = "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    with pytest.raises(ConfigError, match=f"more than {MAX_DEPTH} levels"):
        parse_document(deep)


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("? [a]\n: 1\n", "", "field name must be a string, got a list at line 1"),
        ("x:\n  1: 2\n", "x", "field name must be a string, got integer 1 at line 2"),
        ("x: &a [*a]\n", "x[0]", "refers to itself"),
        ("x: *nope\n", "x", "is not defined"),
        ("a: 1\n---\nb: 2\n", "", "a second YAML document at line 2"),
        ("x: !!python/object:os.system 1\n", "x", "unsupported YAML tag"),
        ("x: !!bool maybe\n", "x", "not a valid bool"),
        ("a: 1\na: 2\n", "a", "duplicate field at line 2"),
        ("x:\n  y: [1\n", "", "invalid YAML at line"),
        ("<<: 5\n", "", "merge key (<<) at line 1"),
    ],
)  # fmt: skip
def test_refusals_say_where(text: str, field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_document(text)
    assert info.value.field == field
    assert fragment in info.value.detail


def test_files_are_bounded_and_utf8(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(ConfigError, match="larger than"):
        load_config(big)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(HEAD.encode() + b"profiles:\n- schedulerName: caf\xe9\n")
    with pytest.raises(ConfigError, match="not valid UTF-8: byte 0xe9 at line 4"):
        load_config(latin)
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbf" + HEAD.encode())
    assert load_config(bom).parallelism == 16
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path)  # a directory


def test_messages_are_one_bounded_line() -> None:
    e = ConfigError("a\nb" + "k" * 1000, "line one\nline two\u2028" + "v" * 10_000)
    text = str(e)
    assert len(text.splitlines()) == 1 and text.isprintable()
    assert len(text) < 650
    assert brief(10**5000) == "<an integer of 16610 bits>"
    assert brief(["x"] * 10**6) == "(1000000 entries)"
    assert one_line("tab\there", 100) == "tab\\there"
