"""``comm.broadcast_from_rank0`` over NCCL (the half that never ran before r34d):
a frozen parameter on the CPU under a CUDA runtime (``take_rank_0s`` of a late
frozen parameter), a CPU view whose elements overlap, and a GPU parameter, at
world 1 on this process's GPU (NCCL takes one process per GPU: the device
machine has one). Skipped, with the reason, where CUDA is missing;
bench/gpu_check.sh runs it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

from accel_migrate.runtime import comm, late_registration

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device (NCCL); none here"
    ),
]


@pytest.fixture
def nccl(tmp_path: Path) -> Iterator[torch.device]:
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=device)
    try:
        yield device
    finally:
        dist.destroy_process_group()


def test_a_cpu_frozen_parameter_goes_through_the_gpu(
    nccl: torch.device, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At world 1 a broadcast sends rank 0's values to rank 0: a value that
    # never moved would pass too. So the broadcast is recorded (the device of
    # each tensor sent, which NCCL needs on the GPU) and writes a marker, which
    # must come back to each parameter where it lies.
    sent: list[torch.device] = []
    real = dist.broadcast

    def recording(tensor: torch.Tensor, src: int = 0, **kwargs: Any) -> Any:
        sent.append(tensor.device)
        work = real(tensor, src=src, **kwargs)  # (NCCL takes it: a CUDA tensor)
        tensor.fill_(7.0)  # rank 0's value, as another process would receive it
        return work

    monkeypatch.setattr(comm.dist, "broadcast", recording)
    cpu = nn.Parameter(torch.arange(6.0).reshape(2, 3), requires_grad=False)
    overlapping = nn.Parameter(torch.arange(4.0).expand(3, 4).t(), requires_grad=False)
    gpu = nn.Parameter(torch.ones(3, device=nccl), requires_grad=False)
    held = cpu.data
    late_registration.take_rank_0s(
        [cpu, overlapping, gpu], "m.s = nn.Parameter(...)", 0, 1, 60.0, nccl
    )
    torch.cuda.synchronize()
    assert sent == [nccl, nccl, nccl]  # every one on this process's GPU
    # the marker copied back, each where it lay
    # (the CPU one written in place, in the storage it held)
    assert cpu.device.type == "cpu" and cpu.data_ptr() == held.data_ptr()
    assert torch.equal(cpu, torch.full((2, 3), 7.0))
    assert overlapping.device.type == "cpu" and overlapping.shape == (4, 3)
    assert torch.equal(overlapping, torch.full((4, 3), 7.0))
    assert gpu.device == nccl and torch.equal(gpu.cpu(), torch.full((3,), 7.0))
