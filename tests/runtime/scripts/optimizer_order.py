"""FSDP replaces parameters when it shards; every optimizer must follow.

argv: ORDER in {before, after, unprepared}. Trains 4 steps and prints the losses.
- before: the optimizer is built from the plain model, before prepare_model
- after: built from the prepared model, before its first forward
- unprepared: built before prepare_model and never passed to prepare_optimizer
- resumed: built from the prepared model and given a saved state (the momentum
  buffers of one earlier step) before the model's first forward, as a resume does
- resumed_two_models: one optimizer over two prepared models, given a saved state
  before their first forward (refused under FSDP, on every rank)
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
elif order == "resumed_two_models":
    first, second = accel.prepare_model(net[0]), accel.prepare_model(net[2])
    optimizer = accel.prepare_optimizer(
        torch.optim.SGD(
            [*first.parameters(), *second.parameters()], lr=0.1, momentum=0.9
        )
    )
    for p in [*first.parameters(), *second.parameters()]:
        p.grad = torch.ones_like(p)
    optimizer.step()  # now it has momentum buffers for the unsharded parameters
    optimizer.zero_grad()
    second(torch.relu(first(torch.ones(2, 5))))
    raise SystemExit("the two models ran: expected an error")
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
