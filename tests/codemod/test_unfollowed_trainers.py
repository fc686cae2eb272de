"""A trainer class whose model no finder follows (fast.ai course-v3's ``Runner``
in ``exp/nb_04.py``: ``fit(self, epochs, learn)`` stores the learner, the model
and optimizer are properties of ``self.learn``, ``one_batch`` calls
``self.loss.backward()`` and ``self.opt.step()``), reached by star imports from
modules of which only the first imports torch (``unfollowed_trainers``, AM004,
AM103). Before: main.py was skipped as "not a training entry point" with no
finding (each process trained the whole thing), and in a batch nb_03's loaders
were sharded while no model was prepared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

NB_03 = """\
import torch
from torch import nn, optim
from torch.utils.data import DataLoader


def get_dls(train_ds, valid_ds, bs):
    return (
        DataLoader(train_ds, batch_size=bs, shuffle=True),
        DataLoader(valid_ds, batch_size=bs * 2),
    )
"""

NB_04 = """\
from exp.nb_03 import *


class Learner:
    def __init__(self, model, opt, loss_func, train_dl):
        self.model, self.opt = model, opt
        self.loss_func, self.train_dl = loss_func, train_dl


class Runner:
    def __init__(self, cbs=None):
        self.cbs = cbs or []

    @property
    def model(self):
        return self.learn.model

    @property
    def opt(self):
        return self.learn.opt

    def one_batch(self, xb, yb):
        self.loss = self.learn.loss_func(self.model(xb), yb)
        self.loss.backward()
        self.opt.step()
        self.opt.zero_grad()

    def all_batches(self, dl):
        for xb, yb in dl:
            self.one_batch(xb, yb)

    def fit(self, epochs, learn):
        self.learn = learn
        for epoch in range(epochs):
            self.all_batches(learn.train_dl)


class Handed:
    def __init__(self, model, opt):
        self.model = model
        self.opt = opt

    def step(self, x):
        self.model(x).sum().backward()
        self.opt.step()


class NativeScaler:
    def __call__(self, loss, optimizer):
        self._scaler.scale(loss).backward()
        self._scaler.step(optimizer)


class Builds:
    def fit(self, x):
        self._optimizer = self.optimizer_fn(self.network.parameters())
        self.network(x).sum().backward()
        self._optimizer.step()


class Checker:
    def check(self, loss):
        loss.backward()
        return [p.grad for p in self.params]
"""

MAIN = """\
from exp.nb_04 import *

train_dl, valid_dl = get_dls(train_ds, valid_ds, 8)
model = nn.Linear(4, 2)
learn = Learner(model, optim.SGD(model.parameters(), lr=0.1), loss_func, train_dl)
run = Runner()
run.fit(3, learn)
print("done")
"""


def _project(root: Path) -> Path:
    (root / "exp").mkdir(parents=True)
    (root / "exp" / "__init__.py").write_text("")
    (root / "exp" / "nb_03.py").write_text(NB_03)
    (root / "exp" / "nb_04.py").write_text(NB_04)
    script = root / "main.py"
    script.write_text(MAIN)
    return script


def test_a_class_that_steps_what_it_holds_but_is_handed_no_model(
    tmp_path: Path,
) -> None:
    script = _project(tmp_path)
    table = dict(read_project(str(script)).helpers)
    assert table["<star>.Runner"].unfollowed_training == (
        "`fit(epochs, learn)` runs `self.loss.backward()` (line 24, in "
        "`one_batch`) and `self.opt.step()` (line 25, in `one_batch`) on what the "
        "instance holds on `self`, which accel-migrate cannot follow to a model "
        "its caller builds (none is run as a model from an `__init__` or method "
        "parameter)"
    )
    # a class handed its model at construction is a library trainer (`trains`);
    # one that steps no optimizer of its own trains nothing; a plain container
    assert table["<star>.Handed"].trains
    assert table["<star>.Handed"].unfollowed_training == ""
    assert table["<star>.Checker"].unfollowed_training == ""
    # timm's NativeScaler steps the optimizer it is handed per call (a
    # GradScaler's `step(optimizer)`); pytorch_tabnet's TabModel builds the
    # optimizer it steps (`self._optimizer = self.optimizer_fn(...)`)
    assert table["<star>.NativeScaler"].unfollowed_training == ""
    assert table["<star>.Builds"].unfollowed_training == ""
    assert table["<star>.Learner"].unfollowed_training == ""


def test_a_script_that_trains_through_it_is_left_whole_naming_it(
    tmp_path: Path,
) -> None:
    script = _project(tmp_path)
    result = migrate_source(script.read_bytes(), str(script))
    # before: skipped as "not a training entry point", nothing said
    assert not result.changed and result.skip_reason is None
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert len(blocking) == 1 and blocking[0].status == "needs-review"
    assert blocking[0].line == 6
    assert blocking[0].message.startswith(
        "`Runner()` builds `Runner` in exp/nb_04.py, which trains there: "
        "`fit(epochs, learn)` runs `self.loss.backward()`"
    )
    assert "Nothing in this file was migrated" in blocking[0].message


def test_in_a_batch_the_loader_module_is_left_whole_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(tmp_path / "proj")
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "--output-format", "json", "proj"])
    files = {f["path"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    # before: exp/nb_03.py alone was migrated (its loaders sharded) while each
    # process trained an unprepared model in nb_04's Runner
    assert all(f["status"] != "changed" for f in files.values()), files
    codes = {f["code"] for f in files["proj/main.py"]["findings"]}
    assert "AM004" in codes
