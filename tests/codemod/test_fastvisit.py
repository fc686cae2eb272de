"""The read-only visit (``fastvisit``) makes every callback libcst's visit makes, in
the same order, and libcst's analyses give the same answers through it."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import (
    ExpressionContextProvider,
    MetadataWrapper,
    QualifiedNameProvider,
    ScopeProvider,
)

from accel_migrate.codemod import fastvisit
from tests.conftest import FIXTURES, ROOT

#: Every other real-world fixture and every sixth soundness script (16 files:
#: a few seconds of CPU in all).
SOURCES = (
    sorted((FIXTURES / "realworld").glob("*.py"))[::2]
    + sorted((FIXTURES / "soundness").glob("*.py"))[::6]
)

#: Node kinds the fixtures may not have: f-string format specs (libcst skips
#: their callbacks when absent), match, star imports, lambdas, walrus, decorators.
SYNTHETIC = """
from os import *
from . import a as b, c
import x.y as z
@deco(1)
class A(B, metaclass=M):
    x: int = 1
    def f(self, a, /, b=2, *c, d, **e) -> None:
        global g
        nonlocal_ = [i for i in range(3) if i]
        y = {k: v for k, v in e.items()}
        s = f"{a!r:>{b}} {c=} {d:.2f} {{}}"
        t = (lambda q, *r: q)(1)
        if (n := len(c)) > 1:
            del y[0]
        try:
            pass
        except* ValueError as err:
            raise
        async def inner():
            async with u as (v, w):
                await v
            async for p in w:
                yield p
        match a:
            case [1, *rest] | {"k": _, **kw}:
                pass
            case Point(x=0) as pt if pt:
                pass
        return s; print(t, sep="")
x = a if b else c
x[1:2, ::3] += ~-1 ** 2 @ m
assert x, "m"
with open(p) as f, g: pass
while x: break
else: continue
"""


class _Everything(cst.CSTVisitor):
    """Records every callback (custom on_* methods: libcst's dispatch is bypassed)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int, str]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node), ""))
        # Skipping some children checks that ``False`` stops the walk.
        return not isinstance(node, cst.Lambda)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node), ""))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("visit_attr", id(node), attribute))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("leave_attr", id(original_node), attribute))


class _Hooks(cst.CSTVisitor):
    """libcst's default dispatch: named hooks, one attribute hook, a False visit."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.events.append(("name", id(node)))

    def visit_Call(self, node: cst.Call) -> bool:
        self.events.append(("call", id(node)))
        return len(node.args) != 1  # a one-argument call's children are skipped

    def visit_Call_func(self, node: cst.Call) -> None:
        self.events.append(("func", id(node)))

    def leave_Call_args(self, node: cst.Call) -> None:
        self.events.append(("args", id(node)))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.events.append(("def", id(node)))


def _modules() -> list[tuple[str, cst.Module]]:
    found = [("synthetic", cst.parse_module(SYNTHETIC))]
    found += [(p.name, cst.parse_module(p.read_bytes())) for p in SOURCES]
    return found


def _events(module: cst.Module, visitor_class: type, fast: bool) -> list:
    if fast:
        fastvisit.install()
    else:
        fastvisit.uninstall()
    try:
        visitor = visitor_class()
        assert module.visit(visitor) is module
        return visitor.events
    finally:
        fastvisit.install()


@pytest.mark.parametrize("visitor_class", [_Everything, _Hooks])
def test_same_callbacks_as_libcst(visitor_class: type) -> None:
    for name, module in _modules():
        expected = _events(module, visitor_class, fast=False)
        assert expected, name
        assert _events(module, visitor_class, fast=True) == expected, name


def _answers(module: cst.Module, fast: bool) -> list:
    """libcst's scopes, expression contexts and qualified names, as comparable data."""
    if fast:
        fastvisit.install()
    else:
        fastvisit.uninstall()
    try:
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        scopes = wrapper.resolve(ScopeProvider)
        contexts = wrapper.resolve(ExpressionContextProvider)
        names = wrapper.resolve(QualifiedNameProvider)
    finally:
        fastvisit.install()
    answers = []
    for node, scope in scopes.items():
        answers.append((id(node), id(scope), str(contexts.get(node))))
        qualified = names.get(node)
        if callable(qualified):  # libcst's LazyValue
            qualified = qualified()
        if qualified is not None:
            answers.append(sorted((q.name, str(q.source)) for q in qualified))
    for scope in dict.fromkeys(s for s in scopes.values() if s is not None):
        answers.append(
            (
                type(scope).__name__,
                sorted(
                    (a.name, id(a.node)) for a in scope.assignments  # type: ignore[attr-defined]
                ),
                sorted((a.node.value, id(a.node)) for a in scope.accesses),
            )
        )
    return answers


def test_same_scopes_as_libcst() -> None:
    for name, module in _modules()[:5]:
        expected = _answers(module, fast=False)
        found = _answers(module, fast=True)
        # Scope objects are new each time: compare everything but their ids.
        assert len(found) == len(expected) > 0, name
        assert [_without_scope_ids(a) for a in found] == [
            _without_scope_ids(a) for a in expected
        ], name


def _without_scope_ids(answer: object) -> object:
    if isinstance(answer, tuple) and len(answer) == 3 and isinstance(answer[1], int):
        return (answer[0], answer[2])
    return answer


def test_installed_by_the_engine() -> None:
    import accel_migrate.codemod.engine  # noqa: F401

    assert cst.CSTNode.visit is fastvisit._visit
    assert Path(fastvisit.__file__).parent == ROOT / "accel_migrate" / "codemod"


class _Batched(cst.BatchableCSTVisitor):
    """Batched hooks as libcst's providers have them: node and attribute hooks."""

    def __init__(self, events: list[tuple[str, int]], tag: str) -> None:
        super().__init__()
        self.events = events
        self.tag = tag

    def _log(self, what: str, node: cst.CSTNode) -> None:
        self.events.append((f"{self.tag}:{what}", id(node)))

    def visit_Name(self, node: cst.Name) -> None:
        self._log("name", node)

    def visit_Call(self, node: cst.Call) -> bool:
        self._log("call", node)
        return False  # ignored by a batched visit: the children are still visited

    def visit_Call_func(self, node: cst.Call) -> None:
        self._log("func", node)

    def leave_Call_args(self, node: cst.Call) -> None:
        self._log("args", node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._log("def", node)

    def visit_FormattedStringExpression(
        self, node: cst.FormattedStringExpression
    ) -> None:
        self._log("fexpr", node)


def _batched_events(module: cst.Module, fast: bool) -> list[tuple[str, int]]:
    (fastvisit.install if fast else fastvisit.uninstall)()
    try:
        events: list[tuple[str, int]] = []
        cst.visit_batched(module, [_Batched(events, "a"), _Batched(events, "b")])
        return events
    finally:
        fastvisit.install()


def test_same_batched_callbacks_as_libcst() -> None:
    """The batched walk (libcst's metadata providers) calls every visitor's
    hooks in libcst's order: two visitors, node and attribute hooks, a visit
    hook's False ignored, the f-string nodes libcst's own path visits."""
    for name, module in _modules():
        expected = _batched_events(module, fast=False)
        assert expected, name
        assert _batched_events(module, fast=True) == expected, name


class _FewHooks(cst.CSTVisitor):
    """Hooks for two node classes, no attribute hooks: subtrees are skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def visit_Call(self, node: cst.Call) -> bool:
        self.events.append(("call", id(node)))
        return len(node.args) != 1

    def leave_Subscript(self, node: cst.Subscript) -> None:
        self.events.append(("subscript", id(node)))


def test_pruned_walk_makes_the_same_callbacks() -> None:
    from accel_migrate.codemod import node_kinds

    dispatch = fastvisit._Dispatch(_FewHooks)
    assert dispatch.hooked is not None
    assert not dispatch.hooked & node_kinds.BITS[cst.Name]
    assert fastvisit._Dispatch(_Hooks).hooked is None  # attribute hooks
    for name, module in _modules():
        expected = _events(module, _FewHooks, fast=False)
        with node_kinds.keep():
            assert _events(module, _FewHooks, fast=True) == expected, name
            assert node_kinds.mask_of(module, fastvisit._fields) & dispatch.hooked
