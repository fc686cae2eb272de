"""GPU paths: NCCL and CUDA devices. Skipped, with the reason, where CUDA is missing.

Run them with bench/gpu_check.sh on a CUDA machine. With one GPU the jobs use one
process per GPU (world 1, NCCL); with two or more, world 2.
"""

from __future__ import annotations

import pytest
import torch

from tests.conftest import FIXTURES
from tests.parity.harness import (
    max_parameter_error,
    migrate_to,
    relative_errors,
    run_launched,
    run_original,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device (NCCL); none here"
    ),
]

SCRIPTS = sorted((FIXTURES / "parity").glob("*.py"))
CONFIGS = [
    ("ddp", "fp32", 1e-5),
    ("fsdp", "fp32", 1e-5),
    ("ddp", "bf16", 5e-2),
    ("fsdp", "bf16", 5e-2),
    ("ddp", "fp16", 5e-2),
]


def _world() -> int:
    return min(2, torch.cuda.device_count())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c[0]}-{c[1]}")
def test_gpu_parity(script, config, tmp_path) -> None:
    strategy, precision, tolerance = config
    original = run_original(script, tmp_path)
    migrated = migrate_to(script, tmp_path)
    run = run_launched(
        migrated,
        tmp_path,
        _world(),
        launch=("--strategy", strategy, "--precision", precision),
    )
    errors = relative_errors(original.losses, run.losses)
    assert (
        max(errors) < tolerance
    ), f"step {errors.index(max(errors))}: {max(errors):.2e}"
    assert max_parameter_error(original.state, run.state) < max(tolerance, 1e-4)


def test_device_is_the_local_gpu() -> None:
    import accel_migrate.runtime as accel

    assert accel.device().type == "cuda"
