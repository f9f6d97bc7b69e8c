"""Label selectors (metav1.LabelSelector) and node selectors (v1.NodeSelector).

Semantics as upstream:
- LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) are
  ANDed. An empty selector ({}) matches everything; an absent (null) selector matches
  nothing, which is `LabelSelector.nothing()`.
- NodeSelector: terms are ORed; within a term matchExpressions (In, NotIn, Exists,
  DoesNotExist, Gt, Lt) and matchFields (In/NotIn on a node field) are ANDed; a term
  with no requirements matches nothing.

Node selector terms parse lazily, as upstream's LazyErrorNodeSelector
(k8s.io/component-helpers/scheduling/corev1/nodeaffinity): a term whose requirements do
not parse (say `Gt` with value `high`, which the API server accepts because it only checks
the value count) keeps its error text and matches no node; the other ORed terms still
work. Strict callers (the profile's addedAffinity) turn any term error into InvalidObject.
Only JSON of the wrong shape (a term that is not an object, values that are not strings)
raises InvalidObject here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.model.errors import InvalidObject

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"

_LABEL_OPS = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST})
_NODE_OPS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)  # upstream's listing order
_FIELD_OPS = (IN, NOT_IN)
FIELD_NODE_NAME = "metadata.name"


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_DECIMAL_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def parse_go_int64(value: str) -> int | None:
    """The integer Go's strconv.ParseInt(value, 10, 64) reads, or None where it fails:
    an optional sign then ASCII digits only (no underscores, no spaces, no other digit
    scripts), within int64 (an overflow is a failure). Gt/Lt use exactly this on both
    the requirement value and the node's label value (apimachinery labels.Requirement)."""
    if _DECIMAL_INT.fullmatch(value) is None:
        return None
    n = int(value)
    return n if INT64_MIN <= n <= INT64_MAX else None


def go_quote(value: str) -> str:
    """Go's %q for the strings that reach error texts (label values, operators)."""
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif not ch.isprintable():
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_json_strings(values: Iterable[str]) -> str:
    return json.dumps(list(values), separators=(",", ":"), ensure_ascii=False)


def _absent_as(value: Any, empty: Any) -> Any:
    """An optional JSON field: null (absent) reads as `empty`; anything else is returned
    as is for the caller's explicit shape check (never `value or empty`, which would
    take a wrong-typed 0, "" or false for "absent")."""
    return empty if value is None else value


def _short(value: Any) -> str:
    """A bad JSON value for an error text, cut short (it may be huge or deeply nested)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _invalid(path: str, bad: str, detail: str) -> str:
    """field.Invalid(path, value, detail).Error() as apimachinery renders it."""
    return f"{path}: Invalid value: {bad}: {detail}"


def _not_supported(path: str, value: str, supported: Iterable[str]) -> str:
    """field.NotSupported(path, value, supported).Error()."""
    listed = ", ".join(go_quote(v) for v in supported)
    return f"{path}: Unsupported value: {go_quote(value)}: supported values: {listed}"


def aggregate_message(errors: Iterable[str]) -> str:
    """utilerrors.NewAggregate(errs).Error() of flattened errors: one error is its own
    text; several are "[a, b]", duplicates dropped."""
    seen: list[str] = []
    for e in errors:
        if e not in seen:
            seen.append(e)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]" if seen else ""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()
    # Gt/Lt: the one value as strconv.ParseInt reads it (parsed once, at informer time)
    number: int | None = None

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == IN:
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == NOT_IN:
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        v = labels.get(self.key)
        want = self.number
        if v is None or want is None:
            return False
        have = parse_go_int64(v)
        if have is None:
            return False
        return have > want if op == GT else have < want

    def matches_field(self, node_name: str) -> bool:
        """A matchFields requirement (In/NotIn with one value) against the node's fields:
        only metadata.name exists; any other field reads as "" (fields.Set.Get)."""
        value = node_name if self.key == FIELD_NODE_NAME else ""
        hit = value in self.values
        return hit if self.operator == IN else not hit


def _requirement(raw: Any, path: str, ops: frozenset[str]) -> Requirement:
    """A label selector requirement (metav1.LabelSelectorRequirement); anything
    LabelSelectorAsSelector would refuse raises InvalidObject."""
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    key = raw.get("key")
    op = raw.get("operator")
    values = _absent_as(raw.get("values"), [])
    if not isinstance(key, str) or not key:
        raise InvalidObject(f"{path}.key", "must be a non-empty string")
    # a string first: `in` on a frozenset hashes its operand (a list would be a TypeError)
    if not isinstance(op, str) or op not in ops:
        raise InvalidObject(f"{path}.operator", f"unsupported operator {_short(op)}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidObject(f"{path}.values", "must be a list of strings")
    if op in (IN, NOT_IN) and not values:
        raise InvalidObject(f"{path}.values", f"must be non-empty for operator {op}")
    if op in (EXISTS, DOES_NOT_EXIST) and values:
        raise InvalidObject(f"{path}.values", f"must be empty for operator {op}")
    return Requirement(key, op, frozenset(values))


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    match_nothing: bool = False

    @classmethod
    def nothing(cls) -> LabelSelector:
        return _NOTHING

    @classmethod
    def everything(cls) -> LabelSelector:
        return _EVERYTHING

    @property
    def is_everything(self) -> bool:
        return not self.match_nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.match_nothing:
            return False
        for r in self.requirements:  # noqa: SIM110 - a plain loop is faster on this hot path
            if not r.matches(labels):
                return False
        return True

    def with_requirements(self, extra: tuple[Requirement, ...]) -> LabelSelector:
        if self.match_nothing or not extra:
            return self
        return LabelSelector(self.requirements + extra)

    def positive_pairs(self) -> list[tuple[str, str | None]]:
        """(key, value) pairs every matching object must carry; value None means the
        key must merely exist. Used to look candidates up in a label index."""
        out: list[tuple[str, str | None]] = []
        for r in self.requirements:
            if r.operator == IN and len(r.values) == 1:
                out.append((r.key, next(iter(r.values))))
            elif r.operator in (IN, EXISTS):
                out.append((r.key, None))
        return out


_NOTHING = LabelSelector((), True)
_EVERYTHING = LabelSelector(())


def parse_label_selector(raw: Any, path: str) -> LabelSelector:
    """A metav1.LabelSelector; None (absent) matches nothing."""
    if raw is None:
        return _NOTHING
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    reqs: list[Requirement] = []
    match_labels = _absent_as(raw.get("matchLabels"), {})
    if not isinstance(match_labels, dict):
        raise InvalidObject(f"{path}.matchLabels", "must be a map of strings")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in match_labels.items()):
        raise InvalidObject(f"{path}.matchLabels", "must be a map of strings")
    for k, v in sorted(match_labels.items()):
        reqs.append(Requirement(k, IN, frozenset((v,))))
    exprs = _absent_as(raw.get("matchExpressions"), [])
    if not isinstance(exprs, list):
        raise InvalidObject(f"{path}.matchExpressions", "must be a list")
    for i, e in enumerate(exprs):
        reqs.append(_requirement(e, f"{path}.matchExpressions[{i}]", _LABEL_OPS))
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One node selector term. `errors` holds the parse errors of its requirements in
    upstream's words (field path relative to where the term was parsed); a term with
    errors matches nothing, like upstream's nodeSelectorTerm.match."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.expressions and not self.fields and not self.errors

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.errors or (not self.expressions and not self.fields):
            return False
        for r in self.expressions:
            if not r.matches(labels):
                return False
        for r in self.fields:  # noqa: SIM110 - a plain loop is faster on this hot path
            if not r.matches_field(node_name):
                return False
        return True


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[NodeSelectorTerm, ...] = ()

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(e for t in self.terms for e in t.errors)

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return any(t.matches(labels, node_name) for t in self.terms)

    def node_names(self) -> frozenset[str] | None:
        """The node names this selector is limited to when every term pins
        metadata.name with In (as upstream's NodeAffinity PreFilter, which reads the
        raw terms, so a term with a parse error still contributes its names), else None."""
        names: set[str] = set()
        for t in self.terms:
            pinned = [r for r in t.fields if r.operator == IN and r.key == FIELD_NODE_NAME]
            if not pinned:
                return None
            allowed = set(pinned[0].values)
            for r in pinned[1:]:
                allowed &= r.values
            names |= allowed
        return frozenset(names) if self.terms else None


def _strings(raw: Any, path: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise InvalidObject(path, "must be a list of strings")
    return raw


def _requirement_parts(raw: Any, path: str, *, key_required: bool) -> tuple[str, str, list[str]]:
    """A selector requirement's key, operator and values, each of the right JSON type
    (a matchExpressions key must also be non-empty; a matchFields key may be any)."""
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    key = raw.get("key")
    op = raw.get("operator")
    if not isinstance(key, str) or (key_required and not key):
        raise InvalidObject(
            f"{path}.key", "must be a non-empty string" if key_required else "must be a string"
        )
    if not isinstance(op, str):
        raise InvalidObject(f"{path}.operator", "must be a string")
    return key, op, _strings(raw.get("values"), f"{path}.values")


class _TermErrors:
    """Where a term's parse errors go: kept in upstream's words on the term (lazy), or
    raised at once naming the JSON field (strict: the profile's addedAffinity)."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.found: list[str] = []

    def add(self, json_path: str, detail: str, upstream: str) -> None:
        if self.strict:
            raise InvalidObject(json_path, detail)
        self.found.append(upstream)

    def operator_supported(
        self, op: str, supported: tuple[str, ...], path: str, error_path: str
    ) -> bool:
        """False, with the error added, for an operator the requirement cannot have."""
        if op in supported:
            return True
        self.add(
            f"{path}.operator",
            f"unsupported operator {op!r}",
            _not_supported(f"{error_path}.operator", op, supported),
        )
        return False


def _node_requirement(
    raw: Any, path: str, error_path: str, errors: _TermErrors
) -> Requirement | None:
    """A matchExpressions entry, as nodeSelectorRequirementsAsSelector and
    labels.NewRequirement check it: an unknown operator, a value count that does not
    fit the operator, or a Gt/Lt value strconv.ParseInt refuses is an error of the
    term (which then matches nothing). Label key and value syntax is not re-checked:
    the API server validates both when the pod is created."""
    key, op, values = _requirement_parts(raw, path, key_required=True)
    if not errors.operator_supported(op, _NODE_OPS, path, error_path):
        return None
    vpath, jpath = f"{error_path}.values", f"{path}.values"
    before = len(errors.found)
    number: int | None = None
    if op in (IN, NOT_IN) and not values:
        errors.add(
            jpath,
            f"must be non-empty for operator {op}",
            _invalid(vpath, "null", "for 'in', 'notin' operators, values set can't be empty"),
        )
    elif op in (EXISTS, DOES_NOT_EXIST) and values:
        errors.add(
            jpath,
            f"must be empty for operator {op}",
            _invalid(
                vpath,
                _go_json_strings(values),
                "values set must be empty for exists and does not exist",
            ),
        )
    elif op in (GT, LT):
        if len(values) != 1:
            errors.add(
                jpath,
                f"must be one integer for operator {op}",
                _invalid(
                    vpath,
                    _go_json_strings(values) if values else "null",
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ),
            )
        for i, v in enumerate(values):
            parsed = parse_go_int64(v)
            if parsed is None:
                errors.add(
                    jpath,
                    f"must be one integer for operator {op}",
                    _invalid(
                        f"{vpath}[{i}]",
                        go_quote(v),
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ),
                )
            else:
                number = parsed
    if len(errors.found) > before:
        return None
    return Requirement(key, op, frozenset(values), number)


def _field_requirement(
    raw: Any, path: str, error_path: str, errors: _TermErrors
) -> Requirement | None:
    """A matchFields entry, as nodeSelectorRequirementsAsFieldSelector: In/NotIn with
    exactly one value; any field key (only metadata.name has a value on a node). The
    strict form also refuses other keys, as upstream's addedAffinity validation does."""
    key, op, values = _requirement_parts(raw, path, key_required=False)
    if errors.strict and key != FIELD_NODE_NAME:
        raise InvalidObject(f"{path}.key", f"unsupported field {key!r}")
    if not errors.operator_supported(op, _FIELD_OPS, path, error_path):
        return None
    if len(values) != 1:
        bad = _go_json_strings(values) if values else "null"
        errors.add(
            f"{path}.values",
            f"must have exactly one value for operator {op}",
            _invalid(f"{error_path}.values", bad, "must have one element"),
        )
        return None
    return Requirement(key, op, frozenset(values))


def parse_node_selector_term(
    raw: Any, path: str, error_path: str | None = None, *, strict: bool = True
) -> NodeSelectorTerm:
    """A v1.NodeSelectorTerm. Parse errors are kept on the term with `error_path` as
    the root of their field paths (upstream's path for this term); with `strict` the
    first one raises InvalidObject naming its JSON field instead."""
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    exprs = _absent_as(raw.get("matchExpressions"), [])
    fields = _absent_as(raw.get("matchFields"), [])
    if not isinstance(exprs, list):
        raise InvalidObject(f"{path}.matchExpressions", "must be a list")
    if not isinstance(fields, list):
        raise InvalidObject(f"{path}.matchFields", "must be a list")
    epath = path if error_path is None else error_path
    errors = _TermErrors(strict)
    e = [
        _node_requirement(
            x, f"{path}.matchExpressions[{i}]", f"{epath}.matchExpressions[{i}]", errors
        )
        for i, x in enumerate(exprs)
    ]
    f = [
        _field_requirement(x, f"{path}.matchFields[{i}]", f"{epath}.matchFields[{i}]", errors)
        for i, x in enumerate(fields)
    ]
    return NodeSelectorTerm(
        tuple(r for r in e if r is not None),
        tuple(r for r in f if r is not None),
        tuple(errors.found),
    )


def parse_node_selector(raw: Any, path: str, *, strict: bool = True) -> NodeSelector:
    """A v1.NodeSelector. Lazy (`strict=False`, a pod's required node affinity): a term
    that does not parse matches nothing (upstream NewLazyErrorNodeSelector, whose error
    paths start at "nodeSelectorTerms"). Empty terms stay: they match nothing, and
    NodeAffinity's PreFilter reads them (an empty term pins no node names)."""
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    terms = _absent_as(raw.get("nodeSelectorTerms"), [])
    if not isinstance(terms, list):
        raise InvalidObject(f"{path}.nodeSelectorTerms", "must be a list")
    return NodeSelector(
        tuple(
            parse_node_selector_term(
                t, f"{path}.nodeSelectorTerms[{i}]", f"nodeSelectorTerms[{i}]", strict=strict
            )
            for i, t in enumerate(terms)
        )
    )
