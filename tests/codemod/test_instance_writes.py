"""A method call of an instance of a batch training file's class that writes
files (``instance_writes``, AM017), and a library trainer whose step runs the
handed model in a method of its own (``library_trainers``): PyTorch-BYOL's
``BYOLTrainer``, whose ``train`` calls ``loss = self.update(v1, v2)`` and ends
with ``self.save_model(path)``, which main.py then loads."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

TRAINER = """\
import torch


class Trainer:
    def __init__(self, online, optimizer):
        self.online = online
        self.optimizer = optimizer

    def train(self, dataset):
        loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True)
        for x in loader:
            loss = self.update(x)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        self.save_model("model.pth")

    def update(self, x):
        return self.online(x).pow(2).mean()

    def save_model(self, path):
        torch.save(self.online.state_dict(), path)
"""

SCRIPT = """\
import torch
from torch import nn

from trainer import Trainer

net = nn.Linear(3, 2)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
trainer = Trainer(net, optimizer)
trainer.train(torch.randn(8, 3))
state = torch.load("model.pth")
"""


def _project(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "trainer.py").write_text(TRAINER)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    return script, tmp_path / "trainer.py"


def test_a_trainer_whose_step_runs_the_model_in_a_method_of_its_own(
    tmp_path: Path,
) -> None:
    """Before, `train` itself never called `self.online`, so the class was not
    taken for a library trainer and main.py was migrated while each process
    trained a full copy in trainer.py."""
    script, _ = _project(tmp_path)
    fact = dict(read_project(str(script)).helpers)["trainer.Trainer"]
    assert fact.trains == (
        "`train` calls backward (line 14) in a step that runs `self.online` "
        "(through `self.update`), which it is handed (`__init__`'s `online`)"
    )
    assert fact.trained_parameter == ("online", 0)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    assert [f.code for f in result.findings if f.status == "needs-review"] == ["AM004"]


def test_a_barrier_follows_the_call_of_a_writing_method(tmp_path: Path) -> None:
    """In a batch, trainer.py's save becomes the main process's: the caller's
    torch.load on every process must wait for it (before: FileNotFoundError on
    the other processes, with no finding)."""
    script, trainer = _project(tmp_path)
    view = ProjectView([str(script), str(trainer)])
    result = migrate_source(
        script.read_bytes(),
        str(script),
        MigrateOptions(project=view.facts_for(str(script))),
    )
    output = result.output.decode()  # type: ignore[union-attr]
    assert "trainer.train(torch.randn(8, 3))\naccel.barrier()\n" in output
    (finding,) = [f for f in result.findings if f.code == "AM017"]
    assert finding.status == "fixed" and finding.line == 9
    assert finding.message.startswith(
        "`Trainer.train` runs on every process, and `Trainer` in trainer.py writes "
        "files (torch.save) on the main process only once migrated with this batch "
        "-> accel.barrier() after the call"
    )


def test_a_call_only_some_processes_reach_is_reported(tmp_path: Path) -> None:
    script, trainer = _project(tmp_path)
    script.write_text(
        SCRIPT.replace(
            "trainer.train(torch.randn(8, 3))\n",
            "for x in torch.utils.data.DataLoader(torch.randn(8, 3), batch_size=4):\n"
            "    if x.sum() > 0:\n"
            "        trainer.train(x)\n",
        )
    )
    view = ProjectView([str(script), str(trainer)])
    result = migrate_source(
        script.read_bytes(),
        str(script),
        MigrateOptions(project=view.facts_for(str(script))),
    )
    assert "accel.barrier()" not in result.output.decode()  # type: ignore[union-attr]
    assert any(
        f.code == "AM017"
        and f.status == "needs-review"
        and "not a statement that every process reaches together" in f.message
        for f in result.findings
    )
