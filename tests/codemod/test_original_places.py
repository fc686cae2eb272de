"""Findings placed from the parsed tree's positions (``RuleContext.original_start``).

A node that a later tree shares with the parsed one (a subtree no rule changed)
is placed where the user wrote it, with no code generated for that tree and no
line map. These tests compare that with the place the line map gives from the
tree's own positions, finding by finding, and check that it saves work."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import positions, rule_context
from accel_migrate.codemod.engine import migrate_source
from tests.conftest import FIXTURES

SOURCES = (
    sorted((FIXTURES / "realworld").glob("*.py"))[::2]
    + sorted((FIXTURES / "soundness").glob("*.py"))[::12]
)


def _through_line_map(
    self: rule_context.RuleContext, wrapper: object, node: object
) -> tuple[int, int]:
    start = self.positions_of(wrapper)[node].start  # type: ignore[arg-type]
    return self.original_place(self.code_of(wrapper), start.line, start.column)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_same_findings_as_through_the_line_map(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = path.read_text()
    fast = migrate_source(source, str(path))
    monkeypatch.setattr(rule_context.RuleContext, "original_start", _through_line_map)
    slow = migrate_source(source, str(path))
    assert fast.findings == slow.findings
    assert fast.output == slow.output


def test_fewer_trees_generated(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    compute = positions.compute

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return compute(*args, **kwargs)

    monkeypatch.setattr(positions, "compute", counted)
    monkeypatch.setattr(rule_context.positions, "compute", counted)
    # Round 23 (r32e) generates each changed tree's code through its positions
    # (one generation, not a `Module.code` beside them): with it, `compute`
    # counts those code generations too. This test is about the places'
    # line-map fallback, so it counts with the code generated on its own.
    monkeypatch.setattr(positions, "SHARED_CODE", False)
    total = {"fast": 0, "slow": 0}
    for path in sorted((FIXTURES / "realworld").glob("*.py")):
        calls.clear()
        result = migrate_source(path.read_text(), str(path))
        assert result.findings
        total["fast"] += len(calls)
    with monkeypatch.context() as patch:
        patch.setattr(rule_context.RuleContext, "original_start", _through_line_map)
        for path in sorted((FIXTURES / "realworld").glob("*.py")):
            calls.clear()
            migrate_source(path.read_text(), str(path))
            total["slow"] += len(calls)
    # Measured: 49 against 136 over the 15 realworld scripts.
    assert total["fast"] * 2 < total["slow"], total
