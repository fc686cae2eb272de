"""Parity under FSDP and mixed precision, world 2 over gloo, against the fp32
original on one process. Tolerances (relative, per step and on final parameters)
are documented in docs/runtime.md#precision-and-tolerances."""

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


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    runs = {}
    for name in {case[0] for case in CASES}:
        workdir = tmp_path_factory.mktemp(name)
        script: Path = PARITY / f"{name}.py"
        runs[name] = (
            run_original(script, workdir),
            migrate_to(script, workdir),
            workdir,
        )
    return runs


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: "-".join(c))
def test_parity(case: tuple[str, str, str], originals: dict[str, tuple]) -> None:
    name, strategy, precision = case
    loss_tolerance, parameter_tolerance = CASES[case]
    original, migrated, workdir = originals[name]
    run = run_launched(
        migrated, workdir, 2, launch=("--strategy", strategy, "--precision", precision)
    )
    errors = relative_errors(original.losses, run.losses)
    worst = max(errors)
    assert (
        worst < loss_tolerance
    ), f"step {errors.index(worst)}: relative error {worst:.2e}"
    assert max_parameter_error(original.state, run.state) < parameter_tolerance
