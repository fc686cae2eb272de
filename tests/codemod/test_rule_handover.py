"""A rule that leaves a case to a later rule still reports it when that rule does
not run (``--ignore``/``--select``): nothing is dropped silently."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod.engine import MigrateOptions, migrate_source

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "collected_outputs"


def _review(options: MigrateOptions) -> set[tuple[int, str]]:
    source = (FIXTURES / "cat_predictions.in.py").read_text()
    result = migrate_source(source, "cat_predictions.py", options)
    return {(f.line, f.code) for f in result.findings if f.status == "needs-review"}


def test_collected_outputs_are_reported_when_am029_is_ignored() -> None:
    review = _review(MigrateOptions(ignore=frozenset({"AM029"})))
    assert {(31, "AM009"), (32, "AM009")} <= review


def test_with_am029_selected_they_are_its_to_gather() -> None:
    assert not {line for line, code in _review(MigrateOptions()) if code == "AM009"}
