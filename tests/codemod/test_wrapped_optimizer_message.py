"""LSTNet's shape (round t8c): ``train(data, X, Y, model, criterion, optim,
batch_size)`` steps a wrapper of another module (``Optim.Optim(model.
parameters(), 'adam', lr, clip)`` builds the torch optimizer in its
``_makeOptimizer``). AM004 leaves the file whole, as before; its message now
names the wrapper the parameters are handed to, and says that the model it
points at is a parameter of ``train()`` (it said "where it is built (line
N)" of the ``def`` line before)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source

OPTIM = """\
import torch.optim as optim


class Optim(object):
    def _makeOptimizer(self):
        self.optimizer = optim.Adam(self.params, lr=self.lr)

    def __init__(self, params, lr):
        self.params = list(params)
        self.lr = lr
        self._makeOptimizer()

    def step(self):
        self.optimizer.step()
"""

MAIN = """\
import torch

import Optim


def train(X, Y, model, optim):
    model.train()
    for i in range(0, len(X), 4):
        model.zero_grad()
        loss = torch.nn.functional.l1_loss(model(X[i:i + 4]), Y[i:i + 4], reduction="sum")
        loss.backward()
        optim.step()


model = torch.nn.Linear(3, 3)
optim = Optim.Optim(model.parameters(), 0.01)
for epoch in range(2):
    train(torch.randn(16, 3), torch.randn(16, 3), model, optim)
"""


def test_am004_names_the_wrapper_and_the_parameter(tmp_path: Path) -> None:
    (tmp_path / "Optim.py").write_text(OPTIM)
    script = tmp_path / "main.py"
    script.write_text(MAIN)
    result = migrate_source(MAIN, str(script), MigrateOptions())
    assert result.output == MAIN
    (finding,) = [f for f in result.findings if f.code == "AM004"]
    assert finding.status == "needs-review"
    assert (
        "(`Optim.Optim(model.parameters(), 0.01)`, line 16, hands them to `Optim` in Optim.py"
        in finding.message
    )
    assert "here `model` is a parameter of `train()`, line 6" in finding.message


def test_without_the_wrapper_the_message_keeps_its_plain_form(tmp_path: Path) -> None:
    source = MAIN.replace("import Optim\n", "").replace(
        "optim = Optim.Optim(model.parameters(), 0.01)", "optim = None"
    )
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    found = [f for f in result.findings if f.code == "AM004"]
    assert found and "hands them to" not in found[0].message
