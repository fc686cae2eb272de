"""DDP's evaluation forward without the wrapper (``DDPStrategy.without_grad``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.strategies.ddp import DDPStrategy


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
