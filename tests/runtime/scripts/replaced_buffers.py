"""After the first forward, per argv[1], a part of a prepared model gets a new
value for a buffer it has, or one the same on every process
(``tests/runtime/test_late_parameters.py``): ``reset_bn`` (SWA's ``bn_update``:
``module.running_mean = torch.zeros_like(...)`` on each BatchNorm, then a pass
in train mode), ``reassign`` (``model[2].temp = model[2].temp * 0.5``),
``prune`` (``prune.l1_unstructured``: a ``weight_mask`` computed from the
weights), ``assign`` (``unwrap(model).load_state_dict(sd, assign=True)``).
``none`` logs an accuracy that is ``None`` where a share of the short last
batch is empty (33 rows, batch 8: rank 1's share of the last is empty; no
BatchNorm, which refuses a batch of one row)."""

import sys

import torch
from torch import nn

import accel_migrate.runtime as accel


class Temp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("temp", torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.temp


def reset_bn(module: nn.Module) -> None:
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        module.running_mean = torch.zeros_like(module.running_mean)
        module.running_var = torch.ones_like(module.running_var)


mode = sys.argv[1]
torch.manual_seed(0)
rows = 33 if mode == "none" else 32
X, Y = torch.randn(rows, 4), torch.randn(rows, 1)
norm = nn.Identity() if mode == "none" else nn.BatchNorm1d(8)  # a batch of 1 row
net = nn.Sequential(nn.Linear(4, 8), norm, Temp(), nn.Tanh())
model = accel.prepare_model(nn.Sequential(*net, nn.Linear(8, 1)))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
loader = accel.prepare_dataloader(
    torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=8)
)
for epoch in range(2):
    if epoch and mode == "reset_bn":
        model.apply(reset_bn)
        with torch.no_grad():
            for x, _ in loader:
                model(x)
    elif epoch and mode == "reassign":
        model[2].temp = model[2].temp * 0.5
    elif epoch and mode == "prune":
        from torch.nn.utils import prune

        prune.l1_unstructured(model[0], "weight", amount=0.3)
    elif epoch and mode == "assign":
        state = {
            k: v.clone() * 0.9 for k, v in accel.unwrap(model).state_dict().items()
        }
        accel.unwrap(model).load_state_dict(state, assign=True)
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        out = model(x)
        loss = (out - y).pow(2).mean()
        accel.backward(loss)
        optimizer.step()
        near = (out - y).abs().lt(1).float().mean() if len(y) else None
        shared = accel.global_loss(near) if mode == "none" else None
        logged = "-" if shared is None else f"{shared.item():.6e}"
        value = accel.global_loss(loss).item()
        accel.print(f"late step {5 * epoch + step} loss {value:.10e} near {logged}")
