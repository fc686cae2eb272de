"""A migrated step that AM040 missed: ``accel.backward(loss)`` averages the
loss's gradients, then the gradient of a second, batch-dependent objective
taken with ``torch.autograd.grad`` is added into ``p.grad`` by hand
(``after_backward``: nothing averages it, each process's share differs), or the
gradient of a penalty of the parameters alone (``parameter_penalty``: the same
on every process, nothing to average). The data is a sharded loader, so the
processes' shares differ."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel

mode = sys.argv[1]
torch.manual_seed(0)
model = accel.prepare_model(
    nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).to(accel.device())
)
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
g = torch.Generator().manual_seed(1)
loader = accel.prepare_dataloader(
    DataLoader(TensorDataset(torch.randn(16, 4, generator=g)), batch_size=8)
)
params = list(model.parameters())
for step, (x,) in enumerate(loader):
    optimizer.zero_grad()
    out = model(x)
    loss = out.pow(2).mean()
    if mode == "after_backward":
        # a second objective of the batch, differentiated by hand
        smooth = accel.unwrap(model)(x + 0.1).sub(out.detach()).pow(2).mean()
        extra = torch.autograd.grad(smooth, params)
    else:
        extra = torch.autograd.grad(sum(p.pow(2).sum() for p in params), params)
    accel.backward(loss)
    for p, e in zip(params, extra, strict=True):
        p.grad += 0.01 * e
    optimizer.step()
    accel.print(f"step {step} loss {accel.global_loss(loss).item():.6f}")
accel.print("trained")
