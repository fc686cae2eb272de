"""``comm.broadcast_from_rank0`` over NCCL (the half that never ran before r34d):
a frozen parameter on the CPU under a CUDA runtime (``take_rank_0s`` of a late
frozen parameter), a CPU view whose elements overlap, and a GPU parameter, at
world 1 on this process's GPU (NCCL takes one process per GPU: the device
machine has one). Skipped, with the reason, where CUDA is missing;
bench/gpu_check.sh runs it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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


def test_a_cpu_frozen_parameter_goes_through_the_gpu(nccl: torch.device) -> None:
    assert comm.wire_device(torch.device("cuda")) == nccl  # the index made explicit
    cpu = nn.Parameter(torch.arange(6.0).reshape(2, 3), requires_grad=False)
    overlapping = nn.Parameter(torch.arange(4.0).expand(3, 4).t(), requires_grad=False)
    gpu = nn.Parameter(torch.ones(3, device=nccl), requires_grad=False)
    held = cpu.data
    late_registration.take_rank_0s(
        [cpu, overlapping, gpu], "m.s = nn.Parameter(...)", 0, 1, 60.0, nccl
    )
    torch.cuda.synchronize()
    # rank 0's values (its own, at world 1), where they lay
    assert cpu.device.type == "cpu" and cpu.data is held
    assert torch.equal(cpu, torch.arange(6.0).reshape(2, 3))
    assert overlapping.device.type == "cpu"
    assert torch.equal(overlapping, torch.arange(4.0).expand(3, 4).t())
    assert gpu.device == nccl and torch.equal(gpu.cpu(), torch.ones(3))
