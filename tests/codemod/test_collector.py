"""The garbage collector held back during a migration (``codemod/collector.py``):
the thresholds it sets and puts back, and the same migrations.

The migration of a sample (every realworld script and every sixtieth other file
under ``fixtures/`` and ``examples/``; ``ACCEL_MIGRATE_ALL_COLLECTOR=1``: every
file) is compared with CPython's thresholds and with the collector off: output
bytes, findings (lines, columns, messages), skip reason and suppressed
statements; and with a pass's positions and scopes left to the collector
(``RELEASE = False``, ``RELEASE_SCOPES = False``).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel_migrate.codemod import collector, engine
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_COLLECTOR")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::60]
)


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """CPython's default thresholds for the test, the process's put back after."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield (700, 10, 10)
    finally:
        gc.set_threshold(*saved)


def test_a_migration_raises_the_young_threshold_only(
    thresholds: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = []
    inner = engine._migrate_held

    def spy(*args: object) -> object:
        seen.append(gc.get_threshold())
        return inner(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "_migrate_held", spy)
    migrate_source("import torch\nx = 1\n", "a.py")
    assert seen == [(collector.THRESHOLD, 10, 10)]
    assert gc.get_threshold() == thresholds


def test_the_thresholds_come_back_after_an_error(
    thresholds: tuple[int, int, int],
) -> None:
    with pytest.raises(MigrationError):
        migrate_source("def f(:\n", "broken.py")
    assert gc.get_threshold() == thresholds


def test_nested_and_side_by_side_migrations_put_back_the_first_callers() -> None:
    saved = gc.get_threshold()
    gc.set_threshold(500, 7, 9)
    try:
        entered = threading.Barrier(2)
        release = threading.Event()
        inside = []

        def other() -> None:
            with collector.held_back():
                entered.wait()
                release.wait()
                inside.append(gc.get_threshold())

        thread = threading.Thread(target=other)
        thread.start()
        with collector.held_back():
            entered.wait()
            with collector.held_back():
                assert gc.get_threshold() == (collector.THRESHOLD, 7, 9)
            assert gc.get_threshold() == (collector.THRESHOLD, 7, 9)
        # The other thread is still migrating: its pace stays.
        assert gc.get_threshold() == (collector.THRESHOLD, 7, 9)
        release.set()
        thread.join()
        assert inside == [(collector.THRESHOLD, 7, 9)]
        assert gc.get_threshold() == (500, 7, 9)
    finally:
        gc.set_threshold(*saved)


@pytest.mark.parametrize("first", [0, collector.THRESHOLD * 2])
def test_a_callers_collector_off_or_slower_is_kept(first: int) -> None:
    saved = gc.get_threshold()
    gc.set_threshold(first, 10, 10)
    try:
        with collector.held_back():
            assert gc.get_threshold() == (first, 10, 10)
        assert gc.get_threshold() == (first, 10, 10)
    finally:
        gc.set_threshold(*saved)


def test_disabled_it_leaves_the_thresholds_alone(
    thresholds: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collector, "ENABLED", False)
    with collector.held_back():
        assert gc.get_threshold() == thresholds
    assert gc.get_threshold() == thresholds


def _migrate(path: Path) -> object:
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    return (result.output, result.findings, result.skip_reason, result.suppressed)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_migration_is_the_same_at_every_collector_pace(
    path: Path, thresholds: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    held_back = _migrate(path)
    monkeypatch.setattr(collector, "ENABLED", False)
    at_cpythons_pace = _migrate(path)
    gc.disable()
    try:
        never = _migrate(path)
    finally:
        gc.enable()
    assert held_back == at_cpythons_pace == never
    # the positions and scopes left to the collector (before round 22): the same
    monkeypatch.setattr(collector, "ENABLED", True)
    monkeypatch.setattr(collector, "RELEASE", False)
    monkeypatch.setattr(collector, "RELEASE_SCOPES", False)
    assert _migrate(path) == held_back


def test_a_pass_empties_its_trees_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tree's positions a pass computed are empty after it (freed by
    reference counts), and kept with ``RELEASE = False``."""
    from accel_migrate.codemod import positions

    computed: list[positions.Positions] = []
    compute = positions.compute

    def kept(*args: object, **kwargs: object) -> object:
        found = compute(*args, **kwargs)  # type: ignore[arg-type]
        computed.append(found[0])  # type: ignore[arg-type]
        return found

    monkeypatch.setattr(positions, "compute", kept)
    from accel_migrate.codemod import rule_context

    monkeypatch.setattr(rule_context.positions, "compute", kept)
    path = FIXTURES / "realworld" / "batchify.py"
    result = migrate_source(path.read_bytes(), str(path))
    assert result.changed and len(computed) >= 2
    assert all(len(found) == 0 for found in computed)
    computed.clear()
    monkeypatch.setattr(collector, "RELEASE", False)
    assert migrate_source(path.read_bytes(), str(path)) == result
    assert all(len(found) > 0 for found in computed)


def test_a_pass_empties_its_trees_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scope of every tree a pass made is empty after it (its bindings
    and reads freed by reference counts), and kept with ``RELEASE_SCOPES =
    False``; the results are the same."""
    from accel_migrate.codemod import engine
    from accel_migrate.codemod.scopes import ScopeProvider

    made: list[object] = []
    inner = engine._pass

    def spy(*args: object) -> object:
        made.append(args[-1])  # the pass's list of wrappers
        return inner(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "_pass", spy)

    def scopes() -> list[object]:
        found = []
        for wrapper in made[-1]:  # type: ignore[attr-defined]
            mapping = wrapper._metadata.get(ScopeProvider)
            if mapping is not None:
                found += [s for s in mapping.values() if s is not None]
        return found

    path = FIXTURES / "realworld" / "batchify.py"
    result = migrate_source(path.read_bytes(), str(path))
    assert result.changed and len(made[-1]) >= 3  # type: ignore[arg-type]
    emptied = scopes()
    assert emptied and all(not vars(scope) for scope in emptied)
    monkeypatch.setattr(collector, "RELEASE_SCOPES", False)
    assert migrate_source(path.read_bytes(), str(path)) == result
    kept = scopes()
    assert kept and all(scope.globals is not None for scope in kept)  # type: ignore[attr-defined]
