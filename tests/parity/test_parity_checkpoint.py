"""Checkpoints across the DataParallel removal, world 2 over gloo: the migrated
script resumes from a checkpoint the original wrote with nn.DataParallel's
``module.`` keys, and its checkpoints resume the original: the script wraps its
model in DataParallel on every run, so AM003 writes
``accel.state_dict(model, prefix="module.")``, the original's keys
(``data_parallel_keys``)."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import FIXTURES

from .harness import (
    max_parameter_error,
    migrate_to,
    relative_errors,
    run_launched,
    run_original,
)

pytestmark = pytest.mark.multiprocess

SCRIPT = FIXTURES / "parity" / "data_parallel_resume.py"
TOLERANCE = 1e-5


def test_resume_from_the_originals_data_parallel_checkpoint(tmp_path) -> None:
    checkpoint = tmp_path / "original.ckpt"
    run_original(SCRIPT, tmp_path, "--save", str(checkpoint))
    keys = list(torch.load(checkpoint)["model"])
    assert keys and all(key.startswith("module.") for key in keys), keys
    resumed = run_original(SCRIPT, tmp_path, "--resume", str(checkpoint), "--seed", "1")
    migrated = migrate_to(SCRIPT, tmp_path)
    run = run_launched(
        migrated, tmp_path, 2, "--resume", str(checkpoint), "--seed", "1"
    )
    assert max(relative_errors(resumed.losses, run.losses)) < TOLERANCE
    assert max_parameter_error(resumed.state, run.state) < TOLERANCE


def test_the_original_resumes_from_the_migrated_scripts_checkpoint(tmp_path) -> None:
    migrated = migrate_to(SCRIPT, tmp_path)
    source = migrated.read_text()
    assert 'accel.state_dict(model, prefix="module."), "optimizer"' in source, source
    checkpoint = tmp_path / "migrated.ckpt"
    run_launched(migrated, tmp_path, 2, "--save", str(checkpoint))
    expected_run = run_original(SCRIPT, tmp_path, "--save", str(tmp_path / "o.ckpt"))
    # Same training, so the same checkpoint, in the original's format.
    saved, expected = torch.load(checkpoint), torch.load(tmp_path / "o.ckpt")
    assert list(saved["model"]) == list(expected["model"])
    assert expected_run.losses
    resumed = run_original(SCRIPT, tmp_path, "--resume", str(checkpoint), "--seed", "1")
    reference = run_original(
        SCRIPT, tmp_path, "--resume", str(tmp_path / "o.ckpt"), "--seed", "1"
    )
    assert max(relative_errors(reference.losses, resumed.losses)) < TOLERANCE
