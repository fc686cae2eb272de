"""A model a base class's constructor builds through a method the subclass
overrides (Informer2020's ``Exp_Basic.__init__``: ``self.model =
self._build_model().to(self.device)``; round 25b): AM004 leaves the file
whole and says where the model is built and why it is not prepared, in batch
mode, in file mode and with the base in the same file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.base_init_assignments import init_built
from accel_migrate.codemod.project_view import ProjectView, read_project

BASE = """\
import torch


class ExpBase(object):
    def __init__(self, args):
        self.args = args
        self.device = torch.device("cpu")
        self.model = self._build_model().to(self.device)
        self.name = str(args)

    def _build_model(self):
        raise NotImplementedError
"""

EXP = """\
import torch
from torch.utils.data import DataLoader

from base import ExpBase


class Exp(ExpBase):
    def _build_model(self):
        return torch.nn.Linear(4, 1).float()

    def train(self, data):
        opt = torch.optim.Adam(self.model.parameters(), lr=0.01)
        for x, y in DataLoader(data, batch_size=4):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            opt.step()
"""


def test_init_built_reads_attributes_set_from_own_methods() -> None:
    cls = ast.parse(BASE).body[1]
    assert isinstance(cls, ast.ClassDef)
    assert init_built(cls) == (
        (
            "model",
            "_build_model",
            8,
            "self.model = self._build_model().to(self.device)",
        ),
    )


def test_the_view_carries_the_base_constructors_build(tmp_path: Path) -> None:
    (tmp_path / "base.py").write_text(BASE)
    probe = tmp_path / "probe.py"
    probe.write_text("import base\n")
    fact = dict(read_project(str(probe)).helpers)["base.ExpBase"]
    assert [(a, m, n) for a, m, n, _ in fact.init_built] == [
        ("model", "_build_model", 8)
    ]


@pytest.mark.parametrize("mode", ["batch", "file", "one file"])
def test_am004_names_the_base_constructor_and_the_override(
    tmp_path: Path, mode: str
) -> None:
    (tmp_path / "base.py").write_text(BASE)
    script = tmp_path / "exp.py"
    script.write_text(EXP)
    source, options = EXP, MigrateOptions()
    where, override_line = "(base.py, line 8: ", 8
    if mode == "batch":
        view = ProjectView([str(script), str(tmp_path / "base.py")])
        options = MigrateOptions(project=view.facts_for(str(script)))
    elif mode == "one file":
        source = BASE + "\n\n" + EXP.replace("from base import ExpBase\n", "")
        where, override_line = "(this file, line 8: ", 21
    result = migrate_source(source, str(script), options)
    assert result.output == source  # left whole
    (finding,) = [f for f in result.findings if f.code == "AM004"]
    assert finding.status == "needs-review"
    message = finding.message
    assert "cannot find where it is built" not in message
    assert (
        "`self.model` is set by the constructor of the base class `ExpBase` "
        + where
        + "`self.model = self._build_model().to(self.device)`) from "
        "`self._build_model()`, which `Exp` overrides (`Exp._build_model`, "
        f"line {override_line} of this file, builds the model)"
    ) in message
    assert "in `ExpBase.__init__`" in message
    assert "Nothing in this file was migrated" in message


def test_an_attribute_the_base_does_not_build_keeps_the_plain_story(
    tmp_path: Path,
) -> None:
    (tmp_path / "base.py").write_text(BASE.replace("self.model =", "self.net ="))
    script = tmp_path / "exp.py"
    script.write_text(EXP)
    view = ProjectView([str(script), str(tmp_path / "base.py")])
    options = MigrateOptions(project=view.facts_for(str(script)))
    result = migrate_source(EXP, str(script), options)
    (finding,) = [f for f in result.findings if f.code == "AM004"]
    assert "cannot find where it is built" in finding.message
