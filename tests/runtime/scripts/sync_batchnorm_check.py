"""Launched at world 2: the runtime's synchronised BatchNorm against torch's own
BatchNorm on the concatenated global batch (every rank can build the whole batch
from the seed and compares its slice).

Prints (rank 0, for every rank) one ``case NAME rank R out E grad_x E grad_w E
running E`` line per case, with the largest relative errors.
"""

from __future__ import annotations

import copy
import sys

import torch
import torch.distributed as dist
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime.data import chunk_bounds
from accel_migrate.runtime.sync_batchnorm import convert

accel.device()  # starts the runtime: the process group
rank, world = accel.rank(), accel.world_size()

#: name -> (layer factory, global batch shape, dtype)
CASES = {
    "2d": (lambda: nn.BatchNorm2d(3), (6, 3, 4, 5), torch.float32),
    "2d-odd-split": (lambda: nn.BatchNorm2d(3), (5, 3, 2, 2), torch.float32),
    # A batch of 1 at world 2: rank 1's slice is empty, but the global batch
    # has 4 values per channel.
    "2d-empty-rank": (lambda: nn.BatchNorm2d(2), (1, 2, 2, 2), torch.float32),
    "2d-momentum-none": (
        lambda: nn.BatchNorm2d(3, momentum=None),
        (6, 3, 3, 3),
        torch.float32,
    ),
    "2d-no-affine": (
        lambda: nn.BatchNorm2d(3, affine=False),
        (6, 3, 3, 3),
        torch.float32,
    ),
    "2d-no-running-stats": (
        lambda: nn.BatchNorm2d(3, track_running_stats=False),
        (6, 3, 3, 3),
        torch.float32,
    ),
    "1d-features": (lambda: nn.BatchNorm1d(7), (9, 7), torch.float32),
    "1d-sequence": (lambda: nn.BatchNorm1d(4), (6, 4, 5), torch.float32),
    "3d": (lambda: nn.BatchNorm3d(2), (4, 2, 2, 3, 3), torch.float32),
    "2d-float64": (lambda: nn.BatchNorm2d(3), (6, 3, 4, 5), torch.float64),
}
#: A large mean next to a small spread: E[x^2] - E[x]^2 would cancel. float32
#: cannot resolve it to 1e-5 (torch's own BatchNorm neither), so both are compared
#: with a float64 truth.
OFFSET = "2d-offset"
ROWS: list[str] = []


def relative(expected: torch.Tensor | None, actual: torch.Tensor | None) -> float:
    if expected is None and actual is None:
        return 0.0
    assert expected is not None and actual is not None, (expected, actual)
    if expected.numel() == 0:
        return 0.0
    expected, actual = expected.detach(), actual.detach()
    scale = expected.abs().max().clamp_min(1e-12)
    return float((actual.to(expected.dtype) - expected).abs().max() / scale)


def offset_case() -> None:
    torch.manual_seed(0)
    layer = nn.BatchNorm2d(3)
    truth = copy.deepcopy(layer).double()
    synced = copy.deepcopy(layer)
    convert(synced)
    x_full = 1000.0 + 0.01 * torch.randn(8, 3, 4, 4)
    lo, hi = chunk_bounds(8, world, rank)
    expected = truth(x_full.double())
    torch_error = relative(expected, layer(x_full))
    mine_error = relative(expected[lo:hi], synced(x_full[lo:hi]))
    ROWS.append(
        f"case {OFFSET} rank {rank} mine {mine_error:.3e} torch {torch_error:.3e}"
    )


def run(name: str) -> None:
    factory, shape, dtype = CASES[name]
    torch.manual_seed(0)
    reference = factory().to(dtype)
    if reference.affine:
        with torch.no_grad():
            reference.weight.uniform_(0.5, 1.5)
            reference.bias.uniform_(-0.5, 0.5)
    synced = copy.deepcopy(reference)
    assert convert(synced) == 1
    assert type(synced).__name__ == type(reference).__name__
    assert isinstance(synced, type(reference))
    assert list(synced.state_dict()) == list(reference.state_dict())
    worst = {"out": 0.0, "grad_x": 0.0, "grad_w": 0.0, "running": 0.0}
    for step in range(3):
        x_full = torch.randn(shape, dtype=dtype) * (step + 1) + step
        upstream = torch.randn(shape, dtype=dtype)
        lo, hi = chunk_bounds(shape[0], world, rank)
        for module in (reference, synced):
            module.zero_grad()
        x_ref = x_full.clone().requires_grad_()
        out_ref = reference(x_ref)
        (out_ref * upstream).sum().backward()
        x_mine = x_full[lo:hi].clone().requires_grad_()
        out_mine = synced(x_mine)
        (out_mine * upstream[lo:hi]).sum().backward()
        worst["out"] = max(worst["out"], relative(out_ref[lo:hi], out_mine))
        worst["grad_x"] = max(worst["grad_x"], relative(x_ref.grad[lo:hi], x_mine.grad))
        if reference.affine:
            # Local sums: the strategy sums (averages) them across ranks.
            for ref_param, param in (
                (reference.weight, synced.weight),
                (reference.bias, synced.bias),
            ):
                grad = param.grad.clone()
                dist.all_reduce(grad)
                worst["grad_w"] = max(worst["grad_w"], relative(ref_param.grad, grad))
        else:
            assert synced.weight is None and synced.bias is None
        for key, value in reference.state_dict().items():
            mine = synced.state_dict()[key]
            if value.is_floating_point():
                worst["running"] = max(worst["running"], relative(value, mine))
            else:
                assert torch.equal(value, mine), (key, value, mine)
    # Eval mode: the running statistics, no collective (rank 1 alone would hang).
    reference.eval(), synced.eval()
    probe = torch.randn(shape, dtype=dtype)
    with torch.no_grad():
        worst["out"] = max(worst["out"], relative(reference(probe), synced(probe)))
    ROWS.append(
        f"case {name} rank {rank} "
        + " ".join(f"{key} {value:.3e}" for key, value in worst.items())
    )


for case in sys.argv[1:] or [*CASES, OFFSET]:
    offset_case() if case == OFFSET else run(case)
# One process prints every rank's rows: lines of two processes would interleave.
for rows in accel.gather(ROWS):
    accel.print("\n".join(rows))
