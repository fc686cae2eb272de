"""Which reduction a loss class's call takes for the settings an instance is
built with: the project view's ``HelperFact.setting_reductions``.

The FNO repository's ``utilities3.py`` defines ``class LpLoss(object)`` with
``__init__(self, d=2, p=2, size_average=True, reduction=True)`` storing
``self.size_average = size_average`` and ``self.reduction = reduction``, and
``rel`` returning ``torch.mean(...)`` under ``if self.reduction: if
self.size_average:``, ``torch.sum(...)`` in its ``else`` and the per-sample
values after the block. ``called_reductions`` reads such a class as
``("unknown", why)``: each path reduces differently. This fact keeps the
paths: each ``return`` (through ``return self.method(...)`` into the class's
methods) with the tests of the instance's attributes that lead to it
(``self.a``, ``not self.a``, ``self.a == "sum"``, ``!=``, ``is``, ``is not``,
``in``/``not in`` a literal tuple; an ``if`` whose test reads anything else
leads to both branches), and, for each attribute tested, where ``__init__``
takes it from: one of its parameters (position and literal default) or a
literal. The construction a loss call is traced to (``myloss =
LpLoss(size_average=False)``) then picks the paths its literal arguments
reach (``reduction.called_criteria``): every reached return a full sum is a
sum, every one a full mean a mean.

Kept only where it can be read whole: every tested attribute written exactly
once in the class, by a top-level ``self.a = parameter`` (a parameter
``__init__`` never rebinds) or ``self.a = literal`` of ``__init__``, no
``setattr`` in the class; else None and the class stays unknown. Reaching
more paths than run is safe (more kinds, so unknown); a path left out would
not be, so a statement that may end a block early (a loop, ``with``, ``try``)
is read as not ending it. The script's own classes are read the same way
where the loss is computed, on its tree (``reduction.local_criteria``); this
is the project view's reading of another module's class. Static only:
``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from . import python_ast
from .called_reductions import _UNREAD, _unreduced_attributes, _value, call_reduction
from .project_nodes import _own_nodes, self_attribute

_DEPTH = 4
#: how a test of an attribute holds for a literal value
_OPS = ("truthy", "falsy", "==", "!=", "is", "is not", "in", "not in")
_NEGATED = {
    "truthy": "falsy",
    "falsy": "truthy",
    "==": "!=",
    "!=": "==",
    "is": "is not",
    "is not": "is",
    "in": "not in",
    "not in": "in",
}
_COMPARED = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
_NO_DEFAULT = "required"
_UNREAD_DEFAULT = "unread"

Test = tuple[str, str, object]  # (attribute, op, literal)


@dataclass(frozen=True)
class Setting:
    """Where ``__init__`` takes an attribute from: ``parameter`` (its position
    among the positional parameters after ``self``, -1 keyword-only) with its
    ``default`` (``state`` "value", "required" or "unread"), or, with no
    parameter, the literal ``default`` itself; ``negated``: the attribute is
    ``not`` of the parameter's value (a subclass's ``super().__init__(
    size_average=not summed)``, ``inherited_reductions``)."""

    attribute: str
    parameter: str
    position: int
    state: str
    default: object = None
    negated: bool = False


@dataclass(frozen=True)
class SettingReductions:
    """The returns of a class's call with the attribute tests leading to each
    (``paths``: (tests, kind), kind "sum", "mean", "" not a full reduction, or
    "?" unread) and the tested attributes' ``settings``."""

    entry: str
    paths: tuple[tuple[tuple[Test, ...], str], ...]
    settings: tuple[Setting, ...]

    def kinds(self, values: dict[str, object]) -> frozenset[str]:
        """The kinds of every return the attribute ``values`` reach."""
        return frozenset(
            kind
            for tests, kind in self.paths
            if all(_holds(op, values[attr], literal) for attr, op, literal in tests)
        )


def call_reductions(
    cls: ast.ClassDef, module: ast.Module | None = None
) -> dict[str, object]:
    """``HelperFact``'s ``call_reduction`` and ``setting_reductions`` of ``cls``
    (the second read only where the first is unknown); ``module``: the class's
    module, whose writes of a setting outside ``__init__`` unsettle it."""
    reduction = call_reduction(cls)
    settings = setting_reductions(cls, module) if reduction[0] == "unknown" else None
    return {"call_reduction": reduction, "setting_reductions": settings}


def setting_reductions(
    cls: ast.ClassDef, module: ast.Module | None = None
) -> SettingReductions | None:
    """The fact of ``cls``, or None where its call's paths test no attribute of
    the instance or a tested attribute's source cannot be read (in ``module``
    too: a helper of the class's module setting ``size_average`` after the
    construction)."""
    methods = {
        node.name: node
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    entry = methods.get("forward") or methods.get("__call__")
    init = methods.get("__init__")
    if entry is None or init is None:
        return None
    paths: list[tuple[tuple[Test, ...], str]] = []
    reader = _Paths(methods, _unreduced_attributes(methods), paths)
    reader.walk(entry.body, entry, (), 0)
    tested = sorted({attr for tests, _ in paths for attr, _, _ in tests})
    if not tested or reader.unread:
        return None
    settings = []
    for attr in tested:
        setting = _setting(cls, init, attr, module)
        if setting is None:
            return None
        settings.append(setting)
    return SettingReductions(
        f"{cls.name}.{entry.name}", tuple(dict.fromkeys(paths)), tuple(settings)
    )


class _Paths:
    def __init__(
        self,
        methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
        unreduced: frozenset[str],
        paths: list[tuple[tuple[Test, ...], str]],
    ) -> None:
        self.methods = methods
        self.unreduced = unreduced
        self.paths = paths
        self.unread = False  # a method followed too deep

    def walk(
        self,
        body: list[ast.stmt],
        method: ast.FunctionDef | ast.AsyncFunctionDef,
        tests: tuple[Test, ...],
        depth: int,
    ) -> tuple[Test, ...] | None:
        """Record the returns of ``body`` under ``tests``; the tests that hold
        where it falls through its end, None where it always returns or raises."""
        for stmt in body:
            if isinstance(stmt, ast.Return):
                self.returned(stmt.value, method, tests, depth)
                return None
            if isinstance(stmt, ast.Raise):
                return None
            if isinstance(stmt, ast.If):
                held, failed = _split(stmt.test)
                through = self.walk(stmt.body, method, tests + held, depth)
                through_else = self.walk(stmt.orelse, method, tests + failed, depth)
                if through is None and through_else is None:
                    return None
                if through is None or through_else is None:
                    # `if ...: return a` / `elif ...: return b`: after them,
                    # only what led past both
                    tests = through if through_else is None else through_else
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            # a loop, `with`, `try`, `match`: its returns are reached, and the
            # statements after it too
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list):
                    self.walk(inner, method, tests, depth)
            for part in getattr(stmt, "handlers", []) + getattr(stmt, "cases", []):
                self.walk(part.body, method, tests, depth)
        return tests

    def returned(
        self,
        value: ast.expr | None,
        method: ast.FunctionDef | ast.AsyncFunctionDef,
        tests: tuple[Test, ...],
        depth: int,
    ) -> None:
        if value is None:
            self.paths.append((tests, ""))
            return
        if isinstance(value, ast.IfExp):
            held, failed = _split(value.test)
            self.returned(value.body, method, tests + held, depth)
            self.returned(value.orelse, method, tests + failed, depth)
            return
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id == "self"
            and value.func.attr in self.methods
        ):
            if depth >= _DEPTH:
                self.unread = True
                return
            called = self.methods[value.func.attr]
            through = self.walk(called.body, called, tests, depth + 1)
            if through is not None:
                self.paths.append((through, ""))  # falls off its end: None
            return
        kinds: list[str] = []
        _value(value, method, self.methods, kinds, depth, self.unreduced)
        for kind in kinds or [""]:
            self.paths.append((tests, kind if kind in ("sum", "mean", _UNREAD) else ""))


def _split(test: ast.expr) -> tuple[tuple[Test, ...], tuple[Test, ...]]:
    """The attribute tests that hold where ``test`` is true, and where it is
    false; () where that side says nothing this fact reads."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        held, failed = _split(test.operand)
        return failed, held
    if isinstance(test, ast.BoolOp):
        parts = [_split(value) for value in test.values]
        if isinstance(test.op, ast.And):
            # all hold where true; where false, one of them failed (unread)
            return tuple(t for held, _ in parts for t in held), ()
        return (), tuple(t for _, failed in parts for t in failed)
    attr = self_attribute(test)
    if attr is not None:
        return ((attr, "truthy", None),), ((attr, "falsy", None),)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op = _COMPARED.get(type(test.ops[0]))
        left, right = test.left, test.comparators[0]
        attr = self_attribute(left)
        literal = _literal(right)
        if attr is None and op in ("==", "!=", "is", "is not"):
            attr, literal = self_attribute(right), _literal(left)
        if op is not None and attr is not None and literal is not _NOT_LITERAL:
            if op in ("in", "not in") and not isinstance(literal, tuple):
                return (), ()
            return ((attr, op, literal),), ((attr, _NEGATED[op], literal),)
    return (), ()


_NOT_LITERAL = object()
_SINGLETONS = (None, True, False)


def _literal(expr: ast.expr) -> object:
    try:
        value = python_ast.literal_eval(expr)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL
    if isinstance(value, (list, set, frozenset)):
        # a tuple in a fixed order: the fact's repr is part of a cache key
        return (
            tuple(value) if isinstance(value, list) else tuple(sorted(value, key=repr))
        )
    if isinstance(value, dict):
        return _NOT_LITERAL
    return value


def _holds(op: str, value: object, literal: object) -> bool:
    try:
        if op == "truthy":
            return bool(value)
        if op == "falsy":
            return not value
        if op == "==":
            return bool(value == literal)
        if op == "!=":
            return bool(value != literal)
        if op in ("is", "is not") and any(literal is s for s in _SINGLETONS):
            same = any(value is s and literal is s for s in _SINGLETONS)
            return same if op == "is" else not same
        if op == "in":
            return value in literal  # type: ignore[operator]
        if op == "not in":
            return value not in literal  # type: ignore[operator]
    except TypeError:
        return True  # cannot tell: the path is reached
    return True


def _setting(
    cls: ast.ClassDef,
    init: ast.FunctionDef | ast.AsyncFunctionDef,
    attr: str,
    module: ast.Module | None = None,
) -> Setting | None:
    """Where ``__init__`` takes ``attr`` from; None unless it is its only
    write in the class (and its module) and reads a parameter never rebound, or
    a literal."""
    writes = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr":
            return None
    for node in _outside_other_classes(module if module is not None else cls, cls):
        if _written_by_name(node, attr):
            return None
        if isinstance(node, ast.Attribute) and node.attr == attr:
            if not isinstance(node.ctx, ast.Load):
                writes.append(node)
    own = [
        stmt
        for stmt in init.body
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and self_attribute(stmt.targets[0]) == attr
    ]
    if len(writes) != 1 or len(own) != 1 or own[0].targets[0] is not writes[0]:
        return None
    value = own[0].value
    if isinstance(value, ast.Name):
        return _parameter(init, attr, value.id)
    literal = _literal(value)
    if literal is _NOT_LITERAL:
        return None
    return Setting(attr, "", -1, "value", literal)


def _written_by_name(node: ast.AST, attr: str) -> bool:
    """``setattr(x, "attr", v)``, ``vars(x).update(attr=v)``,
    ``x.__dict__.update({"attr": v})`` or ``x.__dict__["attr"] = v``."""

    def table(expr: ast.AST) -> bool:
        return (
            isinstance(expr, ast.Call) and getattr(expr.func, "id", "") == "vars"
        ) or (isinstance(expr, ast.Attribute) and expr.attr == "__dict__")

    def named(expr: ast.AST | None) -> bool:
        return isinstance(expr, ast.Constant) and expr.value == attr

    if isinstance(node, ast.Call):
        func = node.func
        if getattr(func, "id", "") == "setattr" and len(node.args) >= 2:
            return named(node.args[1])
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "update"
            and table(func.value)
        ):
            keys = [k.arg for k in node.keywords]
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    keys += [k.value for k in arg.keys if isinstance(k, ast.Constant)]
            return attr in keys
    if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
        return table(node.value) and named(node.slice)
    return False


def _outside_other_classes(root: ast.AST, cls: ast.ClassDef) -> Iterator[ast.AST]:
    """The nodes of ``root`` but another class's own ``self.x`` writes: its
    ``self.size_average`` is its instances' setting, not ``cls``'s."""
    todo: list[tuple[ast.AST, bool]] = [(root, False)]
    while todo:
        node, other = todo.pop()
        if (
            other
            and isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            continue
        yield node
        inside = other or (isinstance(node, ast.ClassDef) and node is not cls)
        todo.extend((child, inside) for child in ast.iter_child_nodes(node))


def _parameter(
    init: ast.FunctionDef | ast.AsyncFunctionDef, attr: str, name: str
) -> Setting | None:
    rebound = any(
        isinstance(node, ast.Name)
        and node.id == name
        and not isinstance(node.ctx, ast.Load)
        for node in _own_nodes(init)
    )
    if rebound:
        return None
    args = init.args
    positional = [*args.posonlyargs, *args.args][1:]  # after self
    defaults: list[ast.expr | None] = [None] * (
        len(positional) - len(args.defaults)
    ) + list(args.defaults)
    for position, arg in enumerate(positional):
        if arg.arg == name:
            return _with_default(attr, name, position, defaults[position])
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if arg.arg == name:
            return _with_default(attr, name, -1, default)
    return None  # a name of the class or module body: not read


def _with_default(
    attr: str, name: str, position: int, default: ast.expr | None
) -> Setting:
    if default is None:
        return Setting(attr, name, position, _NO_DEFAULT)
    literal = _literal(default)
    if literal is _NOT_LITERAL:
        return Setting(attr, name, position, _UNREAD_DEFAULT)
    return Setting(attr, name, position, "value", literal)
