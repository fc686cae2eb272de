"""FSDP replaces parameters when it shards; every optimizer must follow.

argv: ORDER in {before, after, unprepared}. Trains 4 steps and prints the losses.
- before: the optimizer is built from the plain model, before prepare_model
- after: built from the prepared model, before its first forward
- unprepared: built before prepare_model and never passed to prepare_optimizer
- resumed: built from the prepared model and given a saved state (the momentum
  buffers of one earlier step) before the model's first forward, as a resume does
"""

import copy
import sys

import torch
from torch import nn

import accel_migrate.runtime as accel

order = sys.argv[1]
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 1))
if order == "before":
    optimizer = accel.prepare_optimizer(
        torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    )
    model = accel.prepare_model(net)
elif order == "after":
    model = accel.prepare_model(net)
    optimizer = accel.prepare_optimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    )
elif order == "resumed":
    earlier = copy.deepcopy(net)
    saved = torch.optim.SGD(earlier.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(1)  # one earlier step on the data below
    nn.functional.mse_loss(earlier(torch.randn(12, 5)), torch.randn(12, 1)).backward()
    saved.step()
    model = accel.prepare_model(net)
    optimizer = accel.prepare_optimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    )
    optimizer.load_state_dict(saved.state_dict())
else:
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    model = accel.prepare_model(net)

torch.manual_seed(1)
x = torch.randn(12, 5).to(accel.device())
y = torch.randn(12, 1).to(accel.device())
for step in range(4):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    accel.backward(loss)
    optimizer.step()
    accel.print(f"step {step} loss {accel.global_loss(loss).item():.10e}")
