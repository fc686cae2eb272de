"""A loss module's construction says its reduction only while nothing sets it
again (rev17's review of the handed-in criteria and the settings-read loss
classes: each case below was marked fixed as a sum or a mean, and trained to
another loss at world 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source

HANDED = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


def main(red="sum", opts=None):
    model = nn.Linear(4, 1)
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = BUILD
    AFTER
    train(model, loader, optimizer, criterion)


main()
"""


def _am007(source: str, path: str = "train.py") -> list[tuple[str, str]]:
    found = migrate_source(source, path, MigrateOptions()).findings
    return [(f.status, f.message) for f in found if f.code == "AM007"]


@pytest.mark.parametrize(
    ("build", "after", "said"),
    [
        ('nn.MSELoss(reduction="sum")', 'criterion.reduction = "mean"', "assigns"),
        (
            'nn.MSELoss(reduction="sum")',
            'setattr(criterion, "reduction", "mean")',
            "setattr",
        ),
        ("nn.MSELoss(reduction=red)", "pass", "reduction=`red`"),
        ("nn.MSELoss(**opts)", "pass", "**opts"),
    ],
)
def test_a_handed_in_criterion_set_again_or_unread_is_needs_review(
    build: str, after: str, said: str
) -> None:
    source = HANDED.replace("BUILD", build).replace("AFTER", after)
    if "opts" in build:
        source = source.replace("opts=None", 'opts={"reduction": "sum"}')
    (found,) = _am007(source)
    assert found[0] == "needs-review" and said in found[1], found


def test_a_handed_in_sum_left_alone_is_still_a_sum() -> None:
    """The control: nothing sets it again, so t17a's reading stands."""
    source = HANDED.replace("BUILD", 'nn.MSELoss(reduction="sum")').replace(
        "AFTER", "pass"
    )
    migrated = migrate_source(source, "train.py", MigrateOptions())
    assert 'accel.backward(loss, reduction="sum")' in str(migrated.output)
    assert all(
        f.status != "needs-review" for f in migrated.findings if f.code == "AM007"
    )


LP_LOSS = """\
import torch


class LpLoss(object):
    def __init__(self, p=2, size_average=True):
        self.p = p
        self.size_average = size_average

    def __call__(self, x, y):
        diff = torch.norm(x - y, self.p, 1)
        if self.size_average:
            return torch.mean(diff)
        return torch.sum(diff)


class Other(object):
    def __init__(self, size_average=True):
        self.size_average = size_average
SETTER
"""

MAIN = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from utilities3 import LpLoss, use_mean

model = nn.Linear(8, 8)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 8)), batch_size=8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
myloss = LpLoss(size_average=False)
use_mean(myloss)
for x, y in loader:
    optimizer.zero_grad()
    loss = myloss(model(x), y)
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("setter", "sum_"),
    [
        ("\n\ndef use_mean(loss):\n    loss.size_average = True\n", False),
        ('\n\ndef use_mean(loss):\n    setattr(loss, "size_average", True)\n', False),
        ("\n\ndef use_mean(loss):\n    vars(loss).update(size_average=True)\n", False),
        ("\n\ndef use_mean(loss):\n    return loss\n", True),
    ],
)
def test_a_setting_written_again_in_the_class_module_unsettles_it(
    tmp_path: Path, setter: str, sum_: bool
) -> None:
    """FNO's LpLoss read off ``LpLoss(size_average=False)`` (r36a) only while its
    module writes ``size_average`` nowhere but the constructors (another class's
    own ``self.size_average`` is its own)."""
    (tmp_path / "utilities3.py").write_text(LP_LOSS.replace("SETTER", setter))
    script = tmp_path / "main.py"
    script.write_text(MAIN)
    migrated = migrate_source(MAIN, str(script), MigrateOptions())
    statuses = [f.status for f in migrated.findings if f.code == "AM007"]
    if sum_:
        assert (
            'reduction="sum"' in str(migrated.output) and "needs-review" not in statuses
        )
    else:
        assert 'reduction="sum"' not in str(migrated.output) and statuses == [
            "needs-review"
        ]


def test_a_loss_class_of_the_file_setting_its_own_reduction_unsettles_nothing() -> None:
    """rev18a: a focal loss of the file whose ``__init__`` sets
    ``self.reduction`` made every ``torch.nn`` criterion of the file unknown;
    that write is the class's own instances' setting."""
    source = """\
import torch
from torch import nn


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0, reduction="mean"):
        super().__init__()
        self.reduction = reduction


model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)))
criterion = nn.CrossEntropyLoss(reduction="sum")
for (x,) in loader:
    loss = criterion(model(x), torch.zeros(1, dtype=torch.long))
    loss.backward()
    opt.step()
"""
    migrated = migrate_source(source, "train.py", MigrateOptions())
    assert 'accel.backward(loss, reduction="sum")' in str(migrated.output)


def test_a_local_loss_class_set_again_after_its_construction_is_unknown() -> None:
    """rev18a: ``MyLoss(size_average=False)`` then ``criterion.size_average =
    True`` with the class in the training file read the construction (a sum,
    "fixed"); the same class imported was already needs-review."""
    source = """\
import torch
from torch import nn


class MyLoss(nn.Module):
    def __init__(self, size_average=True):
        super().__init__()
        self.size_average = size_average

    def forward(self, x, y):
        d = ((x - y) ** 2).sum(1)
        if self.size_average:
            return d.mean()
        return d.sum()


model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8
)
criterion = MyLoss(size_average=False)
SETTER
for x, y in loader:
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    reset = migrate_source(
        source.replace("SETTER", "criterion.size_average = True"), "train.py"
    )
    assert 'reduction="sum"' not in str(reset.output)
    assert [f.status for f in reset.findings if f.code == "AM007"] == ["needs-review"]
    kept = migrate_source(source.replace("SETTER", ""), "train.py")
    assert 'reduction="sum"' in str(kept.output)
