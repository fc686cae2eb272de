"""Baseline: the same training loop, written by hand for FSDP2 (``fully_shard``).

``--wrap root`` shards the whole model as one group, as accel-migrate's runtime
does; ``--wrap layers`` shards every layer and then the root, as the FSDP2
tutorial does. Global batch as in the original (per-rank batch = global / world).
Start it with torchrun.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from train_mlp import MLP, parse_args, synthetic


def main():
    wrap = "root"
    if "--wrap" in sys.argv:
        at = sys.argv.index("--wrap")
        wrap = sys.argv[at + 1]
        del sys.argv[at : at + 2]
    args = parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
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
    loader = DataLoader(dataset, batch_size=args.batch_size // world, sampler=sampler)
    model = MLP(args.features, args.hidden, args.layers, args.classes).to(device)
    if wrap == "layers":
        for layer in model.layers:
            fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        mean = torch.tensor([total / len(loader)], device=device)
        dist.all_reduce(mean)
        if rank == 0:
            print(f"epoch {epoch} mean loss {mean.item() / world:.6f}")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
