"""An evaluation after training, under DDP with global-batch BatchNorm, of a
model with a buffer that is not BatchNorm's and that its forward updates from
each process's share (a running mean of the inputs). The evaluation's forward
skips DDP's wrapper (``DDPStrategy.without_grad``), so it skips DDP's broadcast
of buffers too. The main process prints every process's sum of its
evaluation output and of the buffer (``tests/runtime/test_ddp_without_grad.py``)."""

import torch
from torch import nn

import accel_migrate.runtime as accel


class Center(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.mean.mul_(0.5).add_(0.5 * x.detach().mean(0))
        return x - self.mean


torch.manual_seed(0)
X, Y = torch.randn(32, 4) + torch.arange(32.0)[:, None] / 8, torch.randn(32, 1)
model = accel.prepare_model(
    nn.Sequential(Center(), nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1))
)
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
loader = accel.prepare_dataloader(
    torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=8)
)
for x, y in loader:
    optimizer.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    accel.backward(loss)
    optimizer.step()
model.eval()
with torch.no_grad():
    out = model(X)
# every process's values, printed by the main process (one stream)
rows = accel.gather(torch.stack([out.sum(), model[0].mean.sum()])[None])
for index, (value, mean) in enumerate(rows.tolist()):
    accel.print(f"rank {index} eval {value:.8e} mean {mean:.8e}")
