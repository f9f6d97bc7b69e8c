"""Label selectors (metav1.LabelSelector) and node selectors (v1.NodeSelector).

Semantics as upstream:
- LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) are
  ANDed. An empty selector ({}) matches everything; an absent (null) selector matches
  nothing, which is `LabelSelector.nothing()`.
- NodeSelector: terms are ORed; within a term matchExpressions (In, NotIn, Exists,
  DoesNotExist, Gt, Lt) and matchFields (metadata.name with In/NotIn) are ANDed; a term
  with no requirements matches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
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
_NODE_OPS = _LABEL_OPS | {GT, LT}
FIELD_NODE_NAME = "metadata.name"


def _parse_int_label(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

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
        if v is None:
            return False
        have = _parse_int_label(v)
        want = _parse_int_label(next(iter(self.values))) if len(self.values) == 1 else None
        if have is None or want is None:
            return False
        return have > want if op == GT else have < want


def _requirement(raw: Any, path: str, ops: frozenset[str]) -> Requirement:
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    key = raw.get("key")
    op = raw.get("operator")
    values = raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise InvalidObject(f"{path}.key", "must be a non-empty string")
    if op not in ops:
        raise InvalidObject(f"{path}.operator", f"unsupported operator {op!r}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidObject(f"{path}.values", "must be a list of strings")
    if op in (IN, NOT_IN) and not values:
        raise InvalidObject(f"{path}.values", f"must be non-empty for operator {op}")
    if op in (EXISTS, DOES_NOT_EXIST) and values:
        raise InvalidObject(f"{path}.values", f"must be empty for operator {op}")
    if op in (GT, LT) and (len(values) != 1 or _parse_int_label(values[0]) is None):
        raise InvalidObject(f"{path}.values", f"must be one integer for operator {op}")
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
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        raise InvalidObject(f"{path}.matchLabels", "must be a map of strings")
    for k, v in sorted(match_labels.items()):
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidObject(f"{path}.matchLabels", "must be a map of strings")
        reqs.append(Requirement(k, IN, frozenset((v,))))
    exprs = raw.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise InvalidObject(f"{path}.matchExpressions", "must be a list")
    for i, e in enumerate(exprs):
        reqs.append(_requirement(e, f"{path}.matchExpressions[{i}]", _LABEL_OPS))
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.expressions and not self.fields:
            return False
        for r in self.expressions:
            if not r.matches(labels):
                return False
        if self.fields:
            name_labels = {FIELD_NODE_NAME: node_name}
            for r in self.fields:
                if not r.matches(name_labels):
                    return False
        return True


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[NodeSelectorTerm, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return any(t.matches(labels, node_name) for t in self.terms)

    def node_names(self) -> frozenset[str] | None:
        """The node names this selector is limited to when every term pins
        metadata.name with In (as upstream's NodeAffinity PreFilter), else None."""
        names: set[str] = set()
        for t in self.terms:
            pinned = [r for r in t.fields if r.operator == IN]
            if not pinned:
                return None
            allowed = set(pinned[0].values)
            for r in pinned[1:]:
                allowed &= r.values
            names |= allowed
        return frozenset(names) if self.terms else None


def parse_node_selector_term(raw: Any, path: str) -> NodeSelectorTerm:
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    exprs = raw.get("matchExpressions") or []
    fields = raw.get("matchFields") or []
    if not isinstance(exprs, list):
        raise InvalidObject(f"{path}.matchExpressions", "must be a list")
    if not isinstance(fields, list):
        raise InvalidObject(f"{path}.matchFields", "must be a list")
    e = tuple(
        _requirement(x, f"{path}.matchExpressions[{i}]", _NODE_OPS) for i, x in enumerate(exprs)
    )
    f: list[Requirement] = []
    for i, x in enumerate(fields):
        r = _requirement(x, f"{path}.matchFields[{i}]", frozenset({IN, NOT_IN}))
        if r.key != FIELD_NODE_NAME:
            raise InvalidObject(f"{path}.matchFields[{i}].key", f"unsupported field {r.key!r}")
        f.append(r)
    return NodeSelectorTerm(e, tuple(f))


def parse_node_selector(raw: Any, path: str) -> NodeSelector:
    if not isinstance(raw, dict):
        raise InvalidObject(path, "must be an object")
    terms = raw.get("nodeSelectorTerms") or []
    if not isinstance(terms, list):
        raise InvalidObject(f"{path}.nodeSelectorTerms", "must be a list")
    return NodeSelector(
        tuple(
            parse_node_selector_term(t, f"{path}.nodeSelectorTerms[{i}]")
            for i, t in enumerate(terms)
        )
    )
