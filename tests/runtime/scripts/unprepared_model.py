"""A migrated script whose model the codemod missed (or did not): the first step
must refuse an unprepared model on every rank, and let a prepared one train.

Modes: prepared, unprepared (accel.backward), plain_backward (loss.backward()
and a prepared optimizer), gan (G prepared, D missed), perceptual (an unprepared
network that no optimizer holds: allowed).
"""

import sys

import torch
from torch import nn

import accel_migrate.runtime as accel

mode = sys.argv[1]
torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


model = Classifier().to(accel.device())
if mode in ("prepared", "perceptual", "gan"):
    model = accel.prepare_model(model)
critic = Classifier().to(accel.device())
if mode == "gan":
    critic_opt = accel.prepare_optimizer(torch.optim.SGD(critic.parameters(), lr=0.1))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
for step in range(3):
    x = torch.randn(8, 4)
    optimizer.zero_grad()
    out = model(x)
    if mode in ("gan", "perceptual"):
        out = critic(out.expand(-1, 4))
    loss = out.pow(2).mean()
    if mode == "plain_backward":
        loss.backward()
    else:
        accel.backward(loss)
    optimizer.step()
    accel.print(f"step {step} loss {accel.global_loss(loss).item():.6f}")
accel.print("trained")
