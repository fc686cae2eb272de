"""``isinstance``/``issubclass`` against libcst's node classes in C
(``codemod/class_checks.py``): the same answers as ``ABCMeta``'s, and the same
migrations.

The migration of a sample (every realworld script and every fifteenth other file
under ``fixtures/`` and ``examples/``; ``ACCEL_MIGRATE_ALL_CHECKS=1``: every file)
is compared with ``ABCMeta`` put back: output bytes, findings (lines, columns,
messages), skip reason and suppressed statements.
"""

from __future__ import annotations

import os
from _abc import _get_dump  # type: ignore[import-not-found]
from abc import ABCMeta
from collections.abc import Iterator
from pathlib import Path

import libcst as cst
import pytest

from accel_migrate.codemod import class_checks
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_CHECKS")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::15]
)


@pytest.fixture
def abc_checks() -> Iterator[None]:
    class_checks.uninstall()
    try:
        yield
    finally:
        class_checks.install()


def test_the_engine_installs_it_on_every_node_class() -> None:
    classes = class_checks.node_classes()
    assert len(classes) > 200 and class_checks.installed()
    assert [k.__name__ for k in classes if type(k) is not class_checks._NodeMeta] == []


def test_libcst_registers_no_class_and_defines_no_subclass_hook() -> None:
    # What ABCMeta answers beyond the MRO: registered classes and hooks.
    for kind in class_checks.node_classes():
        assert "__subclasshook__" not in kind.__dict__, kind
        assert not _get_dump(kind)[0], kind  # the classes registered with it


def _samples() -> list[object]:
    module = cst.parse_module(
        "import os\n@d\nclass A(B):\n    x: int = 1\n"
        "async def f(a, *b, c=1, **d):\n"
        "    with open(p) as h, q:\n        return [y async for y in g if y] or {1: 2}\n"
        "try:\n    pass\nexcept* E as e:\n    raise\nmatch v:\n    case [1, *r]: pass\n"
        "print(f'{a!r:>{w}}', *x, sep='')\nz = lambda: (yield)\n"
    )
    nodes: list[object] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    module.visit(Collect())
    return [*nodes, 1, "x", None, cst.MaybeSentinel.DEFAULT, object()]


def test_every_answer_is_abcmetas() -> None:
    classes = class_checks.node_classes()
    samples = _samples()
    assert len({type(s) for s in samples}) > 60
    fast_instance = [[isinstance(s, k) for k in classes] for s in samples]
    fast_subclass = [[issubclass(a, b) for b in classes] for a in classes]
    class_checks.uninstall()
    try:
        assert all(type(k) is ABCMeta for k in classes)
        assert fast_instance == [[isinstance(s, k) for k in classes] for s in samples]
        assert fast_subclass == [[issubclass(a, b) for b in classes] for a in classes]
    finally:
        class_checks.install()
    assert sum(map(sum, fast_instance)) > len(samples)  # not all False


def test_a_class_derived_later_checks_in_c_too() -> None:
    class Derived(cst.Name):
        pass

    node = Derived("x")
    assert type(Derived) is class_checks._NodeMeta
    assert isinstance(node, cst.BaseExpression) and not isinstance(node, cst.Call)


def test_the_checks_are_types_own() -> None:
    # Correct but slow would pass every other test: the point is the C path.
    assert class_checks._NodeMeta.__instancecheck__ is type.__instancecheck__
    assert class_checks._NodeMeta.__subclasscheck__ is type.__subclasscheck__


def test_a_registered_class_puts_abcmeta_back_first() -> None:
    # Another libcst user in the process registers a virtual subclass: the C
    # check reads no registry, so every class goes back to ABCMeta's checks.
    class Foreign:
        pass

    try:
        cst.BaseExpression.register(Foreign)
        assert not class_checks.installed()
        assert isinstance(Foreign(), cst.BaseExpression)
        assert isinstance(Foreign(), cst.CSTNode)  # through its subclass's registry
    finally:
        cst.BaseExpression._abc_registry_clear()
        class_checks.install()
    assert class_checks.installed() and not isinstance(Foreign(), cst.BaseExpression)


def test_a_subclass_hook_defined_later_puts_abcmeta_back_first() -> None:
    try:

        class Hooked(cst.BaseExpression):
            @classmethod
            def __subclasshook__(cls, other: type) -> bool:
                return True if other is int else NotImplemented

        assert type(Hooked) is ABCMeta and not class_checks.installed()
        assert issubclass(int, Hooked) and issubclass(int, cst.BaseExpression)
    finally:
        class_checks.install()
        cst.BaseExpression._abc_caches_clear()
        cst.CSTNode._abc_caches_clear()


def test_uninstall_puts_abcmeta_back(abc_checks: None) -> None:
    assert not class_checks.installed()
    assert type(cst.Name) is ABCMeta and type(cst.BaseExpression) is ABCMeta


def _migrate(path: Path) -> object:
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    return (result.output, result.findings, result.skip_reason, result.suppressed)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_migration_is_the_same_with_abcmetas_checks(path: Path) -> None:
    with_c = _migrate(path)
    class_checks.uninstall()
    try:
        with_abc = _migrate(path)
    finally:
        class_checks.install()
    assert with_c == with_abc
