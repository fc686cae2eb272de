"""Draws of a local function that only some calls make: each draw with the
tests of the function's parameters it runs under (``HelperFact.guarded_draws``,
``HelperFact.guarded_augmentations``), and whether one call proves them false.

AssemblyAI's speech tutorial hands both loaders ``collate_fn=lambda x:
data_processing(x, "train")`` and ``... "valid")``; ``data_processing`` applies
its SpecAugment masks under ``if data_type == "train":`` only. proxy-nca's
``make_transform(..., is_train=False)`` builds ``RandomCropFlip(sz_crop) if
is_train else CenterCrop(sz_crop)``: the evaluation's transform draws nothing.
A draw is that call's only where no test it runs under is proven false by what
the call passes: a constant for the parameter (by keyword, or at its position),
or, where the call does not pass it and has no ``*args``/``**kwargs``, the
parameter's constant default. A test is read only in these shapes: ``if p:``,
``if not p:``, ``p == CONST``, ``p != CONST`` (also of an ``elif``, an ``else``
and a conditional expression), ``p`` a parameter the body never rebinds;
any other test is taken to hold (the draw stays the call's).

Static only: ``ast`` on the project side, libcst at the call.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from . import python_ast
from .project_nodes import _own_nodes, assigned_in

if TYPE_CHECKING:
    import libcst as cst

Definition = ast.FunctionDef | ast.AsyncFunctionDef
#: (parameter, position among the positional ones or -1, "truth" or "eq",
#: the constant compared with as written ("" for "truth"), the outcome the draw
#: needs, the parameter's constant default as written ("" where none)).
Guard = tuple[str, int, str, str, bool, str]
#: A draw (spelled for a finding) and the guards it runs under.
TestedDraw = tuple[str, tuple[Guard, ...]]


def guarded_draws(
    function: Definition,
    test: Callable[[ast.Call], str],
    inner: Callable[[ast.Call], str] = lambda call: "",
) -> tuple[TestedDraw, ...]:
    """Each call of ``function``'s own body that draws (``test``, or through a
    function of its module it calls: ``inner``), with its guards, in order."""
    parents = _parents(function)
    parameters = _parameters(function)
    found: list[TestedDraw] = []
    calls = sorted(
        (n for n in _own_nodes(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for call in calls:
        draw = test(call) or inner(call)
        if draw:
            found.append((draw, _guards(call, parents, parameters, function)))
    return tuple(dict.fromkeys(found))


def first_draw(guarded: Iterable[TestedDraw], call: cst.Call) -> str:
    """The first of ``guarded`` that ``call`` may make (no guard of it proven
    false by the call's arguments); ""."""
    for draw, guards in guarded:
        if not any(_false(guard, call) for guard in guards):
            return draw
    return ""


def _parents(function: Definition) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for node in [function, *_own_nodes(function)]:
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _parameters(function: Definition) -> dict[str, tuple[int, str]]:
    """name -> (positional index or -1, constant default as written or "")."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    defaults: dict[str, ast.expr] = dict(
        zip(
            [a.arg for a in positional[len(positional) - len(arguments.defaults) :]],
            arguments.defaults,
            strict=True,
        )
    )
    for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if d is not None:
            defaults[a.arg] = d
    found: dict[str, tuple[int, str]] = {}
    for i, a in enumerate(positional):
        found[a.arg] = (i, "")
    for a in arguments.kwonlyargs:
        found[a.arg] = (-1, "")
    for name, default in defaults.items():
        if isinstance(default, ast.Constant):
            found[name] = (found[name][0], ast.unparse(default))
    return {
        name: value
        for name, value in found.items()
        if not assigned_in(function, name) and not _aug_assigned(function, name)
    }


def _aug_assigned(function: Definition, name: str) -> bool:
    return any(
        isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For))
        and any(
            isinstance(t, ast.Name) and t.id == name
            for t in ast.walk(n.target)  # type: ignore[union-attr]
        )
        for n in _own_nodes(function)
    )


def _guards(
    node: ast.AST,
    parents: dict[int, ast.AST],
    parameters: dict[str, tuple[int, str]],
    function: Definition,
) -> tuple[Guard, ...]:
    found: list[Guard] = []
    child = node
    parent = parents.get(id(child))
    while parent is not None and parent is not function:
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            body = parent.body if isinstance(parent, ast.If) else [parent.body]
            want = any(child is s for s in body)
            guard = _guard(parent.test, want, parameters)
            if guard is not None:
                found.append(guard)
        child, parent = parent, parents.get(id(parent))
    return tuple(found)


def _guard(
    test: ast.expr, want: bool, parameters: dict[str, tuple[int, str]]
) -> Guard | None:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _guard(test.operand, not want, parameters)
    if isinstance(test, ast.Name) and test.id in parameters:
        position, default = parameters[test.id]
        return (test.id, position, "truth", "", want, default)
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Eq, ast.NotEq))
    ):
        left, right = test.left, test.comparators[0]
        if isinstance(left, ast.Constant):
            left, right = right, left
        if (
            isinstance(left, ast.Name)
            and left.id in parameters
            and isinstance(right, ast.Constant)
        ):
            position, default = parameters[left.id]
            equal = want if isinstance(test.ops[0], ast.Eq) else not want
            return (left.id, position, "eq", ast.unparse(right), equal, default)
    return None


_UNKNOWN = object()


def _false(guard: Guard, call: cst.Call) -> bool:
    """Is ``guard`` proven false for ``call``?"""
    name, position, kind, constant, want, default = guard
    value = _passed(call, name, position, default)
    if value is _UNKNOWN:
        return False
    if kind == "truth":
        return bool(value) != want
    return (value == python_ast.literal_eval(constant)) != want


def _passed(call: cst.Call, name: str, position: int, default: str) -> object:
    """The constant ``call`` hands the parameter (its default where it hands
    nothing and no ``*``/``**`` could hand it); ``_UNKNOWN`` otherwise."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return _constant(arg.value)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    starred = any(a.star == "*" for a in call.args)
    if 0 <= position < len(positional) and not starred:
        return _constant(positional[position].value)
    if any(a.star for a in call.args) or not default:
        return _UNKNOWN
    return python_ast.literal_eval(default)


def _constant(expr: cst.BaseExpression) -> object:
    import libcst as cst

    code = cst.Module([]).code_for_node(expr).strip()
    try:
        tree = python_ast.parse(code, mode="eval").body
    except SyntaxError:
        return _UNKNOWN
    if not isinstance(tree, (ast.Constant, ast.UnaryOp)):
        return _UNKNOWN
    try:
        return python_ast.literal_eval(tree)
    except ValueError:
        return _UNKNOWN
