"""Migrated manual SGD (no optimizer object): refused under FSDP and under fp16."""

import torch
from torch import nn

import accel_migrate.runtime as accel

model = accel.prepare_model(nn.Linear(3, 1).to(accel.device()))
for _ in range(3):
    loss = model(torch.randn(4, 3)).pow(2).mean()
    model.zero_grad()
    accel.backward(loss)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-0.1)
accel.print("trained")
