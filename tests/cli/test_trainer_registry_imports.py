"""AM103 pairs a training file with an importer that reaches it through a
helper module that trains nothing itself (CenterNet: main.py picks its Trainer
from trains/train_factory.py, which imports trains/ctdet.py, whose
CtdetTrainer derives from trains/base_trainer.py's BaseTrainer, where the
backward is). When main.py is left whole, base_trainer.py is left whole too:
a trainer migrated (its model wrapped, its backward rewritten) under a main
script that was not is half a migration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main

BASE = """\
import torch


class ModelWithLoss(torch.nn.Module):
    def __init__(self, model, loss):
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, x, y):
        return self.loss(self.model(x), y)


class BaseTrainer:
    def __init__(self, model, optimizer):
        self.optimizer = optimizer
        self.model_with_loss = ModelWithLoss(model, self._get_losses())

    def train(self, loader):
        for x, y in loader:
            loss = self.model_with_loss(x, y).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def _get_losses(self):
        raise NotImplementedError
"""

CTDET = """\
import torch

from .base_trainer import BaseTrainer


class CtdetLoss(torch.nn.Module):
    def forward(self, out, y):
        return ((out.squeeze(1) - y) ** 2).mean()


class CtdetTrainer(BaseTrainer):
    def _get_losses(self):
        return CtdetLoss()
"""

FACTORY = """\
from .ctdet import CtdetTrainer

train_factory = {"ctdet": CtdetTrainer}
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from trains.train_factory import train_factory


def load_model(model, path, optimizer):
    state = torch.load(path)
    model = state["model"]
    return model, optimizer, state["epoch"]


model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if RESUME:
    model, optimizer, start_epoch = load_model(model, "ckpt.pth", optimizer)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8)), batch_size=4)
trainer = train_factory["ctdet"](model, optimizer)
trainer.train(loader)
"""


def _batch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    main_source: str,
) -> dict[str, tuple[str, list[str]]]:
    root = tmp_path / "proj"
    (root / "trains").mkdir(parents=True)
    (root / "trains" / "__init__.py").write_text("")
    (root / "trains" / "base_trainer.py").write_text(BASE)
    (root / "trains" / "ctdet.py").write_text(CTDET)
    (root / "trains" / "train_factory.py").write_text(FACTORY)
    (root / "main.py").write_text(main_source)
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    return {
        Path(f["path"]).as_posix(): (
            f["status"],
            [x["code"] for x in f["findings"] if x["status"] == "needs-review"],
        )
        for f in report["files"]
        if f["status"] != "skipped"
    }


def test_a_trainer_reached_through_a_registry_is_left_whole_with_its_importer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = _batch(tmp_path, monkeypatch, capsys, MAIN.replace("RESUME", "False"))
    status, codes = found["proj/main.py"]
    assert status == "unchanged" and "AM004" in codes, found
    # before: trains/base_trainer.py came back changed (its model wrapped,
    # its backward rewritten) while main.py, which builds both, was not
    assert found["proj/trains/base_trainer.py"] == ("unchanged", ["AM103"]), found
