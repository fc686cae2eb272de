"""Parity under FSDP and mixed precision, world 2 over gloo, against the fp32
original on one process. Tolerances (relative, per step and on final parameters)
are documented in docs/runtime.md#precision-and-tolerances.

The launches are independent jobs: one module fixture starts every selected case's,
a few at a time (``parallel_jobs``), and each test checks its own case's result."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, parallel_jobs

from .harness import (
    Run,
    max_parameter_error,
    migrate_to,
    relative_errors,
    run_launched,
    run_original,
)

pytestmark = pytest.mark.multiprocess

PARITY = FIXTURES / "parity"
#: (fixture, strategy, precision) -> (loss tolerance, parameter tolerance)
CASES = {
    ("mlp_regression", "fsdp", "fp32"): (1e-5, 1e-5),
    ("cnn_eval", "fsdp", "fp32"): (1e-5, 1e-5),
    ("function_device", "fsdp", "fp32"): (1e-5, 1e-5),
    # BatchNorm of the global batch (runtime/sync_batchnorm.py) under FSDP.
    ("batchnorm_cnn", "fsdp", "fp32"): (1e-5, 1e-5),
    ("batchnorm_gan", "fsdp", "fp32"): (1e-5, 1e-5),
    ("cnn_eval", "ddp", "bf16"): (5e-2, 5e-2),
    ("cnn_eval", "fsdp", "bf16"): (5e-2, 5e-2),
    # fp16 on a fixture whose gradients never overflow the initial loss scale: a
    # skipped step (normal for fp16) would shift the whole curve by one step.
    ("function_device", "ddp", "fp16"): (1e-2, 1e-2),
    ("function_device", "fsdp", "fp16"): (1e-2, 1e-2),
}


Case = tuple[str, str, str]


def _selected(session: pytest.Session) -> list[Case]:
    """The cases whose test was selected (``-k``); all when none was."""
    chosen = {
        item.callspec.params["case"]
        for item in session.items
        if isinstance(item, pytest.Function)
        and item.module is not None
        and item.module.__name__ == __name__
        and hasattr(item, "callspec")
    }
    return sorted(chosen or CASES)


def _launch(migrated: Path, workdir: Path, case: Case) -> Run | str:
    _, strategy, precision = case
    try:
        return run_launched(
            migrated,
            workdir,
            2,
            launch=("--strategy", strategy, "--precision", precision),
        )
    except (AssertionError, subprocess.TimeoutExpired) as exc:
        return str(exc)  # raised by the case's own test


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[Case, tuple[Run, Run | str]]:
    """Each selected case: (the original's run, the world-2 run or why it failed)."""
    cases = _selected(request.session)
    originals = {}
    for name in sorted({case[0] for case in cases}):
        workdir = tmp_path_factory.mktemp(name)
        script: Path = PARITY / f"{name}.py"
        originals[name] = (
            run_original(script, workdir),
            migrate_to(script, workdir),
            workdir,
        )
    with ThreadPoolExecutor(max_workers=parallel_jobs()) as pool:
        jobs = {
            case: pool.submit(_launch, *originals[case[0]][1:], case) for case in cases
        }
        return {
            case: (originals[case[0]][0], job.result()) for case, job in jobs.items()
        }


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: "-".join(c))
def test_parity(case: Case, runs: dict[Case, tuple[Run, Run | str]]) -> None:
    loss_tolerance, parameter_tolerance = CASES[case]
    original, run = runs[case]
    if isinstance(run, str):
        raise AssertionError(run)
    errors = relative_errors(original.losses, run.losses)
    worst = max(errors)
    assert (
        worst < loss_tolerance
    ), f"step {errors.index(worst)}: relative error {worst:.2e}"
    assert max_parameter_error(original.state, run.state) < parameter_tolerance
