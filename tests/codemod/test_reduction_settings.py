"""A loss class whose call reduces as attributes of the instance say
(``HelperFact.setting_reductions``, ``reduction_settings``), read off the
construction a loss call is traced to (``reduction.called_criteria``): FNO's
``LpLoss(size_average=False)`` in utilities3.py sums the batch, so its loss is
backpropagated with ``reduction="sum"`` and a test sum of it is combined with
``accel.reduce``. Before (r36a), every construction of such a class was
needs-review (AM007/AM008/AM009): a true but over-strict reading."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.reduction_settings import setting_reductions

LOSSES = """\
import torch
import torch.nn as nn


class LpLoss(object):
    def __init__(self, d=2, p=2, size_average=True, reduction=True):
        self.d = d
        self.p = p
        self.reduction = reduction
        self.size_average = size_average

    def rel(self, x, y):
        n = x.size()[0]
        diff = torch.norm(x.reshape(n, -1) - y.reshape(n, -1), self.p, 1)
        norms = torch.norm(y.reshape(n, -1), self.p, 1)
        if self.reduction:
            if self.size_average:
                return torch.mean(diff / norms)
            else:
                return torch.sum(diff / norms)
        return diff / norms

    def __call__(self, x, y):
        return self.rel(x, y)


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0, reduction="mean"):
        super().__init__()
        self.gamma = gamma
        self.reduction = reduction

    def forward(self, x, y):
        loss = (x - y) ** 2 * self.gamma
        if self.reduction == "mean":
            return loss.mean()
        elif self.reduction == "sum":
            return loss.sum()
        return loss


class ResetLoss(object):
    def __init__(self, size_average=True):
        self.size_average = size_average

    def average(self):
        self.size_average = True

    def __call__(self, x, y):
        if self.size_average:
            return ((x - y) ** 2).mean()
        return ((x - y) ** 2).sum()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)
"""

SCRIPT = """\
import argparse

import torch
from torch.utils.data import DataLoader

from losses import Net, {name}

parser = argparse.ArgumentParser()
parser.add_argument("--avg", type=int, default=0)
args = parser.parse_args()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_set, batch_size=4, shuffle=True)
test_loader = DataLoader(test_set, batch_size=4)
{build}
for x, y in loader:
    opt.zero_grad()
    loss = myloss(model(x), y)
    loss.backward()
    opt.step()
test_l2 = 0.0
with torch.no_grad():
    for x, y in test_loader:
        test_l2 += myloss(model(x), y).item()
print(test_l2 / len(test_set))
"""


def _classes() -> dict[str, ast.ClassDef]:
    return {c.name: c for c in ast.parse(LOSSES).body if isinstance(c, ast.ClassDef)}


def _migrate(tmp_path: Path, name: str, build: str) -> tuple[str, list[str]]:
    (tmp_path / "losses.py").write_text(LOSSES)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT.format(name=name, build=build))
    result = migrate_source(script.read_text(), str(script))
    codes = ("AM007", "AM008", "AM009")
    return result.output, [f.message for f in result.needs_review if f.code in codes]


def test_the_paths_keep_the_attribute_tests_that_lead_to_them() -> None:
    fact = setting_reductions(_classes()["LpLoss"])
    assert fact is not None
    assert fact.entry == "LpLoss.__call__"
    assert {
        s.attribute: (s.parameter, s.position, s.default) for s in fact.settings
    } == {
        "reduction": ("reduction", 3, True),
        "size_average": ("size_average", 2, True),
    }
    assert fact.kinds({"reduction": True, "size_average": False}) == {"sum"}
    assert fact.kinds({"reduction": True, "size_average": True}) == {"mean"}
    # the per-sample values after the block: reached only with reduction off
    assert fact.kinds({"reduction": False, "size_average": False}) == {""}


def test_a_comparison_with_a_literal_is_a_test_of_the_setting() -> None:
    fact = setting_reductions(_classes()["FocalLoss"])
    assert fact is not None
    assert fact.kinds({"reduction": "sum"}) == {"sum"}
    assert fact.kinds({"reduction": "mean"}) == {"mean"}
    assert fact.kinds({"reduction": "none"}) == {""}


def test_an_attribute_written_outside_init_is_not_read() -> None:
    assert setting_reductions(_classes()["ResetLoss"]) is None


@pytest.mark.parametrize(
    "build",
    [
        "myloss = LpLoss(size_average=False)",
        "myloss = LpLoss(2, 2, False)",  # positional: d, p, size_average
        'myloss = FocalLoss(reduction="sum")',
    ],
)
def test_a_construction_that_picks_the_sum_path_is_a_sum(
    tmp_path: Path, build: str
) -> None:
    name = build.split("=", 1)[1].strip().split("(")[0]
    output, review = _migrate(tmp_path, name, build)
    assert 'accel.backward(loss, reduction="sum")' in output
    # the test loop's sum of the sums is a sum: combined across processes
    assert "test_l2 = accel.reduce(test_l2)" in output
    assert review == []


@pytest.mark.parametrize(
    "build, why",
    [
        # a setting the file decides at run time
        ("myloss = LpLoss(size_average=args.avg)", "given `args.avg`"),
        # the per-sample path: no reduction over the batch
        ("myloss = LpLoss(reduction=False)", "not a full sum or mean"),
        # the script changes the attribute after the construction
        (
            "myloss = LpLoss(size_average=False)\nmyloss.size_average = True",
            "this file assigns `myloss.size_average`",
        ),
        # two constructions that reduce differently
        (
            "if args.avg:\n    myloss = LpLoss()\nelse:\n"
            "    myloss = LpLoss(size_average=False)",
            "its constructions reduce the batch differently",
        ),
    ],
)
def test_a_construction_not_read_whole_is_reported(
    tmp_path: Path, build: str, why: str
) -> None:
    output, review = _migrate(tmp_path, "LpLoss", build)
    assert 'reduction="sum"' not in output
    assert "accel.backward(loss)" in output
    assert any(why in message for message in review), review
