"""The static audit of the corpus (``audit.py``): how it reads the table's rows
and what it calls a mismatch (no case is migrated or run here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .audit import Row, Static, mismatches, predicted, read_rows
from .cases import Case, discover


def _case(causes: tuple[str, ...] = ()) -> Case:
    return Case("demo", Path("demo.py"), "a shape", causes=causes)


def _static(changed: bool, codes: tuple[str, ...], named=None, info=()) -> Static:
    return Static(changed, codes, codes if named is None else named, "d", info=info)


def test_every_case_has_a_row() -> None:
    rows = read_rows()
    assert {c.name for c in discover()} <= set(rows)


def test_a_row_names_its_last_needs_review_codes() -> None:
    row = Row(
        "SILENT", "left unmigrated; nothing names it (needs-review AM009, AM004 only)"
    )
    assert row.codes == ("AM004", "AM009")
    assert row.whole
    assert Row("LOUD", "ShardingError: x").codes == ()


def test_a_file_now_left_whole_is_predicted_without_a_run() -> None:
    row = Row("FLAGGED", "loss step 1 rel 1e-01; needs-review AM009")
    case = _case(("AM020",))
    now = _static(False, ("AM004", "AM028"), named=())
    assert "whole" in mismatches(case, row, now)
    assert predicted(case, now) == (
        "SILENT",
        "left unmigrated; nothing names it (needs-review AM004, AM028 only)",
    )


def test_a_flagged_row_with_no_finding_of_its_cause_is_uncaused() -> None:
    row = Row("FLAGGED", "loss step 1 rel 1e-01; needs-review AM020")
    assert mismatches(_case(("AM020",)), row, _static(True, ("AM009",), ())) == [
        "uncaused",
        "codes",
    ]
    stochastic = Row("FLAGGED", "x; info AM027: stochastic layers only (...)")
    assert mismatches(_case(), stochastic, _static(True, (), info=("AM027",))) == []


def test_codes_listed_beyond_the_cause_are_a_listing() -> None:
    row = Row("FLAGGED", "left unmigrated; needs-review AM004, AM020")
    now = _static(False, ("AM004", "AM020"), named=("AM020",))
    assert mismatches(_case(("AM020",)), row, now) == ["listing"]
    assert mismatches(_case(("AM020",)), row, now, {"digest": "other"}) == [
        "listing",
        "output",
    ]


def test_a_tensor_held_at_zero_is_measured_against_the_floor() -> None:
    """A bias before a BatchNorm stays at rounding noise (1e-9): divided by its
    own largest entry, a change of its own size read "rel 2.2e+00" with every
    loss equal. Measured against ``PARAMETER_FLOOR`` it is no difference; a
    tensor of ordinary size, or a real change of a small one, still is."""
    import torch

    from tests.parity.harness import Run

    from .corpus import FP32_TOLERANCE, _parameter_differences, parameter_error

    def run(**state: torch.Tensor) -> Run:
        return Run(stdout="", losses=[], state=state)

    bias = torch.tensor([1e-9, -2e-9])
    weight = torch.tensor([0.5, -0.25])
    noise = {"bias": bias, "weight": weight}
    assert parameter_error(bias, bias * -1.2) == pytest.approx(4.4e-6)
    assert not _parameter_differences(
        run(**noise), run(bias=-1.2 * bias, weight=weight), FP32_TOLERANCE
    )
    moved = run(bias=bias + 1e-6, weight=weight)
    assert _parameter_differences(run(**noise), moved, FP32_TOLERANCE) == [
        "param bias rel 1.0e-03"
    ]
    changed = run(bias=bias, weight=weight * (1 + 1e-4))
    assert _parameter_differences(run(**noise), changed, FP32_TOLERANCE) == [
        "param weight rel 1.0e-04"
    ]
