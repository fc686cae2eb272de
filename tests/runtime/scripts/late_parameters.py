"""Parameters a prepared model gets after its first forward, per argv[1]:
``attr`` (``model.scale = nn.Parameter(...)``), ``reg`` (``register_parameter``),
``nested`` (``model[2].scale = ...``, past the prepared model), ``frozen`` (the
whole model frozen at its first forward, unfrozen in the second phase),
``drawn`` (an attribute write of a value each process draws differently, as its
random state has drifted: every process must train rank 0's; ``drawnpart``: the
same written on a part, ``model[2].scale``;
``tests/runtime/test_late_parameters.py``), ``buffer`` (``register_buffer`` of
such a drawn value, which the loss adds: refused under every distributed
strategy),
``branch`` (as ``nested``, used only for a batch whose targets' mean is
positive: at world 2 the first such share is rank 0's alone), ``subbuffer``
(``register_buffer`` of a drawn value on a submodule, ``model[2]``),
``bufmodule`` (``add_module`` of a module that holds only such a buffer),
``frozenpart`` (as ``drawnpart``, the parameter frozen: requires_grad=False),
``latebn`` (``add_module`` of a BatchNorm: with the other layers' statistics,
the global batch's), ``uneven`` (as ``nested``, on rank 0 only), ``cache``
(a module that registers a buffer in its own forward, the same on every
process: a rotary-embedding cache grown for a longer input), ``forward`` (a
layer that builds its BatchNorm at its first forward and grows a cache there,
an evaluation forward that rank 0 alone runs, which grows that cache on rank 0
only, then ``model[2] = nn.Linear(...)`` of a layer each process draws
differently: every process must train rank 0's), ``slow`` (as ``nested``,
rank 0 evaluating for 3 s first while rank 1 waits in the statement)."""

import os
import sys
import time

import torch
from torch import nn

import accel_migrate.runtime as accel


class Shift(nn.Module):
    def __init__(self, value: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("value", value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.value


class Cache(nn.Module):
    """Registers its buffer at its first forward after ``grow`` is set."""

    grow = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.grow and not hasattr(self, "table"):
            self.register_buffer("table", torch.linspace(0, 1, 8), persistent=False)
        return x + self.table[: x.shape[1]].sum() if self.grow else x


class Builds(nn.Module):
    """Builds its BatchNorm at its first forward; grows a cache for longer inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.zeros(1))
        self.bn: nn.Module | None = None
        self.size = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bn is None:
            self.bn = nn.BatchNorm1d(x.shape[1])
        if x.shape[0] > self.size:
            self.register_buffer("table", torch.linspace(0, 1, x.shape[0]))
            self.size = x.shape[0]
        return self.bn(x) + self.offset + 0 * self.table[: x.shape[0]].sum()


mode = sys.argv[1]
rank = int(os.environ.get("RANK", 0))
torch.manual_seed(0)
X, Y = torch.randn(24, 4), torch.randn(24, 1)
backbone = accel.prepare_model(nn.Sequential(nn.Linear(4, 8), nn.Tanh()))
layers = [nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1)]
model = accel.prepare_model(
    nn.Sequential(
        *layers,
        *([Cache()] if mode == "cache" else []),
        *([Builds()] if mode == "forward" else []),
    )
)
params = [*backbone.parameters(), *model.parameters()]
optimizer = accel.prepare_optimizer(torch.optim.SGD(params, lr=0.1))
if mode == "frozen":
    backbone.requires_grad_(False)
for phase in range(2):
    if phase and mode == "frozen":
        backbone.requires_grad_(True)
    elif phase and mode in ("buffer", "subbuffer", "bufmodule"):
        drift = torch.Generator().manual_seed(rank)
        shift = torch.randn(1, generator=drift)
        if mode == "buffer":
            model.register_buffer("shift", shift)
        elif mode == "subbuffer":
            model[2].register_buffer("shift", shift)
        else:
            model.add_module("3", Shift(shift))
    elif phase and mode == "latebn":
        model.add_module("3", nn.BatchNorm1d(1))
        optimizer.add_param_group({"params": list(model[3].parameters())})
    elif phase and mode == "forward":
        if rank == 0:  # an evaluation on the main process alone
            model.eval()
            with torch.no_grad():
                model(backbone(X))
            model.train()
        torch.manual_seed(1 + rank)  # each process draws its own
        model[2] = nn.Linear(8, 1)
        optimizer.add_param_group({"params": list(model[2].parameters())})
    elif phase and mode == "cache":
        model[3].grow = True
    elif phase and mode == "frozenpart":
        # a frozen parameter each process draws differently: rank 0's, the
        # original's draw, everywhere (before r33b each process kept its own)
        drift = torch.Generator().manual_seed(rank)
        drawn = 0.5 * torch.randn(1, generator=drift)
        model[2].scale = nn.Parameter(drawn, requires_grad=False)
    elif phase and mode == "uneven":
        if rank == 0:
            scale = nn.Parameter(torch.zeros(1))
            start = time.monotonic()
            try:
                model[2].scale = scale
            finally:  # how long rank 0 waited for rank 1 (which went on)
                print(f"late statement {time.monotonic() - start:.2f} s", flush=True)
            optimizer.add_param_group({"params": [scale]})
    elif phase:
        if mode == "slow" and rank == 0:
            # rank 0 evaluates a while before the statement every rank runs
            # (rank 1 waits in it): it still meets rank 1 there
            with torch.no_grad():
                model(backbone(X))
            time.sleep(3)
        scale = nn.Parameter(torch.zeros(1))
        if mode in ("drawn", "drawnpart"):
            # unset on one process: rank 0's draw, the one the original makes
            drift = torch.Generator().manual_seed(int(os.environ.get("RANK", 0)))
            scale = nn.Parameter(0.5 * torch.randn(1, generator=drift))
        if mode in ("attr", "drawn"):
            model.scale = scale
        elif mode == "reg":
            model.register_parameter("scale", scale)
        else:  # nested, branch, drawnpart, slow
            model[2].scale = scale
        optimizer.add_param_group({"params": [scale]})
    loader = accel.prepare_dataloader(
        torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=8)
    )
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        out = model(backbone(x))
        if phase and mode == "buffer":
            out = out + model.shift
        elif phase and mode == "subbuffer":
            out = out + model[2].shift
        elif mode == "forward" or (phase and mode in ("bufmodule", "latebn", "cache")):
            pass  # in the model's forward
        elif phase and mode == "frozenpart":
            out = out * (1 + model[2].scale)
        elif phase and mode == "uneven":
            if rank == 0:
                out = out * (1 + model[2].scale)
        elif phase and mode == "branch":
            if y.mean() > 0:
                out = out * (1 + scale)
        elif phase and mode != "frozen":
            out = out * (1 + scale)
        loss = (out - y).pow(2).mean()
        accel.backward(loss)
        optimizer.step()
        value = accel.global_loss(loss).item()
        accel.print(f"late step {3 * phase + step} loss {value:.10e}")
state = {
    **accel.state_dict(model),
    **{"b." + k: v for k, v in accel.state_dict(backbone).items()},
}
accel.save(state, sys.argv[2])
