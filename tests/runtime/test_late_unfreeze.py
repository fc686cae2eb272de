"""Parameters made trainable after the first forward (gradual unfreezing) under
FSDP2 (``fully_shard``): checked to train as one process does (round r29g; DDP's
handling is ``_late_trainable`` in ``runtime/strategies/ddp.py``, tested in
``test_unused_outputs``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

from tests import warm_python
from tests.parity.harness import max_parameter_error

pytestmark = pytest.mark.multiprocess

SCRIPT = Path(__file__).parent / "scripts" / "late_unfreeze.py"
LOSS = re.compile(r"^unfreeze step (\d+) loss (\S+)$", re.MULTILINE)


def _run(command: list[str]) -> str:
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def test_fsdp_trains_late_unfrozen_parameters_as_one_process(tmp_path: Path) -> None:
    original = tmp_path / "original.pt"
    expected = LOSS.findall(
        _run([warm_python.executable(), str(SCRIPT), str(original)])
    )
    sharded = tmp_path / "fsdp.pt"
    launch = [*warm_python.launcher(), "--nproc", "2", "--strategy", "fsdp"]
    got = LOSS.findall(_run([*launch, str(SCRIPT), str(sharded)]))
    assert [s for s, _ in got] == [s for s, _ in expected] == [str(i) for i in range(6)]
    for (step, e), (_, g) in zip(expected, got, strict=True):
        assert abs(float(g) - float(e)) <= 1e-5 * abs(float(e)), f"step {step}"
    before, after = torch.load(original), torch.load(sharded)
    # the trunk trained in the second phase (it moved from its initial values),
    # alike in both runs
    torch.manual_seed(0)
    torch.randn(24, 4)
    initial = torch.nn.Linear(4, 8).weight.detach()
    assert (before["0.weight"] - initial).abs().max() > 1e-3
    assert max_parameter_error(before, after) < 1e-5
