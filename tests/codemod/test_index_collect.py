"""The module index's lists from the tree's preorder (``index_collect.
FROM_PREORDER``; round 24 of issue 14 in docs/performance.md).

``collect`` hands the collector's callbacks the nodes of their classes from
the tree's ``subtrees.Preorder`` instead of visiting the tree. For every index
a pass makes over a sample (every realworld script and every sixtieth other
file under ``fixtures/`` and ``examples/``; ``ACCEL_MIGRATE_ALL_COLLECTS=1``:
every file), the lists it collects must be a visit's, in the same order (the
assignments' values per variable, the unpacked sources, the functions,
classes, calls and loops, the match captures, the star import); and the
migration of the sample with the visit (output bytes, findings with lines and
columns, skip reason, suppressed statements) the same.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from accel_migrate.codemod import analysis, index_collect
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_COLLECTS")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::60]
)


def _outcome(path: Path) -> tuple[Any, ...]:
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    return (
        result.output,
        tuple((f.line, f.column, f.code, f.status, f.message) for f in result.findings),
        result.skip_reason,
        result.suppressed,
    )


def _lists(collector: index_collect._Collector) -> tuple[Any, ...]:
    def ids(items: Any) -> Any:
        return [
            (
                tuple(id(x) if isinstance(x, cst.CSTNode) else x for x in item)
                if isinstance(item, tuple)
                else id(item)
            )
            for item in items
        ]

    return (
        [(key, ids(values)) for key, values in collector.values.items()],
        [(key, ids(sources)) for key, sources in collector.unpacked.items()],
        ids(collector.functions),
        ids(collector.classes),
        ids(collector.calls),
        ids(collector.for_loops),
        collector.match_captures,
        collector.star_import,
    )


def test_the_sample_has_training_scripts() -> None:
    assert len(_REALWORLD) >= 10
    assert len(SOURCES) > len(_REALWORLD)


def test_every_collector_callback_is_collected() -> None:
    names = {
        n[len("visit_") :]
        for n in vars(index_collect._Collector)
        if n.startswith("visit_")
    }
    assert set(index_collect._KINDS) == names
    assert {"Assign", "Call", "FunctionDef", "For", "WithItem"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_index_collects_a_visits_lists(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[int] = []
    inner = index_collect.collect

    def spy(index: Any) -> index_collect._Collector:
        visited = index_collect._Collector(index)
        index.module.visit(visited)
        found = inner(index)
        assert _lists(found) == _lists(visited)
        compared.append(len(found.calls))
        return found

    monkeypatch.setattr(analysis, "collect", spy)
    shared = _outcome(path)  # a file left alone may make no index
    monkeypatch.setattr(index_collect, "FROM_PREORDER", False)
    assert _outcome(path) == shared


def test_a_training_script_collects_without_a_visit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A visit dispatches to the class's callback; ``collect`` calls the ones
    # it took from the class at import (``_CALLBACKS``).
    visits: list[int] = []
    inner = index_collect._Collector.visit_Call

    def counted(self: Any, node: cst.Call) -> None:
        visits.append(1)
        inner(self, node)

    monkeypatch.setattr(index_collect._Collector, "visit_Call", counted)
    # fastvisit keeps a visitor class's hooks on the class from its first visit
    # (an earlier test's): dropped, so that a visit finds the counted callback
    monkeypatch.setattr(
        index_collect._Collector, "_fastvisit_dispatch", None, raising=False
    )
    made: list[Any] = []
    inner_collect = index_collect.collect

    def spy(index: Any) -> index_collect._Collector:
        made.append(index)
        return inner_collect(index)

    monkeypatch.setattr(analysis, "collect", spy)
    path = FIXTURES / "realworld" / "batchify.py"
    migrate_source(path.read_bytes(), str(path))
    assert len(made) > 3 and not visits
    monkeypatch.setattr(index_collect, "FROM_PREORDER", False)
    migrate_source(path.read_bytes(), str(path))
    assert visits
