"""A module of a local package imported by a computed name (the t14a trial):
GradientEpisodicMemory's ``Model = importlib.import_module('model.' + args.model)``
then ``model = Model.Net(...)``, whose ``observe`` backpropagates and steps the
optimizer the model owns. main.py has no loop, loader or optimizer of its own:
it was skipped as "not a training entry point" with no finding (SILENT in the
soundness corpus); now AM004 leaves it whole and names the package's trainer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.dynamic_trainers import named_package
from accel_migrate.codemod.project_view import read_project

GEM = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, lr):
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.ce = nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.parameters(), lr)

    def forward(self, x):
        return self.net(x)

    def observe(self, x, y):
        self.zero_grad()
        loss = self.ce(self.forward(x), y)
        loss.backward()
        self.opt.step()
        return loss.item()
"""

SCRIPT = """\
import importlib

import torch

x = torch.randn(8, 4)
y = torch.randint(0, 2, (8,))
Model = importlib.import_module("model." + "gem")
model = Model.Net(0.1)
for i in range(2):
    print(model.observe(x, y))
torch.save(model.state_dict(), "m.pt")
"""


def _project(tmp_path: Path, script: str = SCRIPT) -> Path:
    package = tmp_path / "model"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gem.py").write_text(GEM)
    main = tmp_path / "main.py"
    main.write_text(script)
    return main


@pytest.mark.parametrize(
    "spelled, package",
    [
        ("'model.' + args.model", "model"),
        ("f'model.{args.model}'", "model"),
        ("'model.%s' % args.model", "model"),
        ("'pkg.models.{}'.format(name)", "pkg.models"),
        ("args.model", ""),
        ("'gem' + suffix", ""),
    ],
)
def test_the_package_of_a_computed_module_name(spelled: str, package: str) -> None:
    assert named_package(ast.parse(spelled, mode="eval").body) == package


def test_the_package_modules_are_read_as_helpers(tmp_path: Path) -> None:
    table = dict(read_project(str(_project(tmp_path))).helpers)
    assert table["model.gem.Net"].training_methods == ("observe",)


def test_a_module_imported_by_name_whose_model_trains_itself_blocks(
    tmp_path: Path,
) -> None:
    script = _project(tmp_path)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed and result.skip_reason is None
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 7
    assert blocking.message.startswith(
        '`importlib.import_module("model." + "gem")` imports a module of the '
        "local package `model` picked by name, and its classes train: `Net` in "
        "model/gem.py trains itself there (it backpropagates and steps in "
        "`observe`)."
    )


def test_a_package_without_trainers_is_still_not_training(tmp_path: Path) -> None:
    script = _project(tmp_path)
    (tmp_path / "model" / "gem.py").write_text(
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        return x\n"
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    assert not [f for f in result.findings if f.code == "AM004"]
