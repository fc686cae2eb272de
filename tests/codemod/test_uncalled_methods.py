"""AM017 and a class that prints only in methods nothing calls (LSTNet's
``Optim.updateLearningRate``, ``uncalled_methods``): building one prints
nothing, so its construction is left alone with an info finding, not a
needs-review one. Conservative: a method the project names, one of a class
with a base, or one Python or a library calls by its name keeps the finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

OPTIM = """\
class Optim({base}):
    def __init__(self, optimizer, lr):
        self.lr = lr
        self.optimizer = optimizer

    def step(self):
        self.optimizer.step()

    def {method}(self, ppl):
        self.lr = self.lr * 0.5
        self._announce()

    def _announce(self):
        print("Decaying learning rate to %g" % self.lr)
"""

TRAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

import Optim

loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
optim = Optim.Optim(opt, 0.1)
for (x,) in loader:
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
{tail}
"""


def _am017(
    tmp_path: Path,
    base: str = "object",
    method: str = "updateLearningRate",
    tail: str = "",
) -> list[tuple[str, str]]:
    (tmp_path / "Optim.py").write_text(OPTIM.format(base=base, method=method))
    train = tmp_path / "train.py"
    train.write_text(TRAIN.format(tail=tail))
    view = ProjectView([str(train)])
    result = migrate_source(
        train.read_text(),
        str(train),
        MigrateOptions(project=view.facts_for(str(train))),
    )
    return [(f.status, f.message) for f in result.findings if f.code == "AM017"]


def test_a_print_in_a_method_nothing_calls_is_not_a_needs_review(
    tmp_path: Path,
) -> None:
    found = _am017(tmp_path)
    assert [status for status, _ in found] == ["info"]
    assert "`_announce`, `updateLearningRate`, which nothing in this project calls" in (
        found[0][1]
    )


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"tail": "getattr(optim, 'updateLearningRate')(1.0)"}, "named in a string"),
        ({"base": "torch.optim.Optimizer"}, "a base that may call it"),
        ({"method": "flush"}, "a name a library calls"),
        ({"method": "__call__"}, "a name Python calls"),
    ],
)
def test_a_method_that_may_be_called_keeps_the_finding(
    tmp_path: Path, options: dict[str, str], why: str
) -> None:
    found = _am017(tmp_path, **options)
    assert [status for status, _ in found] == ["needs-review"], why


def test_a_called_method_is_reported_where_it_runs(tmp_path: Path) -> None:
    """Building ``Optim`` prints nothing; ``optim.updateLearningRate(1.0)``
    does: the needs-review names that call's line, and the construction gets
    an info finding that points there (``construction_quiet_effects``)."""
    found = _am017(tmp_path, tail="optim.updateLearningRate(1.0)")
    assert [status for status, _ in found] == ["info", "needs-review"]
    assert "building one runs none of them" in found[0][1]
    assert "(line 14)" in found[0][1]
    assert found[1][1].startswith(
        "`optim.updateLearningRate(1.0)` calls `updateLearningRate`, the name of a "
        "method of `Optim` in Optim.py that writes or prints"
    )


CONFIG = """\
import json


class BertConfig(object):
    def __init__(self, vocab_size=64, hidden_size=16):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size

    def to_json_file(self, json_file_path):
        with open(json_file_path, "w", encoding="utf-8") as writer:
            writer.write(json.dumps(self.__dict__, indent=2, sort_keys=True))
"""

GLUE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from modeling import BertConfig

config = BertConfig(vocab_size=32)
model = torch.nn.Linear(4, 1)
model.config = config
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for (x,) in DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
model_to_save = model.module if hasattr(model, "module") else model
model_to_save.config.to_json_file("config.json")
"""


def test_a_write_in_a_method_is_reported_at_its_call_not_the_build(
    tmp_path: Path,
) -> None:
    """GLUE's run_classifier.py: ``BertConfig(...)`` writes nothing; the write
    is ``model_to_save.config.to_json_file(...)`` (line 15). AM017's
    needs-review pointed at the build (line 6)."""
    (tmp_path / "modeling.py").write_text(CONFIG)
    train = tmp_path / "main.py"
    train.write_text(GLUE)
    view = ProjectView([str(train)])
    result = migrate_source(
        train.read_text(),
        str(train),
        MigrateOptions(project=view.facts_for(str(train))),
    )
    found = [(f.line, f.status) for f in result.findings if f.code == "AM017"]
    assert found == [(6, "info"), (15, "needs-review")]
    review = next(f for f in result.findings if f.code == "AM017" and f.line == 15)
    assert "`to_json_file`, the name of a method of `BertConfig` in modeling.py" in (
        review.message
    )
    assert "writes files (open(..., 'w'))" in review.message


METER = """\
class ProgressMeter:
    def __init__(self, num_batches, prefix=""):
        self.num_batches = num_batches
        self.prefix = prefix

    def display(self, batch):
        print(self.prefix + "[{}/{}]".format(batch, self.num_batches))
"""

IMAGENET = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from meters import ProgressMeter

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 2)), batch_size=2)
progress = ProgressMeter(len(loader), prefix="Epoch: [0]")
for i, (x, y) in enumerate(loader):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    progress.display(i)
"""


def test_an_object_only_its_printing_method_is_called_on_is_the_main_processs(
    tmp_path: Path,
) -> None:
    """ImageNet's ``ProgressMeter``: nothing is read off it and it stays under its
    name, so it is made on the main process alone (the stand-in's ``display``
    does nothing elsewhere), as before the method-call reporting of the GLUE
    shape above (imagenet_utils_project printed its progress on every process)."""
    (tmp_path / "meters.py").write_text(METER)
    train = tmp_path / "main.py"
    train.write_text(IMAGENET)
    view = ProjectView([str(train)])
    result = migrate_source(
        train.read_text(),
        str(train),
        MigrateOptions(project=view.facts_for(str(train))),
    )
    assert "accel.on_main_process(ProgressMeter, len(loader)" in result.output
    assert [f.status for f in result.findings if f.code == "AM017"] == ["fixed"]
