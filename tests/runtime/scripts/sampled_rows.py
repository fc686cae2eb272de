"""AM044's rewrite at run time: every step, the rows of a per-sample tensor of the
batch (the batch's indices and a model's output on them) gathered in rank order,
over a shuffled loader whose last batch is shorter than the world (7 samples,
batches of 3: the last batch's one row is rank 0's, rank 1's share is empty).
Prints each step's gathered rows (and two parts gathered then joined), which must be the original's.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel

torch.manual_seed(0)
data = TensorDataset(torch.arange(7), torch.randn(7, 2))
loader = accel.prepare_dataloader(DataLoader(data, batch_size=3, shuffle=True))
model = accel.prepare_model(nn.Linear(2, 1))
with torch.no_grad():
    model.weight.fill_(1.0)
    model.bias.fill_(0.0)
for epoch in range(2):
    for step, (index, x) in enumerate(loader):
        out = model(x)
        rows = accel.gather(index)[:25]
        values = accel.gather(out.detach())[:25]
        accel.print(f"rows {epoch} {step} {rows.tolist()}")
        # torch.cat((index, index + 100), 0) with each part gathered on its own
        # (AM044's rewrite of parts joined along the rows): the original's order
        joined = torch.cat((accel.gather(index), accel.gather(index + 100)), 0)
        accel.print(f"rows joined {epoch} {step} {joined.tolist()}")
        accel.print(
            f"values {epoch} {step} {[round(v, 5) for v in values.flatten().tolist()]}"
        )
