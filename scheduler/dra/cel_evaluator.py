"""celpy, taught the syntax Kubernetes' CEL environment has and celpy lacks: optional
field selection and indexing (`a.?b`, `a[?k]`, and optional.of / optional.none /
orValue / hasValue / value / or) and the `cel.bind(name, init, expr)` macro.

Both are part of what upstream compiles a selector with: optional types are in the API
server's base environment (k8s.io/apiserver@v0.37.2/pkg/cel/environment/base.go) and
`cel.bind` is added by k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile.go
(ext.Bindings). The Kubernetes documentation writes optional attributes with `.?`.

How: celpy's own grammar with two more productions for `member`, and an Evaluator
subclass that evaluates them. celpy is pinned (pyproject.toml); the unit tests of
scheduler.dra run upstream's selector cases through this module, so a celpy release that
moves these internals fails them rather than the scheduler.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

import celpy
import lark
from celpy import celtypes
from celpy.celparser import CELParseError, CELParser
from celpy.evaluation import CELEvalError, Evaluator

from scheduler.dra.cel_library import FUNCTIONS, no_such_overload
from scheduler.dra.cel_values import NONE, OptionalValue

_MEMBER_RULE = (
    "member         : member_dot | member_dot_arg | member_index | member_object | primary"
)
_EXTENDED_MEMBER_RULE = (
    "member         : member_dot | member_dot_arg | member_index | member_object"
    " | member_dot_opt | member_index_opt | primary\n"
    'member_dot_opt : member "." "?" IDENT\n'
    'member_index_opt : member "[" "?" expr "]"'
)


def _grammar() -> str:
    text = (Path(celpy.__file__).parent / "cel.lark").read_text()
    if _MEMBER_RULE not in text:
        raise RuntimeError("celpy's grammar changed: the optional-syntax patch does not apply")
    return text.replace(_MEMBER_RULE, _EXTENDED_MEMBER_RULE)


class SelectorParser:
    """Parses CEL with optional syntax; one Lark parser per process (building it takes
    tens of milliseconds)."""

    _lark: lark.Lark | None = None

    def parse(self, text: str) -> lark.Tree[Any]:
        if SelectorParser._lark is None:
            SelectorParser._lark = lark.Lark(
                _grammar(),
                parser="lalr",
                start="expr",
                g_regex_flags=re.M,
                lexer_callbacks={"IDENT": CELParser.ambiguous_literals},
                propagate_positions=True,
                maybe_placeholders=False,
                priority="invert",
            )
        try:
            return SelectorParser._lark.parse(text)
        except (lark.exceptions.UnexpectedToken, lark.exceptions.UnexpectedCharacters) as ex:
            raise CELParseError(
                ex.get_context(text), *ex.args, line=ex.line, column=ex.column
            ) from ex
        except lark.exceptions.LarkError as ex:
            raise CELParseError(str(ex).splitlines()[0]) from ex


def _single_ident(tree: Any) -> str | None:
    """The identifier an expression tree is, when it is nothing but one name."""
    node = tree
    while isinstance(node, lark.Tree):
        if node.data == "ident":
            token = node.children[0]
            return str(token.value) if isinstance(token, lark.Token) else None
        if len(node.children) != 1:
            return None
        node = node.children[0]
    return None


def _select(container: Any, key: Any) -> tuple[bool, Any]:
    """(found, value) of container[key] for a map (a missing key is not found) or a list."""
    if isinstance(container, celtypes.MapType):
        if key in container:
            return True, container[key]
        return False, None
    if isinstance(container, celtypes.ListType) and isinstance(key, int):
        if 0 <= key < len(container):
            return True, container[key]
        return False, None
    return False, no_such_overload()


class SelectorEvaluator(Evaluator):
    """celpy's Evaluator plus optional values and cel.bind."""

    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        return SelectorEvaluator(ast, activation=self.activation)

    def member_dot_opt(self, tree: lark.Tree[Any]) -> Any:
        member_tree, ident = tree.children
        member = self.visit(member_tree)
        return self._optional_select(member, celtypes.StringType(cast(lark.Token, ident).value))

    def member_index_opt(self, tree: lark.Tree[Any]) -> Any:
        member_tree, index_tree = tree.children
        member = self.visit(member_tree)
        index = self.visit(index_tree)
        if isinstance(index, CELEvalError):
            return index
        return self._optional_select(member, index)

    def _optional_select(self, member: Any, key: Any) -> Any:
        if isinstance(member, CELEvalError):
            return member
        if isinstance(member, OptionalValue):
            if not member.present:
                return NONE
            member = member.value
        found, value = _select(member, key)
        if isinstance(value, CELEvalError):
            return value
        return OptionalValue(True, value) if found else NONE

    def member_dot(self, tree: lark.Tree[Any]) -> Any:
        member_tree, ident = tree.children
        name = cast(lark.Token, ident).value
        member = self.visit(member_tree)
        if isinstance(member, CELEvalError):
            return member
        if isinstance(member, OptionalValue):
            # a field selection on an optional value stays optional (optional chaining)
            return self._optional_select(member, celtypes.StringType(name))
        if isinstance(member, celtypes.MapType):
            try:
                return member[celtypes.StringType(name)]
            except KeyError:
                return CELEvalError(f"no such key: {name}", KeyError, (name,), tree=tree)
        # names of the activation and everything else: celpy's own rule (it visits the
        # member again; these are not the selectors' hot path)
        return super().member_dot(tree)

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        member_tree, method = tree.children[0], cast(lark.Token, tree.children[1]).value
        args_tree = tree.children[2] if len(tree.children) > 2 else None
        args = cast(list[Any], args_tree.children) if isinstance(args_tree, lark.Tree) else []
        receiver = _single_ident(member_tree)
        if receiver == "cel" and method == "bind" and len(args) == 3:
            return self._bind(args)
        if receiver == "optional" and method in ("of", "none", "ofNonZeroValue"):
            return self._optional_constructor(method, args)
        if method in ("orValue", "hasValue", "value", "or"):
            member = self.visit(member_tree)
            if isinstance(member, OptionalValue):
                return self._optional_method(member, method, args)
        return super().member_dot_arg(tree)

    def _bind(self, args: list[Any]) -> Any:
        name = _single_ident(args[0])
        if name is None:
            return CELEvalError(
                "cel.bind() variable name must be a simple identifier", TypeError, ()
            )
        init = self.visit(args[1])
        if isinstance(init, CELEvalError):
            return init
        nested = self.sub_evaluator(args[2])
        try:
            return nested.evaluate({name: init})
        except CELEvalError as err:
            return err

    def _optional_constructor(self, method: str, args: list[Any]) -> Any:
        if method == "none":
            return NONE if not args else no_such_overload()
        if len(args) != 1:
            return no_such_overload()
        value = self.visit(args[0])
        if isinstance(value, CELEvalError):
            return value
        if method == "ofNonZeroValue" and _is_zero_value(value):
            return NONE
        return OptionalValue(True, value)

    def _optional_method(self, member: OptionalValue, method: str, args: list[Any]) -> Any:
        if method == "hasValue" and not args:
            return celtypes.BoolType(member.present)
        if method == "value" and not args:
            if not member.present:
                return CELEvalError("optional.none() dereference", ValueError, ())
            return member.value
        if method == "orValue" and len(args) == 1:
            return member.value if member.present else self.visit(args[0])
        if method == "or" and len(args) == 1:
            if member.present:
                return member
            other = self.visit(args[0])
            if isinstance(other, (OptionalValue, CELEvalError)):
                return other
            return no_such_overload()
        return no_such_overload()


def _is_zero_value(value: Any) -> bool:
    if isinstance(value, (celtypes.BoolType, celtypes.IntType, celtypes.UintType)):
        return int(value) == 0
    if isinstance(value, (celtypes.StringType, celtypes.BytesType, list, dict)):
        return len(value) == 0
    if isinstance(value, celtypes.DoubleType):
        return float(value) == 0.0
    return value is None


class SelectorRunner(celpy.InterpretedRunner):
    """celpy's interpreted runner with SelectorEvaluator and Kubernetes' functions."""

    def evaluate(self, context: Any) -> Any:
        return SelectorEvaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


_ENVIRONMENT: celpy.Environment | None = None
_PARSER = SelectorParser()


def compile_program(expression: str) -> SelectorRunner:
    """Parse an expression into a runnable program. Raises CELParseError."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        _ENVIRONMENT = celpy.Environment()
    ast = _PARSER.parse(expression)
    return SelectorRunner(_ENVIRONMENT, ast, dict(FUNCTIONS))
