"""One FSDP job that times ``accel.save_state`` and ``accel.load_state``
(bench/checkpoint_state.py starts it under ``accel-migrate launch``).

argv: FOLDER OUT_JSON LAYOUT ROUNDS BLOCKS WIDTH. LAYOUT "sharded" is the default
under FSDP (DCP, each rank its shards); "gathered" is the format before it (full
state dicts gathered to rank 0, one file), chosen by switching the strategy's
``sharded_checkpoint`` off. The model: BLOCKS linear layers of WIDTH x WIDTH,
trained one step with Adam so that the optimizer holds its state (3x the
parameters in all).
"""

import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime._state import get_runtime

folder, out, layout = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
rounds, blocks, width = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])

torch.manual_seed(0)
model = accel.prepare_model(
    nn.Sequential(
        *(nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(blocks))
    )
)
optimizer = accel.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=1e-3))
optimizer.zero_grad()
accel.backward(model(torch.randn(8, width)).pow(2).mean())
optimizer.step()
if layout == "gathered":
    get_runtime().strategy.sharded_checkpoint = False  # type: ignore[misc]


def timed(call) -> float:
    dist.barrier()
    start = time.perf_counter()
    call()
    dist.barrier()
    return time.perf_counter() - start


state = folder / "state"
saves = [timed(lambda: accel.save_state(state)) for _ in range(rounds)]
loads = [timed(lambda: accel.load_state(state)) for _ in range(rounds)]
rank, world = accel.rank(), accel.world_size()
mine = [state / f"rank{rank}.pt", state / "tensors" / f"__{rank}_0.distcp"]
if rank == 0:
    mine += [
        state / "shared.pt",
        state / "manifest.json",
        state / "tensors" / ".metadata",
    ]
written = sum(p.stat().st_size for p in mine if p.exists())
per_rank = [None] * world
dist.all_gather_object(per_rank, written)
if rank == 0:
    total = sum(p.numel() * p.element_size() for p in model.parameters())  # global
    out.write_text(
        json.dumps(
            {
                "saves": saves,
                "loads": loads,
                "bytes": per_rank,
                "state_bytes": total * 3,  # parameters + Adam's two moments
            }
        )
    )
