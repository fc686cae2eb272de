"""A local function that runs a whole training of its own (daandouwe/glove's
``train.main(args)``: it builds the model, the optimizer and the loop), called by
a script with nothing but the arguments (``HelperFact.runs_training``, AM004):
in file mode the script is left whole with that reason, not skipped as "not a
training entry point" with no finding; a batch over both files migrates the
training module itself."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

TRAIN = """\
import numpy as np
import torch


def main(args):
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        x = torch.tensor(np.random.randn(8, 4), dtype=torch.float32)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def probe(features, labels):
    clf = torch.nn.Linear(features.shape[1], 2)
    opt = torch.optim.SGD(clf.parameters(), lr=0.5)
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(clf(features), labels).backward()
        opt.step()
    return clf(features).argmax(1)


def fit(model, optimizer, x):
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
"""

DISPATCH = """\
import argparse

import train

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
if __name__ == "__main__":
    train.main(args)
"""

SELF_TRAINING = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from train import probe

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.zeros(8).long()), batch_size=4)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
print(probe(model.weight.detach().t(), torch.zeros(4).long()))
"""


def test_the_fact_names_the_backward_and_the_first_optimizer(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    script = tmp_path / "main.py"
    script.write_text(DISPATCH)
    table = dict(read_project(str(script)).helpers)
    assert table["train.main"].runs_training == (
        "`main` calls backward (line 12) and builds an optimizer "
        "(`torch.optim.SGD(...)`, line 7)"
    )
    # a function handed its model trains that model (`trains`), not its own
    assert table["train.fit"].runs_training == ""
    assert table["train.fit"].trains != ""


def test_a_script_that_only_calls_it_is_left_whole_naming_it(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    script = tmp_path / "main.py"
    script.write_text(DISPATCH)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    assert result.skip_reason is None
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [(f.line, f.status) for f in blocking] == [(9, "needs-review")]
    assert "calls `main` in train.py, which runs a whole training" in (
        blocking[0].message
    )


def test_a_script_that_trains_itself_is_not_blocked_by_a_probe(
    tmp_path: Path,
) -> None:
    """node2vec's evaluation fits a logistic-regression probe in a helper: the
    script's own training is migrated as before."""
    (tmp_path / "train.py").write_text(TRAIN)
    script = tmp_path / "main.py"
    script.write_text(SELF_TRAINING)
    result = migrate_source(script.read_bytes(), str(script))
    assert result.changed
    assert not [f for f in result.findings if "whole training" in f.message]


EVALUATION = """\
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from train import main, probe

model = torch.nn.Linear(4, 2)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.zeros(8).long()), batch_size=4)
feats, labels = [], []
with torch.no_grad():
    for x, y in loader:
        feats.append(model(x))
        labels.append(y)
print(probe(torch.cat(feats), torch.cat(labels)))
{tail}
"""


def test_an_evaluation_script_with_a_loader_is_not_blocked_by_a_probe(
    tmp_path: Path,
) -> None:
    """rev15 c: an evaluation script with no backward (features over a loader,
    then a probe fitted in a helper) was left whole with AM004; it migrates as
    before 7fb8ed2. The same file handing its options to a training function
    (`main(args)`) is still left whole."""
    (tmp_path / "train.py").write_text(TRAIN)
    script = tmp_path / "main.py"
    script.write_text(EVALUATION.format(tail=""))
    result = migrate_source(script.read_bytes(), str(script))
    assert result.changed
    assert not [f for f in result.findings if f.code == "AM004"]
    tail = "args = argparse.ArgumentParser().parse_args()\nmain(args)"
    script.write_text(EVALUATION.format(tail=tail))
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [(f.line, f.status) for f in blocking] == [(17, "needs-review")]
    assert "calls `main` in train.py, which runs a whole training" in (
        blocking[0].message
    )


def test_a_batch_over_both_files_migrates_the_training_module(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    script = tmp_path / "main.py"
    script.write_text(DISPATCH)
    view = ProjectView([str(script), str(tmp_path / "train.py")])
    facts = view.facts_for(str(script))
    assert dict(facts.helpers)["train.main"].runs_training == ""
    result = migrate_source(
        script.read_bytes(), str(script), MigrateOptions(project=facts)
    )
    assert not [f for f in result.findings if "whole training" in f.message]


FOLD_TRAINER = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def train_fn(loader, model, optimizer):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def train_loop(folds, fold):
    loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_fn(loader, model, optimizer)
    return model
"""

FOLD_SCRIPT = """\
from src.train import train_loop

for fold in range(2):
    model = train_loop(None, fold)
"""


def test_a_fold_trainer_whose_backward_is_in_its_helper_is_named(
    tmp_path: Path,
) -> None:
    """t18e: Y. Nakama's Kaggle ``train_loop(folds, fold)`` in src/train.py
    builds the model and optimizer and hands them to ``train_fn`` of its module,
    which calls backward. main.py only calls ``train_loop`` per fold: it was
    skipped as "not a training entry point" with no finding (SILENT in the
    corpus); it is left whole with AM004 naming the call."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "__init__.py").write_text("")
    (tmp_path / "src" / "train.py").write_text(FOLD_TRAINER)
    script = tmp_path / "main.py"
    script.write_text(FOLD_SCRIPT)
    table = dict(read_project(str(script)).helpers)
    assert table["src.train.train_loop"].runs_training == (
        "`train_loop` calls backward (line 8 in `train_fn`) and builds an "
        "optimizer (`torch.optim.AdamW(...)`, line 16)"
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    assert result.skip_reason is None
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [(f.line, f.status) for f in blocking] == [(4, "needs-review")]
    assert "calls `train_loop` in src/train.py, which runs a whole training" in (
        blocking[0].message
    )
