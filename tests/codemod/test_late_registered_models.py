"""A method of a prepared model's class that registers buffers after the model
is prepared (pytorch-ewc's ``MLP.consolidate``, run by ``train(model, ...)`` of
another file): the setup is left whole with an AM004 finding naming it (before,
``main.py`` prepared the model and the run raised ``LateRegistrationError``
after the first task)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

MODEL = """\
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)

    def consolidate(self, fisher):
        for n, p in self.named_parameters():
            n = n.replace(".", "__")
            self.register_buffer("{}_mean".format(n), p.data.clone())
            self.register_buffer("{}_fisher".format(n), fisher[n].clone())

    def scale(self):
        self.register_parameter("gain", nn.Parameter(torch.ones(1)))
"""

TRAIN = """\
from torch import nn, optim
from torch.utils.data import DataLoader


def train(model, datasets, fisher=None):
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for dataset in datasets:
        for x, y in DataLoader(dataset, batch_size=4, shuffle=True):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        CALL
"""

SCRIPT = """\
import torch

from model import MLP
from train import train

mlp = MLP()
train(mlp, datasets)
torch.save(mlp.state_dict(), "out.pt")
"""


def _migrate(tmp_path: Path, call: str) -> tuple[str, list]:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(TRAIN.replace("CALL", call))
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    files = [str(tmp_path / n) for n in ("main.py", "train.py", "model.py")]
    facts = ProjectView(files).facts_for(str(script))
    fact = dict(facts.helpers)["model.MLP"]
    assert [m for m, _ in fact.late_registrations] == ["consolidate"]
    result = migrate_source(
        script.read_bytes(), str(script), MigrateOptions(project=facts)
    )
    return (result.output or script.read_bytes()).decode(), result.findings


def test_a_buffer_registered_by_a_method_run_on_the_prepared_model(
    tmp_path: Path,
) -> None:
    """`train` calls `model.consolidate(fisher)` on the model `main.py` hands
    it, and `consolidate` registers buffers: main.py is left unchanged with an
    AM004 finding at the call that hands the model, naming the method."""
    output, findings = _migrate(tmp_path, "model.consolidate(fisher)")
    assert "prepare_model" not in output
    found = [f for f in findings if f.status == "needs-review"]
    assert [(f.code, f.line) for f in found] == [("AM004", 7)]
    assert found[0].message.startswith(
        "`train(mlp, datasets)` hands the prepared model to `train` in train.py, "
        "whose `model.consolidate(...)` (line 14) runs `MLP.consolidate`, which "
        "registers on the model with `self.register_buffer("
    )
    assert "LateRegistrationError" in found[0].message


def test_a_late_parameter_is_adopted_and_an_uncalled_method_is_not_read(
    tmp_path: Path,
) -> None:
    """`scale` registers a parameter (the runtime adopts it), and a train
    that never calls `consolidate` runs no late buffer: the model is prepared
    as before."""
    output, findings = _migrate(tmp_path, "model.scale()")
    assert "mlp = accel.prepare_model(MLP())" in output
    assert not [f for f in findings if f.status == "needs-review"]
