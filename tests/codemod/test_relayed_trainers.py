"""A class that trains through a trainer class of another local module (Deep
SVDD's ``DeepSVDD``, whose ``train`` builds optim/deepSVDD_trainer.py's
``DeepSVDDTrainer``): a script that only builds it and calls its methods
trains, two modules away (``relayed_trainers``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

TRAINER = """\
import torch
import torch.optim as optim


class SVDDTrainer:
    def __init__(self, lr):
        self.lr = lr

    def train(self, loader, net):
        optimizer = optim.Adam(net.parameters(), lr=self.lr)
        for x in loader:
            optimizer.zero_grad()
            loss = net(x).pow(2).sum(1).mean()
            loss.backward()
            optimizer.step()
        return net
"""

RELAY = """\
import torch

from optim.trainer import SVDDTrainer


class Detector(object):
    def __init__(self, net):
        self.net = net
        self.trainer = None

    def train(self, loader, lr=0.1):
        self.trainer = SVDDTrainer(lr)
        self.net = self.trainer.train(loader, self.net)


class Plain(object):
    def describe(self):
        return torch.zeros(1)
"""

SCRIPT = """\
import torch
from torch import nn

from detector import Detector

loader = [torch.randn(4, 3) for _ in range(2)]
detector = Detector(nn.Linear(3, 2))
detector.train(loader)
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "optim").mkdir()
    (tmp_path / "optim" / "__init__.py").write_text("")
    (tmp_path / "optim" / "trainer.py").write_text(TRAINER)
    (tmp_path / "detector.py").write_text(RELAY)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    return script


def test_a_class_that_builds_a_trainer_of_another_module_trains(tmp_path: Path) -> None:
    script = _project(tmp_path)
    table = dict(read_project(str(script)).helpers)
    assert table["detector.Detector"].trains_own == (
        "`train` builds `SVDDTrainer` in optim/trainer.py (line 12), which trains "
        "models of its own there: `train` calls backward (line 14), and `train` "
        "builds an optimizer (`optim.Adam(...)`, line 10)"
    )


def test_a_class_that_builds_no_trainer_does_not(tmp_path: Path) -> None:
    script = _project(tmp_path)
    (tmp_path / "probe.py").write_text("from detector import Plain\n")
    table = dict(read_project(str(tmp_path / "probe.py")).helpers)
    assert table["detector.Plain"].trains_own == ""
    assert read_project(str(script)).library_trainers


def test_the_script_is_left_whole_with_a_finding(tmp_path: Path) -> None:
    """Before, main.py was skipped as "not a training entry point", with no
    finding, while the runtime would never see its training (SILENT)."""
    script = _project(tmp_path)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 7
    assert blocking.message.startswith(
        "`Detector(nn.Linear(3, 2))` builds `Detector` in detector.py, which trains "
        "models of its own there: `train` builds `SVDDTrainer` in optim/trainer.py"
    )
