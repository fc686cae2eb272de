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
        ({"tail": "optim.updateLearningRate(1.0)"}, "called"),
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
