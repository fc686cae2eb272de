"""Rank 1 raises in its forward pass at step 3, while rank 0 has the reduction of
its loss in flight (started by accel.backward, since the loop asks for the global
loss of every step) and waits in backward's gradient all-reduce."""

import torch

import accel_migrate.runtime as accel

torch.manual_seed(0)
model = accel.prepare_model(torch.nn.Linear(4, 1))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
total = 0.0
for step in range(8):
    x = torch.randn(8, 4)
    if step == 3 and accel.rank() == 1:
        raise ValueError("bad batch on rank 1")
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    accel.backward(loss)
    optimizer.step()
    total += accel.global_loss(loss).item()
accel.print(f"total {total:.4f}")
