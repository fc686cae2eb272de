"""A part removed from a prepared model after its first forward
(``scripts/removed_part.py``: ``del model.aux``, ``model.aux = None``, ``del
model.blocks[1]`` of a block sharded as a unit of its own). Checked in r33b:
FSDP2 keeps the removed part's parameters in its groups (the root's, or the
block's unit), which the forward no longer reaches; they get no gradient,
the optimizer skips them as one process's does, and the state dict has the
model's keys. Losses and final parameters match one process's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

from tests import warm_python
from tests.parity.harness import max_parameter_error

pytestmark = pytest.mark.multiprocess

SCRIPT = Path(__file__).parent / "scripts" / "removed_part.py"
LOSS = re.compile(r"^removed step (\d+) loss (\S+)$", re.MULTILINE)


def _run(command: list[str]) -> str:
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(240),
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.parametrize(
    ("strategy", "mode"),
    [("fsdp", "del"), ("fsdp", "none"), ("fsdp", "block"), ("ddp", "del")],
)
def test_a_removed_part_trains_as_one_process(
    tmp_path: Path, strategy: str, mode: str
) -> None:
    original, got = tmp_path / "original.pt", tmp_path / "got.pt"
    expected = LOSS.findall(
        _run([warm_python.executable(), str(SCRIPT), mode, str(original)])
    )
    launch = [*warm_python.launcher(), "--nproc", "2", "--strategy", strategy]
    losses = LOSS.findall(_run([*launch, str(SCRIPT), mode, str(got)]))
    assert (
        [s for s, _ in losses] == [s for s, _ in expected] == [str(i) for i in range(6)]
    )
    for (step, e), (_, g) in zip(expected, losses, strict=True):
        assert abs(float(g) - float(e)) <= 1e-5 * abs(float(e)), f"step {step}"
    before, after = torch.load(original), torch.load(got)
    assert sorted(before) == sorted(after)
    gone = "blocks.2.linear.weight" if mode == "block" else "aux.weight"
    assert gone not in after
    assert max_parameter_error(before, after) < 1e-5
