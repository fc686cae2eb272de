"""``TreeParents`` (codemod/tree_parents.py): after every tree a full pass
changes, the parents it keeps up to date are those of a whole walk, no node
object occurs twice, and the tree's code is the rule's result's code."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from accel_migrate.codemod import tree_parents
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.fasttransform import spec_of
from accel_migrate.codemod.parents import children
from tests.conftest import FIXTURES, ROOT

SOURCES = sorted(FIXTURES.glob("*/*.in.py")) + sorted(
    (ROOT / "fixtures" / "realworld").glob("*.py")
)


def whole_walk(module: cst.Module) -> tuple[dict[cst.CSTNode, cst.CSTNode], int]:
    """Every node's parent (shared leaves left out) and how many node objects
    occur more than once."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    repeated = 0
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in children(node):
            if spec_of(type(child)) == ():
                continue
            if child in parents:
                repeated += 1
                continue
            parents[child] = node
            stack.append(child)
    return parents, repeated


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_parents_after_every_changed_tree(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tree_parents.TreeParents.advance
    checked = []

    def advance(
        self: tree_parents.TreeParents,
        old: cst.Module,
        new: cst.Module,
        computed: dict[cst.CSTNode, cst.CSTNode] | None = None,
    ) -> cst.Module:
        code = new.code
        module = real(self, old, new, computed)
        assert module.code == code  # copies only: the same code
        expected, repeated = whole_walk(module)
        assert repeated == 0
        kept = {n: p for n, p in self.parents.items() if spec_of(type(n)) != ()}
        assert kept.keys() == expected.keys()  # nothing missing, nothing stale
        assert all(kept[n] is p for n, p in expected.items())
        assert tree_parents.known_parents(module) is self.parents
        checked.append(module)
        return module

    monkeypatch.setattr(tree_parents.TreeParents, "advance", advance)
    result = migrate_source(path.read_bytes(), str(path))
    if result.changed:  # some rule changed the tree: the tracker followed it
        assert checked


def test_a_node_placed_twice_gets_a_copy() -> None:
    """A rule that keeps a statement where it was and puts it again elsewhere:
    the second place holds a copy (metadata is keyed by node), and both the
    copy's and the original's parents are right."""
    old = cst.parse_module("x = f(a.b)\ny = 2\n")
    first = old.body[0]
    new = old.with_changes(body=(*old.body, first))
    tracker = tree_parents.TreeParents()
    module = tracker.advance(old, new)
    assert module.code == "x = f(a.b)\ny = 2\nx = f(a.b)\n"
    assert module.body[0] is first and module.body[2] is not first
    assert module.body[2].deep_equals(first)
    expected, repeated = whole_walk(module)
    assert repeated == 0
    assert all(tracker.parents[n] is p for n, p in expected.items())


def test_a_node_inside_a_kept_statement_placed_again_gets_a_copy() -> None:
    old = cst.parse_module("x = f(a.b)\n")
    call = old.body[0].body[0].value  # type: ignore[attr-defined]
    extra = cst.SimpleStatementLine(body=[cst.Expr(call)])
    new = old.with_changes(body=(*old.body, extra))
    tracker = tree_parents.TreeParents()
    module = tracker.advance(old, new)
    assert module.code == "x = f(a.b)\nf(a.b)\n"
    placed = module.body[1].body[0].value  # type: ignore[attr-defined]
    assert placed is not call and placed.deep_equals(call)
    expected, repeated = whole_walk(module)
    assert repeated == 0
    kept = {n: p for n, p in tracker.parents.items() if spec_of(type(n)) != ()}
    assert kept.keys() == expected.keys()


def test_shared_default_nodes_get_their_own_copies() -> None:
    """``cst.Attribute(value, attr)`` shares libcst's default ``Dot()``."""
    old = cst.parse_module("a\nb\n")
    built = [
        cst.SimpleStatementLine(
            body=[cst.Expr(cst.Attribute(value=cst.Name(n), attr=cst.Name("x")))]
        )
        for n in ("a", "b")
    ]
    new = old.with_changes(body=tuple(built))
    tracker = tree_parents.TreeParents()
    module = tracker.advance(old, new)
    assert module.code == "a.x\nb.x\n"
    expected, repeated = whole_walk(module)
    assert repeated == 0
    kept = {n: p for n, p in tracker.parents.items() if spec_of(type(n)) != ()}
    assert kept.keys() == expected.keys()  # the removed statements forgotten
