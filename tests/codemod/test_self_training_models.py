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
from accel_migrate.codemod.layer_methods import layer_calls, training_methods
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


def test_a_method_that_calls_self_dunder_call_runs_the_layers() -> None:
    """AnubhavGupta3377's fastText ``run_epoch`` runs the model with
    ``y_pred = self.__call__(x)``: the same as ``self(x)`` (round t15d: file mode
    prepared the model and its optimizer, each process trained the whole set
    unsharded, and only an unrelated AM017 was reported)."""
    source = MODEL.replace("y = self(x)", "y = self.__call__(x)").replace(
        "return self(x) > 0.5", "return self.__call__(x) > 0.5"
    )
    cls = ast.parse(source).body[3]
    assert isinstance(cls, ast.ClassDef)
    assert training_methods(cls) == ("_epoch", "train_model")
    assert dict(layer_calls(cls))["_epoch"] == "self.__call__(x)"


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


OWN_OPTIMIZER = """\
import torch
from torch import nn, optim


class Seq2Seq(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.encoder = nn.LSTM(n, n)
        self.head = nn.Linear(n, n)

    def forward(self, x):
        return self.head(self.encoder(x)[0])

    def train_model(self, inputs, targets, n_epochs, batch_size):
        optimizer = optim.Adam(self.parameters(), lr=0.01)
        criterion = nn.MSELoss()
        for _ in range(n_epochs):
            for b in range(inputs.shape[1] // batch_size):
                x = inputs[:, b : b + batch_size]
                out, _ = self.encoder(x)
                loss = criterion(self.head(out), targets[:, b : b + batch_size])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
"""

OWN_OPTIMIZER_MAIN = """\
import torch

import seq2seq

X = torch.randn(6, 16, 3)
model = seq2seq.Seq2Seq(3)
model.train_model(X, X, n_epochs=2, batch_size=4)
torch.save(model.state_dict(), "model.pt")
"""


@pytest.mark.parametrize("mode", ["file", "batch"])
def test_a_script_with_no_loop_loader_or_optimizer_of_its_own(
    tmp_path: Path, mode: str
) -> None:
    """lkulowski/LSTM_encoder_decoder's example.py (round t13b): the script
    builds the model through its module (`seq2seq.Seq2Seq(3)`) and calls its
    `train_model`, which builds the optimizer over `self.parameters()` and
    slices its batches by hand. Before, the screen took the script for no
    training entry point and skipped it with no finding (SILENT): the file
    goes to the full pass now, where AM042 names the call."""
    (tmp_path / "seq2seq.py").write_text(OWN_OPTIMIZER)
    script = tmp_path / "main.py"
    script.write_text(OWN_OPTIMIZER_MAIN)
    options = MigrateOptions()
    if mode == "batch":
        view = ProjectView([str(script), str(tmp_path / "seq2seq.py")])
        options = MigrateOptions(project=view.facts_for(str(script)))
    result = migrate_source(OWN_OPTIMIZER_MAIN, str(script), options)
    assert result.output == OWN_OPTIMIZER_MAIN
    assert result.skip_reason is None
    found = [f for f in result.findings if f.code == "AM042"]
    assert len(found) == 1 and found[0].status == "needs-review", found
    assert (
        "`train_model` of `Seq2Seq` in seq2seq.py runs the model's layers itself"
        in found[0].message
    )


def test_a_script_that_only_evaluates_such_a_model_is_still_skipped(
    tmp_path: Path,
) -> None:
    (tmp_path / "seq2seq.py").write_text(OWN_OPTIMIZER)
    script = tmp_path / "main.py"
    source = OWN_OPTIMIZER_MAIN.replace(
        "model.train_model(X, X, n_epochs=2, batch_size=4)", "print(model(X).sum())"
    )
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    assert result.output == source
    assert result.skip_reason == "not a training entry point"
    assert not result.findings
