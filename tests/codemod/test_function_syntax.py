"""Facts of a function's own syntax kept across one file's trees
(``function_syntax``; round 26 of issue 14 in docs/performance.md).

The loaders' ``tagged`` fixpoints ask each index for a local function's
returned values and whether it repeats its first parameter's items; the
answers are now kept per ``FunctionDef`` object for the file's later trees.
For every ask a pass makes over a sample (every realworld script and every
sixtieth other file under ``fixtures/`` and ``examples/``;
``ACCEL_MIGRATE_ALL_FUNCTION_SYNTAX=1``: every file), the kept answer must be
a fresh computation's (the same nodes, in the same order); the migration of the
sample (output bytes, findings with lines and columns, skip reason, suppressed
statements) must be the same with ``REUSE`` off; and a training script's later
trees must get kept answers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from accel_migrate.codemod import function_syntax
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from accel_migrate.codemod.function_syntax import FunctionSyntax
from accel_migrate.codemod.index_loaders import repeats_first
from accel_migrate.codemod.index_syntax import _returned_values
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_FUNCTION_SYNTAX")
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


_ORIGINAL = (FunctionSyntax.returned_values, FunctionSyntax.repeats_first)
_COUNTS = {"asks": 0, "kept": 0}


def _returned_checked(self: FunctionSyntax, function: cst.FunctionDef) -> Any:
    _COUNTS["asks"] += 1
    _COUNTS["kept"] += function in self._returned
    found = _ORIGINAL[0](self, function)
    fresh = _returned_values(function)
    assert [id(v) for v in found] == [id(v) for v in fresh]
    return found


def _repeats_checked(self: FunctionSyntax, function: cst.FunctionDef) -> bool:
    _COUNTS["asks"] += 1
    _COUNTS["kept"] += function in self._repeats
    found = _ORIGINAL[1](self, function)
    assert found == repeats_first(function)
    return found


def _check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every answer compared with a fresh computation; the asks counted, and
    those the memo answered (an object asked about before)."""
    monkeypatch.setattr(FunctionSyntax, "returned_values", _returned_checked)
    monkeypatch.setattr(FunctionSyntax, "repeats_first", _repeats_checked)


def test_the_sample_has_training_scripts() -> None:
    assert len(_REALWORLD) >= 10
    assert len(SOURCES) > len(_REALWORLD)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_kept_answers_are_fresh_answers(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(monkeypatch)
    kept = _outcome(path)
    monkeypatch.setattr(function_syntax, "REUSE", False)
    assert _outcome(path) == kept


def test_later_trees_get_kept_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the realworld scripts most asks are answered from the memo: a
    function no rule changed is the same object on the later trees."""
    _check(monkeypatch)
    _COUNTS.update(asks=0, kept=0)
    for path in _REALWORLD:
        _outcome(path)
    assert _COUNTS["asks"] > 0
    assert _COUNTS["kept"] * 2 > _COUNTS["asks"], _COUNTS


def test_a_changed_function_gets_a_fresh_answer() -> None:
    """A rule's change makes a new ``FunctionDef``: its answers are its own."""
    before = cst.parse_module(
        "def cycle(dl):\n    while True:\n        for x in dl:\n            yield x\n"
    ).body[0]
    after = cst.parse_module(
        "def cycle(dl):\n    while True:\n        for x in dl:\n            yield x\n"
        "    return dl\n"
    ).body[0]
    assert isinstance(before, cst.FunctionDef) and isinstance(after, cst.FunctionDef)
    memo = FunctionSyntax()
    assert memo.repeats_first(before) is True
    assert memo.returned_values(before) == []
    assert memo.repeats_first(after) is False
    assert [type(v) for v in memo.returned_values(after)] == [cst.Name]
    assert memo.repeats_first(before) is True  # kept
    assert memo.returned_values(before) is memo.returned_values(before)
