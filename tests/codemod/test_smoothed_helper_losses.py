"""The project view reads a helper whose every return is a proven per-sample
mean as a mean: DGCNN's ``cal_loss`` (label smoothing written out as
``-(one_hot * log_prb).sum(dim=1).mean()`` with ``log_prb =
F.log_softmax(pred, dim=1)``, else ``F.cross_entropy``). Before, the written-out
branch was not read at all, and the step's backward, its logged loss and its
``loss.item() * batch_size`` sums were needs-review "reduction not known"."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

UTIL = """\
import torch
import torch.nn.functional as F


def cal_loss(pred, gold, smoothing=True):
    gold = gold.contiguous().view(-1)
    if smoothing:
        eps = 0.2
        n_class = pred.size(1)
        one_hot = torch.zeros_like(pred).scatter(1, gold.view(-1, 1), 1)
        one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (n_class - 1)
        log_prb = F.log_softmax(pred, dim=1)
        loss = {smoothed}
    else:
        loss = F.cross_entropy(pred, gold, reduction="mean")
    return loss
"""

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from util import cal_loss

model = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,)))
for x, y in DataLoader(data, batch_size=4):
    loss = cal_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())
"""


def _fact(tmp_path: Path, smoothed: str):
    (tmp_path / "util.py").write_text(UTIL.format(smoothed=smoothed))
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return dict(read_project(str(script)).helpers)["util.cal_loss"], script


@pytest.mark.parametrize(
    "smoothed",
    [
        "-(one_hot * log_prb).sum(dim=1).mean()",
        "-(one_hot * log_prb).sum(1).mean()",
        "(-one_hot * log_prb).sum(dim=-1).mean()",  # the last of two or more
        "-(log_prb * one_hot).sum(dim=1).mean()",
    ],
)
def test_a_written_out_smoothed_cross_entropy_is_a_mean(
    tmp_path: Path, smoothed: str
) -> None:
    fact, script = _fact(tmp_path, smoothed)
    assert (fact.returns, fact.reduction) == ("loss", "mean")
    result = migrate_source(script.read_bytes(), str(script))
    (backward,) = [f for f in result.findings if f.code == "AM007"]
    assert backward.status == "fixed", backward.message
    assert b"accel.backward(loss)" in result.output


@pytest.mark.parametrize(
    "smoothed",
    [
        # the logits themselves: no proven second dimension, and no log-probability
        "-(one_hot * pred).sum(dim=-1).mean()",
        # a sum over the batch too
        "-(one_hot * log_prb).sum()",
    ],
)
def test_other_written_out_losses_are_not_a_mean(tmp_path: Path, smoothed: str) -> None:
    fact, _ = _fact(tmp_path, smoothed)
    assert fact.reduction != "mean"


@pytest.mark.parametrize("dim", ["2", "0", "-1", "d"])
def test_log_probabilities_over_another_dimension_are_not_read(
    tmp_path: Path, dim: str
) -> None:
    # sequence-first `(T, B, C)` log-probabilities: `.sum(dim=1)` adds over the
    # batch (before: read as a per-sample mean, the backward left as is)
    (tmp_path / "util.py").write_text(
        UTIL.replace("log_softmax(pred, dim=1)", f"log_softmax(pred, dim={dim})")
        .replace(
            "def cal_loss(pred, gold, smoothing=True):",
            "def cal_loss(pred, gold, smoothing=True, d=2):",
        )
        .format(smoothed="-(one_hot * log_prb).sum(dim=1).mean()")
    )
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    fact = dict(read_project(str(script)).helpers)["util.cal_loss"]
    assert fact.reduction != "mean"
