"""A part removed from a prepared model after its first forward, per argv[1]:
``del`` (``del model.aux``), ``none`` (``model.aux = None``) or ``block``
(``del model.blocks[1]``, a block FSDP shards as a unit of its own: LayerDrop
made permanent); the forward uses what is there. Prints each step's global loss and saves the
state dict to argv[2] (``tests/runtime/test_removed_part.py``)."""

import sys

import torch
from torch import nn

import accel_migrate.runtime as accel


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.linear(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        self.aux = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        out = self.body(x)
        aux = getattr(self, "aux", None)
        return out if aux is None else out + aux(x)


mode = sys.argv[1]
torch.manual_seed(0)
X, Y = torch.randn(24, 4), torch.randn(24, 1)
model = accel.prepare_model(Net())
optimizer = accel.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=0.05))
for phase in range(2):
    if phase and mode == "del":
        del model.aux
    elif phase and mode == "none":
        model.aux = None
    elif phase:
        del model.blocks[1]
    loader = accel.prepare_dataloader(
        torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=8)
    )
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        accel.backward(loss)
        optimizer.step()
        value = accel.global_loss(loss).item()
        accel.print(f"removed step {3 * phase + step} loss {value:.10e}")
accel.save(accel.state_dict(model), sys.argv[2])
