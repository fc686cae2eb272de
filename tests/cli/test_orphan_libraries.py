"""A loader module of the batch whose importer runs a training left whole
(FeatureLearningRotNet: main.py builds ``dataloader.DataLoader`` objects, whose
``get_iterator`` makes a torch DataLoader, and hands them to
``getattr(alg, name)(config).solve(...)``, whose classes are left whole): the
loader module is left unchanged too (AM103). Before, it alone was migrated,
its loader split across processes for a training that each process ran whole
on its share, and the run differed for a reason no finding named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main

ALGORITHM = """\
import torch


class Algorithm:
    def __init__(self, opt):
        self.networks = {"model": torch.nn.Linear(4, 2)}

    def init_optimizer(self, net):
        return torch.optim.SGD(net.parameters(), lr=0.1)

    def solve(self, loader):
        self.optimizers = {"model": self.init_optimizer(self.networks["model"])}
        for batch in loader():
            self.train_step(batch)
"""

CLASSIFICATION = """\
from . import Algorithm


class ClassificationModel(Algorithm):
    def train_step(self, batch):
        loss = self.networks["model"](batch[0]).sum()
        loss.backward()
        self.optimizers["model"].step()
"""

LOADER = """\
import torch
import torch.utils.data as data


class DataLoader:
    def __init__(self, dataset, batch_size):
        self.dataset, self.batch_size = dataset, batch_size

    def __call__(self, epoch=0):
        return data.DataLoader(self.dataset, batch_size=self.batch_size, shuffle=True)
"""

MAIN = """\
import torch

import algorithms as alg
from dataloader import DataLoader

config = {"algorithm_type": "ClassificationModel"}
dloader = DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)), 4)
algorithm = getattr(alg, config["algorithm_type"])(config)
algorithm.solve(dloader)
"""


def _project(root: Path) -> None:
    package = root / "algorithms"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from .Algorithm import Algorithm\n"
        "from .ClassificationModel import ClassificationModel\n"
    )
    (package / "Algorithm.py").write_text(ALGORITHM)
    (package / "ClassificationModel.py").write_text(CLASSIFICATION)
    (root / "dataloader.py").write_text(LOADER)
    (root / "main.py").write_text(MAIN)


def test_the_loader_module_of_a_training_left_whole_is_left_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(tmp_path / "proj")
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    files = {f["path"]: f for f in report["files"]}
    assert all(f["status"] != "changed" for f in report["files"]), files
    (note,) = files["proj/dataloader.py"]["findings"]
    assert note["code"] == "AM103" and note["status"] == "needs-review"
    assert note["message"].startswith(
        "is imported by proj/main.py, which is no training entry point of its own "
        # the trainer's base module, which builds its optimizer and runs its
        # loop (a training file of the batch since its derived trainer's file)
        "and runs the training of proj/algorithms/Algorithm.py"
    )
