"""The scope walk reuses top-level statements across a file's trees
(``codemod/scope_reuse.py``); its scopes must be those of a fresh walk.

Every scope mapping a full pass computes is compared with a walk of the same tree
that walks every statement (``scope_reuse.REUSE = False``), as plain data
(``_canonical``): every node's entry, in order, with its scope numbered by first
appearance; per scope its kind, node, name, qualified-name prefix, parent, count
of assignment-like nodes, ``global``/``nonlocal`` names and bindings (name, kind,
node, number, ``as`` name), in order; after the reads are resolved, per scope the
reads of each node (number, name, the bindings each sees) and per binding its
reads. The migration's output, findings, skip reason and suppressed statements
are compared with reuse off too.

The tests take a sample (every realworld script and every fifteenth other file);
``ACCEL_MIGRATE_ALL_REUSE=1`` takes every file under ``fixtures/`` and
``examples/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from accel_migrate.codemod import scope_reuse
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from accel_migrate.codemod.scope_walk import ScopeWalk
from accel_migrate.codemod.scopes import Scope
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_REUSE")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::15]
)


def _canonical(computed: Mapping[cst.CSTNode, Any]) -> list[Any]:
    """The scopes of ``computed`` as plain data: scope and binding objects by
    number, nodes by identity."""
    numbers: dict[Scope, int] = {}
    order: list[Scope] = []

    def number(scope: Scope) -> int:
        if scope not in numbers:
            numbers[scope] = len(order)
            order.append(scope)
        return numbers[scope]

    def binding(b: Any) -> tuple[Any, ...]:
        node = getattr(b, "node", None)
        as_name = getattr(b, "as_name", None)
        return (
            type(b).__name__,
            b.name,
            id(node),
            b._index,
            id(as_name),
            number(b.scope),
        )

    def read(access: Any) -> tuple[Any, ...]:
        return (id(access.node), access._index, access._name, number(access.scope))

    data: list[Any] = [(id(node), number(scope)) for node, scope in computed.items()]
    done = 0
    while done < len(order):  # scopes reached only as parents are numbered too
        scope = order[done]
        done += 1
        data.append(
            (
                type(scope).__name__,
                id(scope.node),
                getattr(scope, "name", None),
                scope._name_prefix,
                number(scope.parent),
                number(scope.globals),
                scope._assignment_count,
                [(n, number(s)) for n, s in scope._overwrites.items()],
                [
                    (name, [binding(b) for b in found])
                    for name, found in scope._assignments.items()
                ],
                [
                    (
                        id(node),
                        [
                            (read(a), [binding(b) for b in a.referents])
                            for a in accesses
                        ],
                    )
                    for node, accesses in scope._accesses_by_node.items()
                ],
                [
                    (binding(b), [read(a) for a in b.references])
                    for found in scope._assignments.values()
                    for b in found
                ],
            )
        )
    return data


def _fresh(module: cst.Module) -> dict[cst.CSTNode, Any]:
    computed: dict[cst.CSTNode, Any] = {}
    scope_reuse.REUSE = False
    try:
        ScopeWalk(computed).run(module)
    finally:
        scope_reuse.REUSE = True
    return computed


def _migrate(path: Path) -> object:
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    return (result.output, result.findings, result.skip_reason, result.suppressed)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_reused_scopes_are_a_fresh_walks(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = ScopeWalk.run

    def checked(self: ScopeWalk, module: cst.Module) -> None:
        run(self, module)
        if scope_reuse.current() is not None:
            assert _canonical(self.computed) == _canonical(_fresh(module)), path

    monkeypatch.setattr(ScopeWalk, "run", checked)
    with_reuse = _migrate(path)
    monkeypatch.setattr(ScopeWalk, "run", run)
    monkeypatch.setattr(scope_reuse, "REUSE", False)
    assert with_reuse == _migrate(path)


def test_statements_are_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Statements are replayed (else the test above compares nothing)."""
    memos: list[scope_reuse.ScopeMemo] = []
    init = scope_reuse.ScopeMemo.__init__

    def kept(self: scope_reuse.ScopeMemo) -> None:
        init(self)
        memos.append(self)

    monkeypatch.setattr(scope_reuse.ScopeMemo, "__init__", kept)
    for path in _REALWORLD:
        migrate_source(path.read_bytes(), str(path))
    reused = sum(memo.reused for memo in memos)
    walked = sum(memo.walked for memo in memos)
    # Measured: most top-level statements of a pass's trees are replays.
    assert reused > 2 * walked, (reused, walked)


_TRICKY = '''\
"""doc"""
import os, torch.nn as nn
from collections import OrderedDict as OD
total = 0
def step(x, *, scale=total):
    global total
    total += x
    def inner():
        nonlocal x
        x = x + [y for y in range(x) if y]
        return lambda z=x: z + total
    return inner
class Model(nn.Module):
    width = 4
    def forward(self, x):
        return [self.width for _ in x]
for i in range(3):
    total = step(i)
if total:
    del total
'''


def test_a_replay_numbers_module_bindings_from_where_it_lands() -> None:
    """A statement inserted above the unchanged ones shifts the module scope's
    numbers (and a read of ``total`` must see the bindings before it): the
    replayed scopes are a fresh walk's, with ``global``/``nonlocal`` writes."""
    module = cst.parse_module(_TRICKY)
    with scope_reuse.per_file() as memo:
        ScopeWalk({}).run(module)
        assert memo.walked > len(module.body) and memo.reused == 0
        extra = cst.parse_statement("total = 1\n")
        changed = module.with_changes(body=[extra, *module.body[:-1]])
        reused: dict[cst.CSTNode, Any] = {}
        ScopeWalk(reused).run(changed)
        assert memo.reused == len(module.body) - 1
    assert _canonical(reused) == _canonical(_fresh(changed))


def test_typing_statements_are_walked() -> None:
    """With a name that may start with ``typing`` bound, the walk asks qualified
    names (``typing.cast``'s string argument is read as an annotation): such
    statements are not replayed."""
    source = "from typing import cast\nx = cast('int', 1)\ndef f(a: 'int'): pass\n"
    module = cst.parse_module(source)
    with scope_reuse.per_file() as memo:
        ScopeWalk({}).run(module)
        ScopeWalk({}).run(module.with_changes(body=module.body[1:]))
    assert memo.reused == 0
