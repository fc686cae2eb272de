"""Baseline: the same training loop on HF Accelerate.

``split_batches=True`` keeps the original global batch and gives every rank its
slice, as accel-migrate's default (global) batch mode does. ``--fsdp`` uses
Accelerate's FSDP2 plugin. Start it with torchrun (or ``accelerate launch``) in
an environment where ``accelerate`` is installed.
"""

import sys

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import (
    DataLoaderConfiguration,
    DistributedType,
    FullyShardedDataParallelPlugin,
)
from torch.utils.data import DataLoader
from train_mlp import MLP, parse_args, synthetic

UNSUPPORTED = 75  # exit status the benchmark reads as "skipped"


def main():
    fsdp = "--fsdp" in sys.argv
    if fsdp:
        sys.argv.remove("--fsdp")
    args = parse_args()
    plugin = FullyShardedDataParallelPlugin(fsdp_version=2) if fsdp else None
    accelerator = Accelerator(
        # Accelerate runs several CPU processes only when told it is on the CPU
        # (what `accelerate launch --cpu` sets); on a GPU machine it picks NCCL.
        cpu=not torch.cuda.is_available(),
        dataloader_config=DataLoaderConfiguration(split_batches=True),
        fsdp_plugin=plugin,
    )
    if fsdp and accelerator.distributed_type != DistributedType.FSDP:
        # Accelerate turns FSDP on for accelerators only; on the CPU it would
        # silently train with DDP. Say so instead of timing the wrong thing.
        accelerator.print(
            f"UNSUPPORTED: Accelerate does not run FSDP here "
            f"(distributed type {accelerator.distributed_type.value})"
        )
        sys.exit(UNSUPPORTED)

    torch.manual_seed(args.seed)
    dataset = synthetic(
        args.batch_size * args.steps_per_epoch, args.features, args.classes, 1
    )
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    model = MLP(args.features, args.hidden, args.layers, args.classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            total += loss.item()
        mean = accelerator.reduce(
            torch.tensor([total / len(loader)], device=accelerator.device), "mean"
        )
        accelerator.print(f"epoch {epoch} mean loss {mean.item():.6f}")

    accelerator.end_training()


if __name__ == "__main__":
    main()
