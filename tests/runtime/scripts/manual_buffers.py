"""A BatchNorm model that DDP cannot average (a second backward through one
forward, the first reaching only the trunk and one head), with each process's
BatchNorm statistics its own (``--batch-mode per-device``): after each step
every process prints its running mean, which DDP makes rank 0's at each
forward, also once the runtime averages the model by hand
(``tests/runtime/test_unused_outputs.py``)."""

import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
        self.a = nn.Linear(8, 1)
        self.b = nn.Linear(8, 1)

    def forward(self, x):
        h = torch.tanh(self.trunk(x))
        return self.a(h), self.b(h)


torch.manual_seed(0)
rank = int(os.environ.get("RANK", 0))
# each process's share is drawn from another distribution: other statistics
x = torch.randn(32, 4) + 3 * rank
model = accel.prepare_model(Model())
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
for step, (batch,) in enumerate(DataLoader(TensorDataset(x), batch_size=8)):
    optimizer.zero_grad()
    a, b = model(batch)
    accel.backward(a.pow(2).mean(), retain_graph=True)  # the trunk and head a
    accel.backward(b.pow(2).mean())
    optimizer.step()
    mean = accel.unwrap(model).trunk[1].running_mean.sum().item()
    print(f"rank {rank} step {step} running_mean {mean:.6f}", flush=True)
model.eval()
with torch.no_grad():  # DDP broadcasts rank 0's buffers before this forward
    model(x[:2])
mean = accel.unwrap(model).trunk[1].running_mean.sum().item()
print(f"rank {rank} eval running_mean {mean:.6f}", flush=True)
