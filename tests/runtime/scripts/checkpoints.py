"""Checkpoint round trips under the strategy given by the launcher.

argv: WORKDIR. Loads WORKDIR/plain.pt (a plain PyTorch state dict) into the prepared
model after its first forward, checks that a gathered state dict gives it back,
trains two steps, and saves model and optimizer state dicts the way a migrated
script does.
"""

import sys
from pathlib import Path

import torch
from torch import nn

import accel_migrate.runtime as accel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 10)
        self.head = nn.Linear(10, 3)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))


workdir = Path(sys.argv[1])
torch.manual_seed(accel.rank() + 1)  # ranks start different on purpose
model = accel.prepare_model(Net())
optimizer = accel.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=0.01))
x = torch.randn(8, 6).to(accel.device())
model(x)  # shard (FSDP) / wrap (DDP) first: loading must work on the prepared form

plain = torch.load(workdir / "plain.pt")
accel.load_state_dict(model, plain)
gathered = accel.state_dict(model)
if accel.is_main_process():
    assert list(gathered) == list(plain), (list(gathered), list(plain))
    for key in plain:
        assert torch.equal(gathered[key].cpu(), plain[key]), key

torch.manual_seed(0)
data = torch.randn(8, 6).to(accel.device())
target = torch.randn(8, 3).to(accel.device())
for _ in range(2):
    optimizer.zero_grad()
    accel.backward(nn.functional.mse_loss(model(data), target))
    optimizer.step()
accel.save(accel.state_dict(model), workdir / f"{accel.world_size()}-model.pt")
accel.save(optimizer.state_dict(), workdir / f"{accel.world_size()}-optimizer.pt")
accel.print("saved")
