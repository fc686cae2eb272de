"""A plain class holding the trained modules (pointer_summarizer's ``class
Model(object)`` with ``self.encoder``/``self.decoder``/``self.reduce_state``, and
``Adagrad(list(self.model.encoder.parameters()) + ...)`` in train.py). Before
round t9c AM004 wrapped the holder, ``accel.prepare_model(Model(path))``, which
the runtime refuses at run time (LOUD by accident); now the setup is left whole
with a finding naming the holder."""

from __future__ import annotations

import ast
from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.plain_holders import plain_bases
from accel_migrate.codemod.project_view import ProjectView, read_project

HOLDER = """
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Model({base}):
    def __init__(self, path=None):
        {init}
"""

_PLAIN_INIT = "self.encoder = Encoder()\n        self.decoder = nn.Linear(4, 2)"
_MODULE_INIT = "super().__init__()\n        self.encoder = Encoder()\n        self.decoder = nn.Linear(4, 2)"

TRAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import Model


class Train(object):
    def setup_train(self):
        self.model = Model()
        params = list(self.model.encoder.parameters()) + list(self.model.decoder.parameters())
        self.optimizer = torch.optim.Adagrad(params, lr=0.1)

    def train(self, loader):
        self.setup_train()
        for x, y in loader:
            self.optimizer.zero_grad()
            out = self.model.decoder(self.model.encoder(x))
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            self.optimizer.step()


loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))), batch_size=4)
Train().train(loader)
"""


def _migrate(tmp_path: Path, base: str, init: str, batch: bool) -> tuple[str, list]:
    (tmp_path / "model.py").write_text(HOLDER.format(base=base, init=init))
    main = tmp_path / "main.py"
    main.write_text(TRAIN)
    if batch:
        view = ProjectView([str(tmp_path / "model.py"), str(main)])
        facts = view.facts_for(str(main))
    else:
        facts = read_project(str(main))
    result = migrate_source(main.read_bytes(), str(main), MigrateOptions(project=facts))
    out = (result.output or main.read_bytes()).decode()
    return out, [f for f in result.findings if f.status == "needs-review"]


def test_plain_bases_reads_the_class_statement() -> None:
    classes = {
        c.name: c
        for c in ast.walk(
            ast.parse(
                "class A: pass\nclass B(object): pass\nclass C(nn.Module): pass\n"
                "class D(Base): pass\nclass E(object, metaclass=M): pass\n"
            )
        )
        if isinstance(c, ast.ClassDef)
    }
    assert plain_bases(classes["A"]) and plain_bases(classes["B"])
    assert not plain_bases(classes["C"])  # a module
    assert not plain_bases(classes["D"])  # a base that may be one
    assert not plain_bases(classes["E"])


def test_project_fact_marks_plain_classes_only(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(HOLDER.format(base="object", init=_PLAIN_INIT))
    (tmp_path / "main.py").write_text(
        TRAIN.replace("import Model", "import Encoder, Model")
    )
    helpers = dict(read_project(str(tmp_path / "main.py")).helpers)
    assert helpers["model.Model"].plain
    assert not helpers["model.Encoder"].plain


def test_plain_holder_is_not_wrapped_and_blocks_the_file(tmp_path: Path) -> None:
    for batch in (False, True):
        out, review = _migrate(tmp_path, "object", _PLAIN_INIT, batch)
        assert "accel." not in out, out
        holder = [f for f in review if f.code == "AM004"]
        assert len(holder) == 1, review
        message = holder[0].message
        assert (
            "`self.model` is an instance of `Model` in model.py, a plain class"
            in message
        )
        assert "self.model.encoder.parameters()" in message
        assert "Nothing in this file was migrated" in message


def test_holder_defined_in_the_training_file_is_refused_too(tmp_path: Path) -> None:
    source = TRAIN.replace(
        "from model import Model\n", HOLDER.format(base="", init=_PLAIN_INIT)
    )
    source = source.replace("class Model():", "class Model:")
    result = migrate_source(
        source.encode(), str(tmp_path / "main.py"), MigrateOptions()
    )
    assert result.output is None or b"accel." not in result.output
    messages = [f.message for f in result.findings if f.code == "AM004"]
    assert any(
        "`self.model` is an instance of `Model`, a plain class" in m for m in messages
    )


def test_an_nn_module_holder_is_still_prepared(tmp_path: Path) -> None:
    out, _ = _migrate(tmp_path, "nn.Module", _MODULE_INIT, batch=False)
    assert "self.model = accel.prepare_model(Model())" in out
