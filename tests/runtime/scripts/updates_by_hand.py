"""A migrated step that AM040 missed, updating the parameters of a prepared
model by hand with gradients nothing averaged: ``grad_sgd`` takes them with
``torch.autograd.grad(loss, params)`` and applies ``p.data -= lr * g``;
``grad_written`` writes them into ``p.grad`` and applies
``p.data.add_(p.grad, alpha=-lr)``. ``backward_sgd`` is the same update after
``accel.backward(loss)``, whose gradients are averaged: it trains. The data is a
sharded loader, so the processes' shares differ."""

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
g = torch.Generator().manual_seed(1)
data = TensorDataset(torch.randn(24, 4, generator=g), torch.randn(24, 1, generator=g))
loader = accel.prepare_dataloader(DataLoader(data, batch_size=8))
params = list(model.parameters())
lr = 0.1
for epoch in range(2):
    for step, (x, y) in enumerate(loader):
        loss = (model(x) - y).pow(2).mean()
        if mode == "grad_sgd":
            grads = torch.autograd.grad(loss, params)
            for p, grad in zip(params, grads, strict=True):
                p.data -= lr * grad
        elif mode == "grad_written":
            grads = torch.autograd.grad(loss, params)
            for p, grad in zip(params, grads, strict=True):
                p.grad = grad
                p.data.add_(p.grad, alpha=-lr)
        else:
            model.zero_grad()
            accel.backward(loss)
            with torch.no_grad():
                for p in params:
                    p.data -= lr * p.grad
        accel.print(f"step {epoch}.{step} loss {accel.global_loss(loss).item():.6f}")
accel.print("trained")
