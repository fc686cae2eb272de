"""libcst's nodes hashed and compared by identity in C (``codemod/identity_hash.py``):
the same relation as libcst's Python methods, and the same migrations.

The migration of a sample (every realworld script and every fifteenth other file
under ``fixtures/`` and ``examples/``; ``ACCEL_MIGRATE_ALL_HASHES=1``: every file)
is compared with libcst's ``__hash__``/``__eq__`` put back: output bytes,
findings (lines, columns, messages), skip reason and suppressed statements.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import libcst as cst
import pytest

from accel_migrate.codemod import identity_hash
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from accel_migrate.codemod.scopes import Scope
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_HASHES")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::15]
)


@pytest.fixture
def python_hashes() -> Iterator[None]:
    identity_hash.uninstall()
    try:
        yield
    finally:
        identity_hash.install()


def test_the_engine_installs_it_on_every_node_class() -> None:
    classes = identity_hash._node_classes()
    assert len(classes) > 200 and identity_hash.installed()
    python = [
        kind.__name__
        for kind in classes
        if kind.__dict__.get("__hash__") is identity_hash._PYTHON_HASH
        or kind.__dict__.get("__eq__") is identity_hash._PYTHON_EQ
    ]
    assert python == []


def test_nodes_are_equal_when_they_are_the_same_object() -> None:
    module = cst.parse_module("x = y = 1\nx = y = 1\n")
    first, second = module.body
    assert first.deep_equals(second)
    assert first != second and not first == second and first == first
    assert hash(first) == hash(first) and len({first, second, first}) == 2
    assert {first: 1}.get(second) is None
    scope, other = Scope.__new__(Scope), Scope.__new__(Scope)
    assert scope == scope and scope != other and len({scope, other, scope}) == 2


def test_uninstall_puts_libcsts_methods_back(python_hashes: None) -> None:
    assert not identity_hash.installed()
    assert cst.Name.__dict__["__hash__"] is identity_hash._PYTHON_HASH
    assert cst.Name.__dict__["__eq__"] is identity_hash._PYTHON_EQ


def _migrate(path: Path) -> object:
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    return (result.output, result.findings, result.skip_reason, result.suppressed)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_migration_is_the_same_with_libcsts_hashes(path: Path) -> None:
    with_c = _migrate(path)
    identity_hash.uninstall()
    try:
        with_python = _migrate(path)
    finally:
        identity_hash.install()
    assert with_c == with_python
