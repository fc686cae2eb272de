"""A masked token mean where one rank's share of a step has no unmasked token:
its loss is 0/0 and its backward divides by zero. Prints the global loss per step
and the final parameter sum, which must be those of one process."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel

torch.manual_seed(0)
x = torch.randn(8, 5, 3)
y = torch.randint(0, 4, (8, 5))
mask = torch.ones(8, 5)
mask[2:4] = 0  # rows 2-3, the second half of the first batch: rank 1's share
mask[5, 1:] = 0
loader = accel.prepare_dataloader(DataLoader(TensorDataset(x, y, mask), batch_size=4))
model = accel.prepare_model(nn.Linear(3, 4))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.5))
for epoch in range(2):
    for step, (xb, yb, mb) in enumerate(loader):
        xb, yb, mb = xb.to(accel.device()), yb.to(accel.device()), mb.to(accel.device())
        optimizer.zero_grad()
        per_token = nn.functional.cross_entropy(
            model(xb).transpose(1, 2), yb, reduction="none"
        )
        loss = (per_token * mb).sum() / mb.sum()
        accel.backward(loss, count=mb.sum())
        optimizer.step()
        accel.print(
            f"step {epoch * 2 + step} loss {accel.global_loss(loss).item():.6f}"
        )
total = sum(float(p.detach().sum()) for p in accel.state_dict(model).values())
accel.print(f"params {total:.6f}")
