"""The shared preorder (``subtrees``) answers what the walks it replaces answer:
``matchers.findall``, ``analysis.variable_names`` and ``_nodes_run_by``, node for
node and in the same order, also after a rule changed the tree (shared subtrees)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest

from accel_migrate.codemod import analysis, engine, subtrees
from tests.codemod.test_fastvisit import SYNTHETIC
from tests.conftest import FIXTURES

SOURCES = (
    sorted((FIXTURES / "realworld").glob("*.py"))[::3]
    + sorted((FIXTURES / "soundness").glob("*.py"))[::9]
)

#: The matcher shapes the rules use: a class, a union, fields, nested fields.
MATCHERS = (
    m.Call(),
    m.Name(),
    m.Return(),
    m.Name() | m.Attribute(),
    m.Assign() | m.AugAssign() | m.AnnAssign(),
    m.Name("x"),
    m.Arg(keyword=m.Name("reduction")),
    m.Call(func=m.Attribute(attr=m.Name("mean") | m.Name("var"))),
    m.AssignTarget(target=m.Subscript()),
    m.Subscript(value=m.Attribute(attr=m.Name("shape"))),
)


def _ids(nodes: object) -> list[int]:
    return [id(n) for n in nodes]  # type: ignore[attr-defined]


def _old_variable_names(node: cst.CSTNode) -> list[cst.Name]:
    walk = analysis._VariableNames()
    node.visit(walk)
    return walk.found


def _old_run_by(node: cst.CSTNode) -> list[cst.CSTNode]:
    walk = analysis._RunBy(node)
    node.visit(walk)
    return walk.found


@contextmanager
def _registered(*trees: cst.Module) -> Iterator[None]:
    subtrees.clear()
    for tree in trees:
        subtrees.register(tree)
    try:
        yield
    finally:
        subtrees.clear()


def _check_every_node(module: cst.Module, step: int = 1) -> int:
    preorder = subtrees.preorder_of(module)
    assert preorder is not None
    checked = 0
    for node in preorder.order[::step]:
        for matcher in MATCHERS:
            expected = m.findall(node, matcher)
            assert _ids(subtrees.findall(node, matcher)) == _ids(expected), matcher
        assert _ids(subtrees.variable_names(node)) == _ids(_old_variable_names(node))
        assert _ids(subtrees.nodes_run_by(node)) == _ids(_old_run_by(node))
        checked += 1
    return checked


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_same_answers_as_the_walks(path: Path) -> None:
    module = cst.parse_module(path.read_bytes())
    with _registered(module):
        assert _check_every_node(module, step=5) > 50


def test_same_answers_on_rare_nodes() -> None:
    module = cst.parse_module(SYNTHETIC)
    with _registered(module):
        assert _check_every_node(module) > 200


class _Rename(cst.CSTTransformer):
    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return (
            updated_node.with_changes(value="y")
            if updated_node.value == "x"
            else updated_node
        )


def test_a_changed_tree_and_shared_subtrees() -> None:
    """After a pass that changed the tree, nodes of both trees are answered (from
    whichever preorder holds them), a node no tree holds by the walk itself."""
    from accel_migrate.codemod import fasttransform

    before = cst.parse_module("def f(a):\n    x = a.b(c=1)\n    return x\nz = f(2)\n")
    after, changed = fasttransform.transform(before, _Rename())
    assert changed
    shared = after.body[1]
    assert shared is before.body[1]  # z = f(2): not rebuilt
    with _registered(before, after):
        for tree in (before, after):
            assert _check_every_node(tree) > 10
    built = cst.parse_expression("g(x, k=y.z)")
    with _registered(after):
        assert subtrees.preorder_of(built) is None
        assert _ids(subtrees.findall(built, m.Name())) == _ids(
            m.findall(built, m.Name())
        )
        assert subtrees.variable_names(built) is None
        assert _ids(analysis.variable_names(built)) == _ids(_old_variable_names(built))


def test_findall_keeps_the_walk_for_matchers_it_cannot_read() -> None:
    module = cst.parse_module("a = b(c)\nd = e.f\n")
    odd = m.MatchIfTrue(lambda n: isinstance(n, cst.Name) and n.value in "ce")
    with _registered(module):
        assert [n.value for n in subtrees.findall(module, odd)] == ["c", "e"]  # type: ignore[attr-defined]
        assert subtrees.findall(cst.RemovalSentinel.REMOVE, m.Name()) == []


def test_only_a_few_trees_are_kept() -> None:
    trees = [cst.parse_module(f"x{i} = {i}\n") for i in range(subtrees._KEPT + 2)]
    with _registered(*trees):
        assert subtrees.preorder_of(trees[0].body[0]) is None
        assert subtrees.preorder_of(trees[-1].body[0]) is not None


FULL_PASS_SOURCES = sorted(FIXTURES.glob("*/*.in.py"))[::4] + sorted(
    (FIXTURES / "realworld").glob("*.py")
)


@pytest.mark.parametrize(
    "path", FULL_PASS_SOURCES, ids=lambda p: str(p.relative_to(FIXTURES))
)
def test_a_preorder_copied_from_the_tree_before_is_a_whole_walks(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every preorder a full pass builds from an earlier tree's (its shared
    subtrees copied, not walked) equals the one a whole walk of the tree gives:
    the same nodes in the same order, subtree ends, node classes and names that
    are no variables."""
    real = subtrees.Preorder.__init__
    copied = []

    def build(
        self: subtrees.Preorder,
        root: cst.CSTNode,
        previous: subtrees.Preorder | None = None,
    ) -> None:
        real(self, root, previous)
        if previous is None:
            return
        whole = subtrees.Preorder.__new__(subtrees.Preorder)
        real(whole, root, None)
        assert _ids(self.order) == _ids(whole.order)
        assert self.end == whole.end
        assert self.by_kind == whole.by_kind
        assert {id(n) for n in self.not_variables} == {
            id(n) for n in whole.not_variables
        }
        assert {id(n): i for n, i in self.position.items()} == {
            id(n): i for n, i in whole.position.items()
        }
        copied.append(root)

    monkeypatch.setattr(subtrees.Preorder, "__init__", build)
    result = engine.migrate_source(path.read_bytes(), str(path))
    if result.changed:  # a changed tree's preorder was made from the one before
        assert copied
