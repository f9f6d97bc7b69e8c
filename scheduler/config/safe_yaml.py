"""A configuration file's bytes into plain values (dict, list, scalars), with bounds.

PyYAML's own loaders are unsafe for input nobody vetted: composing and constructing are
recursive (a deeply nested document raises RecursionError or overflows the C stack), an
alias is one shared object that any later walk expands (a 671-byte "billion laughs"
document became a multi-gigabyte error message), mapping keys may be lists or dicts
(TypeError: unhashable), and later documents in the stream are dropped silently.

Here the parser's *event stream* is built into values with an explicit stack, so each of
those is refused before it costs anything, with the field path where it happened:

- at most ``MAX_FILE_BYTES`` (1 MiB, the most a ConfigMap can hold, which is how the file
  normally reaches the pod); read in one bounded call, so /dev/zero is refused too;
- UTF-8 only (a BOM is allowed), as Go's YAML decoder in kube-scheduler;
- nesting at most ``MAX_DEPTH`` containers deep (a real configuration is about 12);
- at most ``MAX_NODES`` (20,000) values with every alias counted at its expanded size
  (go-yaml, which kube-scheduler uses, likewise refuses "excessive aliasing"); a real
  configuration has a few hundred, and the bound keeps the worst file's parse near 50 ms;
  an alias to a container still being read (a recursive document) is refused;
- field names are strings (Go decodes into structs: no other key can name a field);
- duplicate fields are errors (upstream decodes strictly: "duplicate field");
- one document only: upstream reads the first and ignores the rest, which would drop a
  configuration silently, so a second document is an error;
- only the YAML core tags (str, int, float, bool, null, plus timestamp and binary, which
  then fail the field's type check); merge keys (``<<: *base``) work as in go-yaml.

Every failure is a ConfigError whose message is one line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from scheduler.config.errors import ConfigError, brief, type_name

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_NODES = 20_000

_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = _TAG + "merge"
_SCALAR_TAGS = frozenset(
    _TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp", "binary")
)
# plain scalars go-yaml (sigs.k8s.io/yaml, kube-scheduler's decoder) reads as numbers but
# PyYAML's YAML 1.1 resolver leaves as strings
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)")
_GO_OCTAL = re.compile(r"[-+]?0o[0-7_]+")
_GO_OCTAL_TAG = "go:octal"
_MAP_TAGS = frozenset({None, "!", _TAG + "map"})
_SEQ_TAGS = frozenset({None, "!", _TAG + "seq"})

try:  # libyaml's parser: about ten times faster, and iterative like the Python one
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader


def read_config_bytes(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes, refusing anything over MAX_FILE_BYTES without reading it all."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ConfigError("", f"cannot read config file {brief(os.fspath(path))}: {reason}") from e
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(
            "", f"config file is larger than {MAX_FILE_BYTES} bytes (1 MiB, a ConfigMap's limit)"
        )
    return data


def decode_text(data: bytes) -> str:
    """UTF-8 text; the error names the line of the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(
            "",
            f"not valid UTF-8: byte 0x{data[e.start]:02x} at line {line} (the file must be UTF-8)",
        ) from None


@dataclass(slots=True)
class _Open:
    """A container being read."""

    value: dict[str, Any] | list[Any]
    path: str
    anchor: str | None
    nodes_at_start: int
    key: str | None = None  # mappings: the field whose value comes next
    key_line: int = 0
    merges: list[dict[str, Any]] = field(default_factory=list)  # the "<<" objects
    merging: bool = False  # the pending key is "<<"


class _Builder:
    def __init__(self, text: str) -> None:
        self.loader = _Loader(text)
        self.stack: list[_Open] = []
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, expanded size)
        self.open_anchors: set[str] = set()
        self.nodes = 0
        self.documents = 0
        self.result: Any = None

    # ---- paths ------------------------------------------------------------------
    def here(self) -> str:
        """The path of the value being read (for errors)."""
        if not self.stack:
            return ""
        top = self.stack[-1]
        if isinstance(top.value, list):
            return _index(top.path, len(top.value))
        if top.key is not None:
            return _child(top.path, top.key)
        return top.path

    # ---- the loop ---------------------------------------------------------------
    def build(self) -> Any:
        try:
            while True:
                try:
                    event = self.loader.get_event()  # type: ignore[no-untyped-call]
                except yaml.MarkedYAMLError as e:
                    raise ConfigError("", _yaml_problem(e, self.here())) from None
                except yaml.YAMLError as e:  # ReaderError: a character YAML forbids
                    raise ConfigError("", _reader_problem(e, self.here())) from None
                if event is None or isinstance(event, yaml.StreamEndEvent):
                    return self.result
                self._event(event)
        finally:
            self.loader.dispose()

    def _event(self, ev: yaml.Event) -> None:
        if isinstance(ev, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise ConfigError(
                    "",
                    f"a second YAML document at line {_line(ev)}: the file must hold exactly"
                    " one KubeSchedulerConfiguration",
                )
        elif isinstance(ev, yaml.ScalarEvent):
            self._count(1, ev)
            value = self._scalar(ev)
            if ev.anchor is not None:
                self.anchors[ev.anchor] = (value, 1)
                self.open_anchors.discard(ev.anchor)  # redefined: aliases now mean this one
            self._add(value, ev, is_merge_key=self._is_merge_key(ev))
        elif isinstance(ev, yaml.AliasEvent):
            self._alias(ev)
        elif isinstance(ev, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            self._start(ev)
        elif isinstance(ev, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            self._end()

    def _count(self, n: int, ev: yaml.Event) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            raise ConfigError(
                self.here(),
                f"the document has more than {MAX_NODES} values with its aliases expanded"
                f" (at line {_line(ev)}); refusing it",
            )

    def _alias(self, ev: yaml.AliasEvent) -> None:
        anchor = ev.anchor or ""
        if anchor in self.open_anchors:
            raise ConfigError(
                self.here(), f"alias *{brief(anchor)} at line {_line(ev)} refers to itself"
            )
        if anchor not in self.anchors:
            raise ConfigError(
                self.here(), f"alias *{brief(anchor)} at line {_line(ev)} is not defined"
            )
        value, size = self.anchors[anchor]
        self._count(size, ev)
        self._add(value, ev, is_merge_key=False)

    def _start(self, ev: yaml.MappingStartEvent | yaml.SequenceStartEvent) -> None:
        is_map = isinstance(ev, yaml.MappingStartEvent)
        allowed = _MAP_TAGS if is_map else _SEQ_TAGS
        if ev.tag not in allowed:
            raise ConfigError(
                self.here(), f"unsupported YAML tag {brief(ev.tag)} at line {_line(ev)}"
            )
        top = self.stack[-1] if self.stack else None
        if top is not None and isinstance(top.value, dict) and top.key is None and not top.merging:
            kind = "an object" if is_map else "a list"
            raise ConfigError(
                top.path,
                f"a field name must be a string, got {kind} at line {_line(ev)}",
            )
        if len(self.stack) >= MAX_DEPTH:
            raise ConfigError(
                self.here(), f"nested more than {MAX_DEPTH} levels deep at line {_line(ev)}"
            )
        self._count(1, ev)
        container: dict[str, Any] | list[Any] = {} if is_map else []
        path = self.here()
        self.stack.append(_Open(container, path, ev.anchor, self.nodes))
        if ev.anchor is not None:
            self.anchors.pop(ev.anchor, None)
            self.open_anchors.add(ev.anchor)

    def _end(self) -> None:
        done = self.stack.pop()
        if isinstance(done.value, dict):
            for merged in done.merges:
                for k, v in merged.items():
                    done.value.setdefault(k, v)  # fields written out win over merged ones
        if done.anchor is not None:
            self.open_anchors.discard(done.anchor)
            self.anchors[done.anchor] = (done.value, self.nodes - done.nodes_at_start + 1)
        self._add_value(done.value)

    # ---- placing a value ----------------------------------------------------------
    def _add(self, value: Any, ev: yaml.Event, *, is_merge_key: bool) -> None:
        if not self.stack:
            self.result = value
            return
        top = self.stack[-1]
        if isinstance(top.value, list) or top.key is not None or top.merging:
            self._add_value(value)
            return
        # a mapping awaiting a field name
        if is_merge_key:
            top.merging, top.key_line = True, _line(ev)
            return
        if not isinstance(value, str):
            raise ConfigError(
                top.path,
                f"a field name must be a string, got {type_name(value)} {brief(value)}"
                f" at line {_line(ev)}",
            )
        if value in top.value:
            raise ConfigError(_child(top.path, value), f"duplicate field at line {_line(ev)}")
        top.key, top.key_line = value, _line(ev)

    def _add_value(self, value: Any) -> None:
        if not self.stack:
            self.result = value
            return
        top = self.stack[-1]
        if isinstance(top.value, list):
            top.value.append(value)
        elif top.merging:
            top.merging = False
            sources = value if isinstance(value, list) else [value]
            for src in sources:
                if not isinstance(src, dict):
                    raise ConfigError(
                        top.path,
                        f"a merge key (<<) at line {top.key_line} needs an object or a list"
                        f" of objects, got {type_name(src)}",
                    )
                top.merges.append(src)
        else:
            assert top.key is not None
            top.value[top.key] = value
            top.key = None

    # ---- scalars ------------------------------------------------------------------
    def _is_merge_key(self, ev: yaml.ScalarEvent) -> bool:
        if ev.value != "<<" or not self.stack:
            return False
        top = self.stack[-1]
        return isinstance(top.value, dict) and top.key is None and self._tag(ev) == _MERGE_TAG

    def _tag(self, ev: yaml.ScalarEvent) -> str:
        if ev.tag is None or ev.tag == "!":
            tag: str = self.loader.resolve(yaml.ScalarNode, ev.value, ev.implicit)  # type: ignore[no-untyped-call]
            if ev.implicit[0]:  # a plain scalar: resolve as go-yaml does where PyYAML differs
                if tag == _TAG + "str" and _GO_FLOAT.fullmatch(ev.value):
                    return _TAG + "float"  # "1e3", "1.0e6": floats for go-yaml
                if tag == _TAG + "str" and _GO_OCTAL.fullmatch(ev.value):
                    return _GO_OCTAL_TAG  # "0o10"
                if tag in (_TAG + "int", _TAG + "float") and ":" in ev.value:
                    return _TAG + "str"  # YAML 1.1 base-60 ("1:20"): a string for go-yaml
            return tag
        return ev.tag

    def _scalar(self, ev: yaml.ScalarEvent) -> Any:
        tag = self._tag(ev)
        if tag == _MERGE_TAG:
            return ev.value
        if tag == _GO_OCTAL_TAG:
            sign = -1 if ev.value.startswith("-") else 1
            return sign * int(ev.value.lstrip("+-")[2:].replace("_", ""), 8)
        if tag not in _SCALAR_TAGS:
            raise ConfigError(self.here(), f"unsupported YAML tag {brief(tag)} at line {_line(ev)}")
        node = yaml.ScalarNode(tag, ev.value, None, None, ev.style)
        try:
            return self.loader.yaml_constructors[tag](self.loader, node)
        except Exception as e:  # PyYAML's constructors fail in many ways (KeyError for
            # "!!bool maybe", ValueError, OverflowError, ...): all mean "not a valid <tag>"
            kind = tag.removeprefix(_TAG)
            raise ConfigError(
                self.here(),
                f"{brief(ev.value)} at line {_line(ev)} is not a valid {kind}"
                f" ({brief(str(e).splitlines()[0] if str(e) else type(e).__name__, 80)})",
            ) from None


def _child(path: str, key: str) -> str:
    key = brief(key, 60, quote=False)
    return f"{path}.{key}" if path else key


def _index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def _line(ev: yaml.Event) -> int:
    return ev.start_mark.line + 1 if ev.start_mark is not None else 0


def _near(path: str) -> str:
    # the parser reads ahead, so the field being read is a hint, not the culprit
    return f", near {brief(path, 80, quote=False)}" if path else ""


def _yaml_problem(e: yaml.MarkedYAMLError, path: str) -> str:
    mark = e.problem_mark or e.context_mark
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    what = e.problem or e.context or "malformed"
    return f"invalid YAML{where}{_near(path)}: {brief(what, 120, quote=False)}"


def _reader_problem(e: yaml.YAMLError, path: str) -> str:
    if isinstance(e, yaml.reader.ReaderError):
        return (
            f"invalid YAML: character {e.character!r} at offset {e.position}{_near(path)}"
            f" is not allowed ({brief(e.reason, 80, quote=False)})"
        )
    return f"invalid YAML{_near(path)}: {brief(str(e), 120, quote=False)}"


def parse_document(text: str) -> Any:
    """The one document's value (None for an empty stream). Raises ConfigError."""
    return _Builder(text).build()
