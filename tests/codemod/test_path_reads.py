"""A file written by the path an object holds (``args.prediction_file``) and the
object handed, after the write, to a function of another module that opens
that path (SQuAD's ``evaluate.main(args)`` in galsang/BiDAF-pytorch): AM017
makes the write the main process's and must put ``accel.barrier()`` after it
(the other processes read the file). Handing ``args`` to a function that opens
no such path is no read back (``HelperFact.reads_paths``, ``path_reads.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.path_reads import reads_paths
from accel_migrate.codemod.project_view import read_project

EVALUATE = """
import json


def main(args):
    with open(args.{attr}) as f:
        return len(json.load(f))


def write_back(args):
    with open(args.prediction_file, "w") as f:
        f.write("{{}}")
"""

MAIN = """
import argparse
import json

import torch
from torch.utils.data import DataLoader, TensorDataset

import evaluate


def test(model, loader, args):
    answers = {}
    with torch.no_grad():
        for i, (x, y) in enumerate(loader):
            answers[str(i)] = float(model(x).sum())
    with open(args.prediction_file, "w") as f:
        json.dump(answers, f)
    return evaluate.main(args)


parser = argparse.ArgumentParser()
parser.add_argument("--prediction-file", default="predictions.json")
parser.add_argument("--dev-file", default="dev.json")
args = parser.parse_args()
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=4)
for x, y in loader:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print(test(model, loader, args))
"""


def test_reads_paths_lists_parameter_attributes_opened_for_reading() -> None:
    tree = ast.parse(EVALUATE.format(attr="prediction_file"))
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}

    def dotted(func: ast.expr) -> str:
        return (
            "builtins.open" if isinstance(func, ast.Name) and func.id == "open" else ""
        )

    assert reads_paths(functions["main"], dotted) == ((0, "args", "prediction_file"),)
    assert reads_paths(functions["write_back"], dotted) == ()  # a write, not a read


@pytest.mark.parametrize(
    ("attr", "barrier"), [("prediction_file", True), ("dev_file", False)]
)
def test_a_path_handed_by_its_holder_to_a_reader_gets_a_barrier(
    tmp_path: Path, attr: str, barrier: bool
) -> None:
    (tmp_path / "evaluate.py").write_text(EVALUATE.format(attr=attr))
    main = tmp_path / "main.py"
    main.write_text(MAIN)
    facts = read_project(str(main))
    assert dict(facts.helpers)["evaluate.main"].reads_paths == ((0, "args", attr),)
    result = migrate_source(main.read_bytes(), str(main), MigrateOptions(project=facts))
    out = result.output.decode()  # type: ignore[union-attr]
    assert 'accel.on_main_process(open, args.prediction_file, "w")' in out
    assert ("accel.barrier()" in out) is barrier
