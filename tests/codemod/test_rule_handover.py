"""A rule that leaves a case to a later rule still reports it when that rule does
not run (``--ignore``/``--select``): nothing is dropped silently."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod.engine import MigrateOptions, migrate_source

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
FIXTURES = ROOT / "collected_outputs"


def _review(
    options: MigrateOptions, path: Path = FIXTURES / "cat_predictions.in.py"
) -> set[tuple[int, str]]:
    result = migrate_source(path.read_text(), path.name, options)
    return {(f.line, f.code) for f in result.findings if f.status == "needs-review"}


MEMORY_BANK = ROOT / "batch_state_writes" / "memory_bank.in.py"


def test_collected_outputs_are_reported_when_am029_is_ignored() -> None:
    review = _review(MigrateOptions(ignore=frozenset({"AM029"})))
    assert {(31, "AM009"), (32, "AM009")} <= review


def test_with_am029_selected_they_are_its_to_gather() -> None:
    assert not {line for line, code in _review(MigrateOptions()) if code == "AM009"}


def test_a_queue_written_from_the_batch_is_am032s_alone() -> None:
    """``queue[:, ptr : ptr + n] = feats.T``: AM032 names the cause (a tensor kept
    across steps), so AM009 does not report the same line as an unknown metric."""
    review = _review(MigrateOptions(), MEMORY_BANK)
    assert (29, "AM032") in review
    assert (29, "AM009") not in review


def test_with_am032_ignored_am009_still_reports_the_queue() -> None:
    review = _review(MigrateOptions(ignore=frozenset({"AM032"})), MEMORY_BANK)
    assert (29, "AM009") in review
