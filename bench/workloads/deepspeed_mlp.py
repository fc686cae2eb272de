"""Baseline: the same training loop, written by hand for DeepSpeed ZeRO.

A plain ``deepspeed.initialize`` script as its tutorial writes one: the engine
from the model, the script's torch Adam and a config with the micro batch, the
ZeRO stage (``--zero-stage``) and nothing else, so DeepSpeed's default bucket
sizes; ``engine.backward(loss)`` and ``engine.step()``. Global batch as in the
original (per-rank batch = global / world). Start it with torchrun, in an
environment with DeepSpeed.

One line is not in the tutorial: on a CPU without the compiled ops DeepSpeed
would JIT-build a shared-memory all-reduce for minutes at start-up, which the
runtime avoids the same way (``deepspeed_zero._no_kernel_builds``); it serves
inference only and changes nothing in a training step.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from train_mlp import MLP, parse_args, synthetic


def _no_kernel_builds():
    import deepspeed.ops
    from deepspeed.git_version_info import installed_ops

    if "__compatible_ops__" not in vars(deepspeed.ops):
        deepspeed.ops.__compatible_ops__ = dict(installed_ops)


def main():
    stage = 2
    if "--zero-stage" in sys.argv:
        at = sys.argv.index("--zero-stage")
        stage = int(sys.argv[at + 1])
        del sys.argv[at : at + 2]
    args = parse_args()
    _no_kernel_builds()
    import deepspeed

    cuda = torch.cuda.is_available()
    deepspeed.init_distributed("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")

    torch.manual_seed(args.seed)
    dataset = synthetic(
        args.batch_size * args.steps_per_epoch, args.features, args.classes, 1
    )
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
    micro = args.batch_size // world
    loader = DataLoader(dataset, batch_size=micro, sampler=sampler)
    model = MLP(args.features, args.hidden, args.layers, args.classes).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    config = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": stage},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 2**31 - 1,
    }
    engine, _, _, _ = deepspeed.initialize(
        model=model, optimizer=optimizer, config=config
    )

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        engine.train()
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(engine(x), y)
            engine.backward(loss)
            engine.step()
            total += loss.item()
        mean = torch.tensor([total / len(loader)], device=device)
        dist.all_reduce(mean)
        if rank == 0:
            print(f"epoch {epoch} mean loss {mean.item() / world:.6f}")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
