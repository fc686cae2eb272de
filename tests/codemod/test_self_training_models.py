"""A model class that trains itself (knowledge-tracing-collection-pytorch's
``DKT.train_model(train_loader, test_loader, num_epochs, opt, ckpt_path)``,
whose loop calls ``self(q, r)`` and ``loss.backward()``): the script that calls
it is left unchanged with AM042's reason (before round t8c, file mode prepared
the model, the optimizer and the loaders, and the runtime stopped the run at
the first step: the method's ``self(...)`` never goes through the prepared
model's call). ``training_methods`` reads such methods; a method that runs the
layers without a backward (``predict``) is no training method."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.layer_methods import training_methods
from accel_migrate.codemod.project_view import ProjectView

MODEL = """\
import torch
from torch.nn import Linear, Module
from torch.nn.functional import binary_cross_entropy


class DKT(Module):
    def __init__(self, n):
        super().__init__()
        self.out = Linear(n, 1)

    def forward(self, x):
        return torch.sigmoid(self.out(x)).squeeze(-1)

    def predict(self, x):
        return self(x) > 0.5

    def _epoch(self, loader, opt):
        for x, t in loader:
            y = self(x)
            opt.zero_grad()
            loss = binary_cross_entropy(y, t)
            loss.backward()
            opt.step()

    def train_model(self, train_loader, num_epochs, opt):
        for _ in range(num_epochs):
            self._epoch(train_loader, opt)
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from dkt import DKT

data = TensorDataset(torch.randn(16, 4), torch.rand(16).round())
train_loader = DataLoader(data, batch_size=4, shuffle=True)
model = DKT(4)
opt = torch.optim.Adam(model.parameters(), 0.01)
model.train_model(train_loader, 2, opt)
torch.save(model.state_dict(), "model.ckpt")
"""


def test_training_methods_are_layer_methods_that_backpropagate() -> None:
    cls = ast.parse(MODEL).body[3]
    assert isinstance(cls, ast.ClassDef)
    assert training_methods(cls) == ("_epoch", "train_model")


@pytest.mark.parametrize("mode", ["file", "batch", "one file"])
def test_a_script_calling_a_self_training_model_is_left_whole(
    tmp_path: Path, mode: str
) -> None:
    (tmp_path / "dkt.py").write_text(MODEL)
    script = tmp_path / "main.py"
    script.write_text(MAIN)
    source, options, where = MAIN, MigrateOptions(), "`DKT` in dkt.py"
    if mode == "batch":
        view = ProjectView([str(script), str(tmp_path / "dkt.py")])
        options = MigrateOptions(project=view.facts_for(str(script)))
    elif mode == "one file":
        source = MODEL + "\n\n" + MAIN.replace("from dkt import DKT\n", "")
        where = "`DKT`"
    result = migrate_source(source, str(script), options)
    assert result.output == source  # left whole
    found = [f for f in result.findings if f.code == "AM042"]
    assert len(found) == 1 and found[0].status == "needs-review", found
    assert (
        f"`train_model` of {where} runs the model's layers itself" in found[0].message
    )


def test_a_layer_method_without_backward_is_not_blocked(tmp_path: Path) -> None:
    (tmp_path / "dkt.py").write_text(MODEL)
    script = tmp_path / "main.py"
    source = MAIN.replace(
        "model.train_model(train_loader, 2, opt)",
        "print(model.predict(torch.randn(2, 4)))",
    )
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    assert not [f for f in result.findings if f.code == "AM042"]
