"""No double scaling: a script with its own AMP (autocast + GradScaler + unscale_ +
clipping), migrated, trains under ``--precision fp16`` like the original did with
its GradScaler.

The fixture (fixtures/parity/amp_loop.py) runs float16 autocast with loss scaling
on the CPU with ``--amp --amp-dtype float16``. Before AM013-AM015 the migrated
script kept torch's GradScaler on top of the runtime's loss scaling: a scale of
2**32 overflowed and 15 of the first 16 steps were skipped.
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

SCRIPT = FIXTURES / "parity" / "amp_loop.py"
FP16 = ("--amp", "--amp-dtype", "float16")
#: Against the original's own fp16 run (same casts, the batch split across ranks).
FP16_VS_AMP = 1e-3
#: Against the fp32 original: docs/runtime.md, fp16.
FP16_VS_FP32 = 1e-2


@pytest.fixture(scope="module")
def amp(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    workdir: Path = tmp_path_factory.mktemp("amp_loop")
    migrated = migrate_to(SCRIPT, workdir)
    return (
        run_original(SCRIPT, workdir),
        run_original(SCRIPT, workdir, *FP16),
        migrated,
        workdir,
    )


def test_world_1_fp16_is_the_original_amp_run(amp: tuple) -> None:
    _, original_fp16, migrated, workdir = amp
    run = run_launched(migrated, workdir, 1, *FP16, launch=("--precision", "fp16"))
    assert max(relative_errors(original_fp16.losses, run.losses)) <= 1e-6
    assert max_parameter_error(original_fp16.state, run.state) <= 1e-6


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_world_2_fp16(amp: tuple, strategy: str) -> None:
    original_fp32, original_fp16, migrated, workdir = amp
    run = run_launched(
        migrated,
        workdir,
        2,
        *FP16,
        launch=("--strategy", strategy, "--precision", "fp16"),
    )
    for original, tolerance in (
        (original_fp16, FP16_VS_AMP),
        (original_fp32, FP16_VS_FP32),
    ):
        errors = relative_errors(original.losses, run.losses)
        worst = max(errors)
        assert (
            worst < tolerance
        ), f"step {errors.index(worst)}: relative error {worst:.2e}"
        assert max_parameter_error(original.state, run.state) < tolerance
