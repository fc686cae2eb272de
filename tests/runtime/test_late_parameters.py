"""Parameters a prepared model gets, or that become trainable, after its first
forward (``scripts/late_parameters.py``): DDP trains them as one process does
(an attribute write and ``register_parameter`` alike, and a model frozen at its
first forward then unfrozen) and refuses a buffer registered later; FSDP
refuses an added parameter, where it is written or at the backward after it,
and a buffer registered later; DeepSpeed refuses gradual unfreezing (its
ZeRO optimizer holds only the parameters trainable when the engine was built)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests import warm_python
from tests.parity.harness import max_parameter_error

pytestmark = pytest.mark.multiprocess

SCRIPTS = Path(__file__).parent / "scripts"
LOSS = re.compile(r"^late step (\d+) loss (\S+)$", re.MULTILINE)


def _run(command: list[str], ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=180, check=False
    )
    if ok:
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done


def _launch(
    strategy: str, *args: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    launch = [*warm_python.launcher(), "--nproc", "2", "--strategy", strategy]
    return _run([*launch, str(SCRIPTS / "late_parameters.py"), *args], ok)


@pytest.mark.parametrize("mode", ["reg", "frozen", "drawn"])
def test_ddp_trains_late_parameters_as_one_process(tmp_path: Path, mode: str) -> None:
    original, ddp = tmp_path / "original.pt", tmp_path / "ddp.pt"
    script = str(SCRIPTS / "late_parameters.py")
    expected = LOSS.findall(
        _run([warm_python.executable(), script, mode, str(original)]).stdout
    )
    got = LOSS.findall(_launch("ddp", mode, str(ddp)).stdout)
    assert [s for s, _ in got] == [s for s, _ in expected] == [str(i) for i in range(6)]
    for (step, e), (_, g) in zip(expected, got, strict=True):
        assert abs(float(g) - float(e)) <= 1e-5 * abs(float(e)), f"step {step}"
    before, after = torch.load(original), torch.load(ddp)
    # what was added or unfrozen trained (moved from where it started), alike
    if mode in ("reg", "drawn"):
        assert before["scale"].abs().item() > 1e-3
    else:
        torch.manual_seed(0)
        torch.randn(24, 4), torch.randn(24, 1)
        initial = torch.nn.Linear(4, 8).weight.detach()
        assert (before["b.0.weight"] - initial).abs().max() > 1e-3
    assert max_parameter_error(before, after) < 1e-5


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("attr", "LateRegistrationError: `model.scale = ...` on a prepared model"),
        ("nested", "LateParameterError: accel-migrate: parameter '2.scale'"),
        ("buffer", "LateRegistrationError: `register_buffer` on a prepared model"),
        # a gradient on rank 0's share only: rank 0 raises naming it at that
        # backward (each process decides alone; rank 1 then fails on the
        # closed connection)
        ("branch", "LateParameterError: accel-migrate: parameter '2.scale'"),
    ],
)
def test_fsdp_refuses_a_parameter_added_after_the_first_forward(
    tmp_path: Path, mode: str, error: str
) -> None:
    done = _launch("fsdp", mode, str(tmp_path / "fsdp.pt"), ok=False)
    assert done.returncode != 0
    assert error in done.stderr, done.stderr[-3000:]
    if mode == "buffer":
        assert "before the model's first forward" in done.stderr
    else:
        assert "--strategy ddp" in done.stderr
    # refused in the second phase, before its first step
    assert "late step 2 loss" in done.stdout and "late step 3" not in done.stdout


def test_ddp_refuses_a_buffer_registered_after_the_first_forward(
    tmp_path: Path,
) -> None:
    # r30e took it in as rank 0's value; one computed from each process's
    # share (x.mean(0)) then silently became rank 0's: refused again
    done = _launch("ddp", "buffer", str(tmp_path / "ddp.pt"), ok=False)
    assert done.returncode != 0
    refusal = "LateRegistrationError: `register_buffer` on a prepared model"
    assert refusal in done.stderr, done.stderr[-3000:]
    assert "before the model's first forward" in done.stderr
    assert "late step 2 loss" in done.stdout and "late step 3" not in done.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason='needs pip install "accel-migrate[deepspeed]"',
)
def test_deepspeed_refuses_gradual_unfreezing(tmp_path: Path) -> None:
    done = _run(
        [
            sys.executable,
            "-m",
            "accel_migrate",
            "launch",
            "--nproc",
            "2",
            "--strategy",
            "deepspeed",
            str(SCRIPTS / "late_unfreeze.py"),
            str(tmp_path / "ds.pt"),
        ],
        ok=False,
    )
    assert done.returncode != 0
    assert "LateParameterError: accel-migrate: parameter '0.weight'" in done.stderr
    assert "--strategy ddp or fsdp" in done.stderr
    assert "unfreeze step 2 loss" in done.stdout and "step 3" not in done.stdout
