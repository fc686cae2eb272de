"""``--fsdp-cpu-offload`` on a GPU: FSDP2's ``CPUOffloadPolicy`` (pinned host
shards, the optimizer stepping on the CPU, a ``cpu:gloo,cuda:nccl`` process
group for the collectives on those shards). Skipped, with the reason, where
CUDA is missing; bench/gpu_check.sh runs it. amp_loop clips its gradients (the
norm of CPU shards) and every run saves a full state dict (gathered from them).
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

SCRIPTS = [
    FIXTURES / "parity" / "mlp_regression.py",
    FIXTURES / "parity" / "amp_loop.py",
]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
@pytest.mark.parametrize(("precision", "tolerance"), [("fp32", 1e-5), ("bf16", 5e-2)])
def test_fsdp_cpu_offload_matches_the_original(
    script, precision, tolerance, tmp_path
) -> None:
    original = run_original(script, tmp_path)
    migrated = migrate_to(script, tmp_path)
    run = run_launched(
        migrated,
        tmp_path,
        min(2, torch.cuda.device_count()),
        launch=("--strategy", "fsdp", "--precision", precision, "--fsdp-cpu-offload"),
    )
    errors = relative_errors(original.losses, run.losses)
    assert (
        max(errors) < tolerance
    ), f"step {errors.index(max(errors))}: {max(errors):.2e}"
    assert max_parameter_error(original.state, run.state) < max(tolerance, 1e-4)
