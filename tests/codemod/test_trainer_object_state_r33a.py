"""A training step driven through an object of another module that trains its
own models (basicsr's ``model.feed_data(train_data)`` then
``model.optimize_parameters(it)``): AM020 names the draws of the method the
step calls, AM032 the pool it refills from each batch; and AM037 names a
BatchNorm subclass with a forward of its own that a model builds (MoCo's
``SplitBatchNorm`` through ``functools.partial``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

TRAINER = """
import random

import torch


class PoolModel:
    def __init__(self):
        self.net = torch.nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.queue_size = 8

    def _dequeue_and_enqueue(self):
        b = self.x.shape[0]
        if not hasattr(self, "queue_x"):
            self.queue_x = torch.zeros(self.queue_size, 4).to("cpu")
            self.ptr = 0
        if self.ptr == self.queue_size:
            idx = torch.randperm(self.queue_size)
            self.queue_x = self.queue_x[idx]
            out = self.queue_x[0:b].clone()
            self.queue_x[0:b] = self.x.clone()
            self.x = out
        else:
            self.queue_x[self.ptr : self.ptr + b] = self.x.clone()
            self.ptr = self.ptr + b

    @torch.no_grad()
    def feed_data(self, data):
        self.x = data[0] * random.uniform(0.5, 1.5)
        self.y = data[1]
        self._dequeue_and_enqueue()

    def optimize_parameters(self):
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.net(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.log = {"loss": loss.item()}

    def current_log(self):
        return self.log
"""

MAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import PoolModel

loader = DataLoader(
    TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4, shuffle=True
)
model = PoolModel()
for epoch in range(2):
    for data in loader:
        model.feed_data(data)
        model.optimize_parameters()
        print(model.current_log()["loss"])
"""


def _findings(folder: Path, name: str, code: str, batch: bool = False) -> list[str]:
    path = folder / name
    source = path.read_text()
    options = MigrateOptions()
    if batch:  # every file of the folder migrated together
        view = ProjectView([str(p) for p in sorted(folder.glob("*.py"))])
        options = MigrateOptions(project=view.facts_for(str(path)))
    result = migrate_source(source, str(path), options)
    return [f"{f.line}: {f.message}" for f in result.findings if f.code == code]


def test_the_draws_and_pool_of_a_trainer_objects_method(tmp_path: Path) -> None:
    (tmp_path / "trainer.py").write_text(TRAINER)
    (tmp_path / "main.py").write_text(MAIN)
    # (alone, main.py is left whole: AM004 says PoolModel trains in trainer.py)
    draws = _findings(tmp_path, "main.py", "AM020", batch=True)
    assert len(draws) == 1 and draws[0].startswith("13: ")
    assert "`PoolModel.feed_data` in trainer.py (`random.uniform`)" in draws[0]
    pools = _findings(tmp_path, "main.py", "AM032", batch=True)
    assert len(pools) == 1 and pools[0].startswith("13: ")
    assert (
        "`PoolModel._dequeue_and_enqueue` writes the buffer `self.queue_x`" in pools[0]
    )
    assert "DDP" not in pools[0]  # not a model: no buffers handed by DDP


MODEL = """
from functools import partial

import torch.nn as nn


class SplitBatchNorm(nn.BatchNorm1d):
    def __init__(self, num_features, num_splits):
        super().__init__(num_features)
        self.num_splits = num_splits

    def forward(self, x):
        n, c = x.shape
        return super().forward(x.view(-1, c * self.num_splits)).view(n, c)


class PlainNorm(nn.BatchNorm1d):
    pass


class Net(nn.Module):
    def __init__(self, splits=2):
        super().__init__()
        norm = partial(SplitBatchNorm, num_splits=splits)
        self.body = nn.Sequential(nn.Linear(4, 8), norm(8), nn.Linear(8, 1))

    def forward(self, x):
        return self.body(x)


class PlainNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), PlainNorm(8), nn.Linear(8, 1))

    def forward(self, x):
        return self.body(x)
"""

NORM_MAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import Net, PlainNet

loader = DataLoader(
    TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8, shuffle=True
)
model = Net()
plain = PlainNet()
opt = torch.optim.SGD([*model.parameters(), *plain.parameters()], lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x) + plain(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_batchnorm_subclass_with_its_own_forward(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "main.py").write_text(NORM_MAIN)
    found = _findings(tmp_path, "main.py", "AM037")
    assert len(found) == 1 and found[0].startswith("10: "), found
    assert "`SplitBatchNorm` (model.py line 7) is a BatchNorm layer" in found[0]
    assert "UnsyncedBatchNormError" in found[0]
