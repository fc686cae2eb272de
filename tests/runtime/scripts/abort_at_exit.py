"""Trains, then rank 1 aborts at exit: after the runtime's teardown ("finished"),
as torch's gloo exit race does, or in the middle of the work ("early")."""

import atexit
import os
import sys

import torch
from torch import nn

when = sys.argv[1]
if when == "finished":
    # Registered before the runtime's own handler, so it runs after it (LIFO).
    atexit.register(lambda: os.environ.get("RANK") == "1" and os.abort())

import accel_migrate.runtime as accel  # noqa: E402

model = accel.prepare_model(nn.Linear(3, 1).to(accel.device()))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
for step in range(3):
    optimizer.zero_grad()
    accel.backward(model(torch.randn(4, 3)).pow(2).mean())
    optimizer.step()
    if when == "early" and step == 1 and accel.rank() == 1:
        os.abort()
accel.print("trained")
