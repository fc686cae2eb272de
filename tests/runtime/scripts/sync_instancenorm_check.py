"""Launched at world 2: InstanceNorm layers that track running statistics,
converted by the runtime, against torch's own layer on the concatenated global
batch (every rank builds the whole batch from the seed and runs its slice).

Prints (rank 0, for every rank) one ``case NAME rank R out E running E`` line per
case: the largest relative error of this rank's output slice and of the running
statistics after three train-mode forwards.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime.data import chunk_bounds
from accel_migrate.runtime.sync_instancenorm import convert

accel.device()  # starts the runtime: the process group
rank, world = accel.rank(), accel.world_size()

#: name -> (layer factory, global batch shape)
CASES = {
    "2d-affine": (
        lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        (6, 3, 4, 5),
    ),
    "2d-odd-split": (
        lambda: nn.InstanceNorm2d(2, track_running_stats=True),
        (5, 2, 3, 3),
    ),
    "2d-empty-rank": (
        lambda: nn.InstanceNorm2d(2, track_running_stats=True),
        (1, 2, 3, 3),
    ),
    "1d": (
        lambda: nn.InstanceNorm1d(4, track_running_stats=True, momentum=0.3),
        (6, 4, 7),
    ),
    "3d": (lambda: nn.InstanceNorm3d(2, track_running_stats=True), (4, 2, 2, 3, 3)),
    "2d-momentum-none": (
        lambda: nn.InstanceNorm2d(3, track_running_stats=True, momentum=None),
        (6, 3, 3, 3),
    ),
}


def relative(expected: torch.Tensor, actual: torch.Tensor) -> float:
    if expected.numel() == 0:
        return 0.0
    return float(
        (expected - actual).abs().max() / expected.abs().max().clamp_min(1e-12)
    )


rows = []
for name, (make, shape) in CASES.items():
    torch.manual_seed(0)
    reference = make()
    mine = copy.deepcopy(reference)
    assert convert(mine) == 1
    lo, hi = chunk_bounds(shape[0], world, rank)
    out_error = 0.0
    for step in range(3):
        x = torch.randn(*shape) * (1 + step) + step
        expected = reference(x)
        got = mine(x[lo:hi])
        out_error = max(out_error, relative(expected[lo:hi], got))
    running = max(
        relative(reference.running_mean, mine.running_mean),
        relative(reference.running_var, mine.running_var),
    )
    rows.append(f"case {name} rank {rank} out {out_error:.3e} running {running:.3e}")

gathered: list[list[str]] = [[] for _ in range(world)]
dist.all_gather_object(gathered, rows)
if rank == 0:
    for part in gathered:
        for row in part:
            print(row)
