"""Gradual unfreezing (ULMFiT) under the strategy the launch picks: the head
alone trains first, the trunk is made trainable after the first forward
(``tests/runtime/test_late_unfreeze.py``; DDP's rebuild is ``_late_trainable`` in
``runtime/strategies/ddp.py``)."""

import sys

import torch
from torch import nn

import accel_migrate.runtime as accel

torch.manual_seed(0)
X = torch.randn(24, 4)
model = accel.prepare_model(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
for p in model[0].parameters():
    p.requires_grad = False
for phase in range(2):
    if phase:
        for p in model[0].parameters():
            p.requires_grad = True
    loader = accel.prepare_dataloader(
        torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X), batch_size=8)
    )
    for step, (x,) in enumerate(loader):
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        accel.backward(loss)
        optimizer.step()
        value = accel.global_loss(loss).item()
        accel.print(f"unfreeze step {3 * phase + step} loss {value:.10e}")
accel.save(accel.state_dict(model), sys.argv[1])
