"""AM004 does not prepare, as a model, a criterion module of the file that
holds no parameter (DINO's ``DINOLoss``: a ``center`` buffer, temperatures, a
numpy schedule), moved to the device but trained by no optimizer; a module
with a layer, or one an optimizer is built over, still is."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class CenteredLoss(nn.Module):
    def __init__(self, out_dim, epochs):
        super().__init__()
        self.temp = 0.1
        self.schedule = np.linspace(0.04, 0.07, epochs)
        self.register_buffer("center", torch.zeros(1, out_dim))
{extra}
    def forward(self, student, teacher, epoch):
        t = F.softmax((teacher - self.center) / self.schedule[epoch], dim=-1)
        return torch.sum(-t * F.log_softmax(student / self.temp, dim=-1), dim=-1).mean()


def train_one_epoch(model, criterion, opt, epoch):
    for (x,) in DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4):
        x = x.to(device)
        loss = criterion(model(x), model(x).detach(), epoch)
        opt.zero_grad()
        loss.backward()
        opt.step()


def main():
    global device
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 3).to(device)
    criterion = CenteredLoss(
        3,
        2,
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_one_epoch(model, criterion, opt, epoch)


main()
"""


def test_a_parameterless_criterion_is_not_prepared() -> None:
    result = migrate_source(SCRIPT.format(extra=""), "train.py")
    # (before: `criterion = accel.prepare_model(CenteredLoss(3, 2)).to(device)`,
    # handed to the step function beside the model)
    assert "    criterion = CenteredLoss(\n" in result.output
    assert "model = accel.prepare_model(nn.Linear(4, 3)" in result.output


@pytest.mark.parametrize(
    "extra",
    [
        "        self.proj = nn.Linear(3, 3)\n",
        "        self.scale = nn.Parameter(torch.ones(1))\n",
        '        self.register_parameter("w", nn.Parameter(torch.ones(1)))\n',
        # a module held from a parameter, called in the forward
        "        self.head = out_dim\n\n    def project(self, x):\n"
        "        return self.head(x)\n",
    ],
)
def test_a_module_with_parameters_still_is(extra: str) -> None:
    result = migrate_source(SCRIPT.format(extra=extra), "train.py")
    assert "criterion = accel.prepare_model(\n        CenteredLoss(\n" in result.output


@pytest.mark.parametrize(
    "extra",
    [
        # an unpacking, an annotated assignment, a registered module, a load
        "        self.w, self.b = nn.Linear(3, 3), nn.Linear(3, 3)\n",
        "        self.fc: nn.Linear = nn.Linear(3, 3)\n",
        '        self.register_module("fc", nn.Linear(3, 3))\n',
        '        self.net = torch.hub.load("repo", "net")\n',
        '        self.net = torch.jit.load("net.pt")\n',
        '        self.net = torch.load("net.pt")\n',
    ],
)
def test_a_module_whose_layers_hide_from_a_plain_assignment_is(extra: str) -> None:
    # (before: read as parameterless, left unprepared)
    result = migrate_source(SCRIPT.format(extra=extra), "train.py")
    assert "criterion = accel.prepare_model(\n        CenteredLoss(\n" in result.output


def test_a_parameterless_module_an_added_param_group_trains_is_prepared() -> None:
    source = SCRIPT.format(extra="").replace(
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        '    opt.add_param_group({"params": criterion.parameters()})\n',
    )
    result = migrate_source(source, "train.py")
    # (before: skipped, only `SGD(...)`'s own arguments counted as optimized)
    assert "criterion = accel.prepare_model(\n        CenteredLoss(\n" in result.output
