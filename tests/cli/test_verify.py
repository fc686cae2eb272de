"""accel-migrate verify: a faithful migration passes, a legitimately different one
fails with its cause named, and a crash is reported as a crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accel_migrate.verify.compare import compare
from tests.conftest import FIXTURES

VERIFY = [sys.executable, "-m", "accel_migrate", "verify"]


def _verify(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VERIFY, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


@pytest.mark.multiprocess
def test_a_faithful_migration_passes_and_writes_a_report(tmp_path: Path) -> None:
    script = FIXTURES / "parity" / "cnn_eval.py"
    before = script.read_bytes()
    report = tmp_path / "report.md"
    done = _verify(
        str(script), "--steps", "6", "--report", str(report), "--", "--epochs", "2"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS: 6 losses over 6 steps agree" in done.stdout
    assert script.read_bytes() == before, "the original is never touched"
    text = report.read_text()
    assert text.startswith("# accel-migrate verify: `cnn_eval.py`")
    assert "**PASS" in text and "```diff" in text and "| 5 | 5 |" in text


@pytest.mark.multiprocess
def test_batchnorm_with_per_process_statistics_differs_and_is_named() -> None:
    """By default BatchNorm computes the global batch's statistics and verify
    passes (test_parity_ddp's batchnorm fixtures); opted out, it differs and
    verify names the cause."""
    done = _verify(
        str(FIXTURES / "verify" / "batchnorm_train.py"),
        "--steps",
        "8",
        env={"ACCEL_MIGRATE_SYNC_BATCHNORM": "0"},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL: the losses diverge at step" in done.stdout
    assert "likely cause: BatchNorm in training mode" in done.stdout


@pytest.mark.multiprocess
def test_a_crash_is_reported_with_its_traceback(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    done = _verify(
        str(FIXTURES / "verify" / "crashes.py"), "--steps", "5", "--report", str(report)
    )
    assert done.returncode == 123
    assert "the original crashed" in done.stderr
    assert "RuntimeError: the data file ran out at step 2" in done.stderr
    assert "not a parity result" in done.stderr
    assert "the data file ran out" in report.read_text()


def test_usage_errors() -> None:
    assert _verify("no_such_script.py").returncode == 2
    done = _verify(str(FIXTURES / "scenarios" / "already_ddp.in.py"))
    assert (
        done.returncode == 2
        and "nothing to verify (already distributed)" in done.stderr
    )


def _record(losses: list[float], steps: int | None = None, **facts: bool) -> dict:
    return {
        "losses": losses,
        "loss_steps": list(range(len(losses))),
        "steps": len(losses) if steps is None else steps,
        "parameters": [{"numel": 2, "sum": 1.0, "sumsq": 0.5}],
        "facts": {"batchnorm_training": False, "dropout_training": False, **facts},
    }


def test_compare_names_the_first_divergent_step_and_the_causes() -> None:
    same = compare(_record([1.0, 0.5]), _record([1.0, 0.5 + 1e-7]), 1e-5, 2)
    assert same.agrees and same.first_divergence is None
    apart = compare(
        _record([1.0, 0.5, 0.4]),
        _record([1.0, 0.6, 0.4], dropout_training=True),
        1e-5,
        2,
    )
    assert not apart.agrees and apart.first_divergence is not None
    assert apart.first_divergence.step == 1
    assert any("dropout" in cause for cause in apart.causes)
    shorter = compare(_record([1.0, 0.5]), _record([1.0]), 1e-5, 2)
    assert not shorter.agrees and any(
        "different numbers of steps" in c for c in shorter.causes
    )
