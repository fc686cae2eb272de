"""DDP's evaluation forward without the wrapper (``DDPStrategy.without_grad``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.strategies.ddp import DDPStrategy
from tests import warm_python


class _Dtype(nn.Module):
    def forward(self, x: torch.Tensor, *, y: torch.Tensor) -> tuple[Any, Any]:
        return x.dtype, y.dtype


def _wrapper(device_ids: list[int] | None) -> DistributedDataParallel:
    """A stand-in for DDP on ``cuda:0`` (no GPU, no process group here): its
    ``to_kwargs`` marks what it moved (float64 for "on the device")."""
    wrapper = DistributedDataParallel.__new__(DistributedDataParallel)
    nn.Module.__init__(wrapper)
    wrapper.module = _Dtype()
    wrapper.device_ids = device_ids

    def to_kwargs(inputs: Any, kwargs: Any, device_id: int) -> Any:
        assert device_id == 0
        moved = tuple(t.double() for t in inputs)
        return (moved,), ({k: v.double() for k, v in kwargs.items()},)

    wrapper.to_kwargs = to_kwargs  # type: ignore[method-assign]
    return wrapper


def _run(device_ids: list[int] | None) -> Any:
    strategy = DDPStrategy.__new__(DDPStrategy)
    strategy.config = RuntimeConfig()
    run = strategy.without_grad(_wrapper(device_ids))
    return run(torch.ones(1), y=torch.ones(1))


def test_the_bypass_moves_the_inputs_as_ddps_forward_does() -> None:
    """rev12: with ``device_ids`` (one GPU per process) DDP's forward moves a
    CPU batch to the model's device; the evaluation forward that skips the
    wrapper called the module with the batch where it was (a device mismatch
    where the script relied on DDP to move it)."""
    assert _run([0]) == (torch.float64, torch.float64)


def test_without_device_ids_the_inputs_stay_where_they_are() -> None:
    """CPU (gloo) DDP has no device_ids and moves nothing."""
    assert _run(None) == (torch.float32, torch.float32)


EVAL = re.compile(r"^rank (\d) eval (\S+) mean (\S+)$", re.MULTILINE)


@pytest.mark.multiprocess
def test_an_evaluation_sees_rank_0s_buffers_as_under_ddp() -> None:
    """A buffer that is not BatchNorm's, updated by the model's forward from
    each process's share (``scripts/eval_buffers.py``): the evaluation's
    forward skips DDP's wrapper and its broadcast, so before r33b each process
    evaluated with its own (rank 0's output sum 1.714, rank 1's -0.184). It is
    made rank 0's after each backward, as DDP's broadcast before the next
    forward makes it: every process evaluates as rank 0 (as under torch's DDP;
    one process's value differs, -0.987: the buffer follows rank 0's share)."""
    done = subprocess.run(
        [
            *warm_python.launcher(),
            *("--nproc", "2", "--strategy", "ddp"),
            str(Path(__file__).parent / "scripts" / "eval_buffers.py"),
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    rows = sorted(EVAL.findall(done.stdout))
    assert [r for r, _, _ in rows] == ["0", "1"], done.stdout
    assert rows[0][1:] == rows[1][1:], done.stdout
