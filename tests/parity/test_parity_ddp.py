"""Parity, Fabric-style: each runnable fixture trains as the original on one process
and migrated at world 1 and world 2 (DDP over gloo), on the same seeds.

World 1 must print identical losses and end with identical parameters; world 2
must agree within 1e-5 relative error at every step and in the final parameters.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES

from .harness import (
    max_parameter_error,
    migrate_to,
    relative_errors,
    run_launched,
    run_original,
)

pytestmark = pytest.mark.multiprocess

SCRIPTS = sorted((FIXTURES / "parity").glob("*.py"))
FP32_TOLERANCE = 1e-5


@pytest.fixture(scope="module", params=SCRIPTS, ids=lambda p: p.stem)
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    script: Path = request.param
    workdir = tmp_path_factory.mktemp(script.stem)
    migrated = migrate_to(script, workdir)
    original = run_original(script, workdir)
    return (
        original,
        run_launched(migrated, workdir, 1),
        run_launched(migrated, workdir, 2),
    )


def test_world_1_is_identical(runs) -> None:
    original, world1, _ = runs
    assert world1.losses == original.losses
    assert max_parameter_error(original.state, world1.state) == 0.0


def test_world_2_matches_per_step(runs) -> None:
    original, _, world2 = runs
    errors = relative_errors(original.losses, world2.losses)
    worst = max(errors)
    assert (
        worst < FP32_TOLERANCE
    ), f"step {errors.index(worst)}: relative error {worst:.2e}"


def test_world_2_final_parameters(runs) -> None:
    original, _, world2 = runs
    assert max_parameter_error(original.state, world2.state) < FP32_TOLERANCE


def test_world_2_prints_once_and_evaluates_the_same(runs) -> None:
    original, _, world2 = runs
    assert len(world2.losses) == len(
        original.losses
    ), "every step printed once, by the main process"
    assert world2.lines("test ") == original.lines("test ") or _close_eval(
        original, world2
    )


def _close_eval(original, world2) -> bool:
    """Evaluation lines equal up to the last printed digit of the loss."""
    before, after = original.lines("test "), world2.lines("test ")
    if len(before) != len(after):
        return False
    for b, a in zip(before, after, strict=True):
        b_words, a_words = b.split(), a.split()
        if [w for i, w in enumerate(b_words) if i != 2] != [
            w for i, w in enumerate(a_words) if i != 2
        ]:
            return False
        if abs(float(b_words[2]) - float(a_words[2])) > FP32_TOLERANCE * abs(
            float(b_words[2])
        ):
            return False
    return True
