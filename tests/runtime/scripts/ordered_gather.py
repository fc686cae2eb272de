"""Collects per-sample and per-batch outputs over sharded eval loaders (shuffled and
not, a short last batch), gathers them with ``accel.gather_in_order`` and prints
them to one file per rank (argv[1]/rank{R}.txt); then collects values that match no share and prints the error.
Run plain (one process), the gathers are the identity: the reference output."""

import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel

torch.manual_seed(3)
ids = torch.arange(23)
data = TensorDataset(ids, torch.randn(23, 2))
out = open(Path(sys.argv[1]) / f"rank{accel.rank()}.txt", "w")
for shuffle in (False, True):
    loader = accel.prepare_dataloader(DataLoader(data, batch_size=5, shuffle=shuffle))
    for epoch in range(2):
        flat: list[int] = []
        rows, per_batch = [], []
        for index, x in loader:
            flat += (index * 10).tolist()
            rows.append(x)
            per_batch.append(index.clone())
        flat = accel.gather_in_order(flat, loader)
        table = accel.gather_in_order(torch.cat(rows), loader)
        per_batch = accel.gather_in_order(per_batch, loader, per_batch=True)
        print(f"shuffle {shuffle} epoch {epoch} flat {flat}", file=out)
        print(f"shuffle {shuffle} epoch {epoch} rows {table.sum(1).tolist()}", file=out)
        print(
            f"shuffle {shuffle} epoch {epoch} batches {[b.tolist() for b in per_batch]}",
            file=out,
        )

loader = accel.prepare_dataloader(DataLoader(data, batch_size=4))
losses = [0.5 for _ in loader]  # one number per batch: no share of samples
try:
    accel.gather_in_order(losses, loader)
    print(f"mismatch gathered {len(losses)}", file=out)
except accel.GatherOrderError as error:
    print(f"mismatch error {error}", file=out)
