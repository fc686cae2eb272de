"""AM103 pairs a training file with the script that imports it by a computed
name (GradientEpisodicMemory's main.py: ``Model =
importlib.import_module("model." + args.model)``, then ``Model.Net(...)``;
model/gem.py's ``Net`` owns its optimizer and steps in its own ``observe``).
main.py is left whole (AM004 names the picked package); model/gem.py was
migrated halfway (its optimizer prepared, its backward rewritten, no ``Net``
prepared: the runtime refused the unprepared parameters, LOUD). It is now
left whole with its importer: the batch's import graph reads the computed
import as one of every module of ``model/``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.cli.project_imports import _picked_package

GEM = """\
import torch


class Net(torch.nn.Module):
    def __init__(self, n_inputs, n_outputs):
        super().__init__()
        self.net = torch.nn.Linear(n_inputs, n_outputs)
        self.opt = torch.optim.SGD(self.parameters(), lr=0.1)

    def forward(self, x):
        return self.net(x)

    def observe(self, x, y):
        self.train()
        self.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.forward(x), y)
        loss.backward()
        self.opt.step()
"""

MAIN = """\
import argparse
import importlib

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="gem")
args = parser.parse_args()

Model = importlib.import_module({name})
model = Model.Net(4, 2)
for step in range(4):
    model.observe(torch.randn(8, 4), torch.randint(0, 2, (8,)))
torch.save(model.state_dict(), "model.pt")
"""


def test_the_computed_import_names_the_package() -> None:
    import ast

    def picked(source: str) -> str:
        return _picked_package(ast.parse(source).body[0].value)  # type: ignore[attr-defined]

    assert picked('importlib.import_module("model." + args.model)') == "model"
    assert picked('import_module(f"pkg.models.{name}")') == "pkg.models"
    assert picked("importlib.import_module(args.model)") == ""
    assert picked('importlib.import_module("model" + args.model)') == ""


@pytest.mark.parametrize("name", ['"model." + args.model', 'f"model.{args.model}"'])
def test_a_self_training_module_picked_by_name_waits_for_its_importer(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    root = tmp_path / "proj"
    (root / "model").mkdir(parents=True)
    (root / "model" / "__init__.py").write_text("")
    (root / "model" / "gem.py").write_text(GEM)
    (root / "main.py").write_text(MAIN.format(name=name))
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    found = {
        Path(f["path"]).as_posix(): (
            f["status"],
            [x["code"] for x in f["findings"] if x["status"] == "needs-review"],
        )
        for f in report["files"]
        if f["status"] != "skipped"
    }
    assert found["proj/main.py"][0] == "unchanged", found
    # before: model/gem.py came back changed (optimizer and backward
    # rewritten) with no Net prepared anywhere
    assert found["proj/model/gem.py"][0] == "unchanged", found
    assert "AM103" in found["proj/model/gem.py"][1], found
