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


# ADDA's layout (corenel/pytorch-adda): datasets/mnist.py builds the loader,
# datasets/__init__.py re-exports it, utils.py's get_data_loader hands it to
# main.py, which trains in core/adapt.py with models built by utils.init_model
# (not followed: the training is left whole). No importer of the loader module
# is migrated, so its loader is not split either.
ADDA_MNIST = """\
import torch
from torch.utils import data


def get_mnist(train):
    dataset = data.TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    return data.DataLoader(dataset=dataset, batch_size=4, shuffle=True)
"""

ADDA_UTILS = """\
import torch

from datasets import get_mnist


def get_data_loader(name, train=True):
    return get_mnist(train)


def init_model(net, restore):
    if torch.cuda.is_available():
        net.cuda()
    return net
"""

ADDA_ADAPT = """\
import torch


def train_tgt(encoder, loader):
    optimizer = torch.optim.Adam(encoder.parameters())
    for images, labels in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(encoder(images), labels)
        loss.backward()
        optimizer.step()
    return encoder
"""

ADDA_MAIN = """\
import torch

from core.adapt import train_tgt
from utils import get_data_loader, init_model

loader = get_data_loader("MNIST")
encoder = init_model(net=torch.nn.Linear(4, 2), restore=None)
encoder = train_tgt(encoder, loader)
"""


def _adda(root: Path) -> None:
    (root / "datasets").mkdir(parents=True)
    (root / "datasets" / "__init__.py").write_text("from .mnist import get_mnist\n")
    (root / "datasets" / "mnist.py").write_text(ADDA_MNIST)
    (root / "core").mkdir()
    (root / "core" / "__init__.py").write_text("")
    (root / "core" / "adapt.py").write_text(ADDA_ADAPT)
    (root / "utils.py").write_text(ADDA_UTILS)
    (root / "main.py").write_text(ADDA_MAIN)


def test_a_loader_module_no_migrated_file_imports_is_left_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _adda(tmp_path / "proj")
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    files = {f["path"]: f for f in report["files"]}
    assert all(f["status"] != "changed" for f in report["files"]), files
    (note,) = files["proj/datasets/mnist.py"]["findings"]
    assert note["code"] == "AM103" and note["status"] == "needs-review"
    assert note["message"].startswith(
        "is imported, directly or through other files, only by files of this "
        "batch that are not migrated, among them proj/main.py, a training "
        "file left unchanged"
    )


def test_a_loader_module_a_migrated_file_imports_keeps_its_migration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the same layout with the training in main.py itself: main.py is migrated,
    # and the loader module it imports through utils.py keeps its loader prepared
    _adda(tmp_path / "proj")
    (tmp_path / "proj" / "main.py").write_text(
        "import torch\n\n"
        "from utils import get_data_loader\n\n"
        "loader = get_data_loader('MNIST')\n"
        "model = torch.nn.Linear(4, 2)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for images, labels in loader:\n"
        "    optimizer.zero_grad()\n"
        "    loss = torch.nn.functional.cross_entropy(model(images), labels)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    files = {f["path"]: f for f in report["files"]}
    assert files["proj/main.py"]["status"] == "changed", files["proj/main.py"]
    mnist = files["proj/datasets/mnist.py"]
    assert mnist["status"] == "changed", mnist
    assert all(f["code"] != "AM103" for f in mnist["findings"])
