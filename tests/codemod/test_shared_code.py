"""The code a pass asks of a tree, from the generation that gives its positions
(``positions.SHARED_CODE``; round 23 of issue 14 in docs/performance.md).

``ModuleIndex.code`` (the text searches that gate a fact) is the parsed source
for the parsed tree and, for a tree a rule changed, the code generated with its
positions (only its new statements); the parsed tree's ``original_code`` is the
string its first positions were generated with. Each must be the tree's
``Module.code``: checked for every index a pass makes over a sample (every
realworld script and every sixtieth other file under ``fixtures/`` and
``examples/``; ``ACCEL_MIGRATE_ALL_CODES=1``: every file), and the migration
of the sample compared with a whole ``Module.code`` each time: output bytes,
findings (lines, columns, messages), skip reason and suppressed statements.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from accel_migrate.codemod import positions
from accel_migrate.codemod.analysis import ModuleIndex
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from accel_migrate.codemod.rule_context import RuleContext
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_CODES")
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


def test_the_sample_has_training_scripts() -> None:
    assert len(_REALWORLD) >= 10
    assert len(SOURCES) > len(_REALWORLD)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_index_code_is_its_trees_code(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[ModuleIndex] = []
    originals: list[tuple[str, Any]] = []
    inner_index = RuleContext._new_index
    inner_init = RuleContext.__init__

    def spy_index(self: RuleContext, *args: Any) -> ModuleIndex:
        index = inner_index(self, *args)
        made.append(index)
        return index

    def spy_init(self: RuleContext, *args: Any, **kwargs: Any) -> None:
        inner_init(self, *args, **kwargs)
        originals.append((self.original_code, self.original_module))

    monkeypatch.setattr(RuleContext, "_new_index", spy_index)
    monkeypatch.setattr(RuleContext, "__init__", spy_init)
    shared = _outcome(path)
    for code, module in originals:
        assert module is not None and code == module.code
    asked = [index for index in made if "code" in index.__dict__]
    for index in asked:
        assert index.code_source is not None
        assert index.__dict__["code"] == index.module.code
    monkeypatch.setattr(positions, "SHARED_CODE", False)
    assert _outcome(path) == shared


def test_a_changed_trees_code_is_generated_with_its_positions() -> None:
    """The training script's changed trees answer ``index.code`` without a
    ``Module.code`` of their own (the gain measured: one generation, not two)."""
    path = FIXTURES / "realworld" / "batchify.py"
    calls: list[int] = []
    inner = cst.Module.code.fget  # type: ignore[attr-defined]

    def counted(module: cst.Module) -> str:
        calls.append(1)
        return inner(module)  # type: ignore[no-any-return]

    patch = pytest.MonkeyPatch()
    try:
        patch.setattr(cst.Module, "code", property(counted))
        shared = migrate_source(path.read_bytes(), str(path))
        shared_calls = len(calls)
        calls.clear()
        patch.setattr(positions, "SHARED_CODE", False)
        whole = migrate_source(path.read_bytes(), str(path))
    finally:
        patch.undo()
    assert shared.output == whole.output and shared.output != shared.source
    assert shared.findings == whole.findings
    assert shared_calls < len(calls)
