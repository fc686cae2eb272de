"""A per-sample loss (``reduction="none"``) reduced over part of its rows or
dimensions, inline (the shared loss-reduction analysis): a reduction over a
dimension counted from the end is the batch's own where the loss is 1-D, so it
is per sample only where the loss is proven 2-D or more; a mean of the rows a
mask selects (``loss[y != 0].mean()``, ``torch.masked_select(...)``) averages
over a number that differs between the processes' shares. Both were weighed as
a mean over samples (AM007 fixed; ``verify --nproc 2`` failed: 0.5x the
original's loss, 0.9654 vs 0.9494)."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SETUP = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_set, batch_size=4)
for x, y in loader:
    out = model(x)
"""


def _am007(body: str) -> tuple[str, str, str]:
    source = SETUP + "".join(f"    {line}\n" for line in body.splitlines())
    result = migrate_source(source, "train.py")
    backward = next(
        line.strip()
        for line in str(result.output).splitlines()
        if "accel.backward(" in line
    )
    finding = next(f for f in result.findings if f.code == "AM007")
    return backward, finding.status, finding.message


@pytest.mark.parametrize(
    "loss",
    [
        # 1-D where the logits are squeezed: `.sum(-1)` sums the batch
        'F.binary_cross_entropy_with_logits(out[:, 0], y, reduction="none")'
        ".sum(-1).mean()",
        'F.mse_loss(out, y, reduction="none").mean(dim=-1).mean()',
        # cross_entropy drops the class dimension: of 2-D logits, 1-D
        'F.cross_entropy(out, y, reduction="none").sum(-1).mean()',
        # a product keeps what the analysis knows of it
        '(F.l1_loss(out, y, reduction="none") * 2.0).sum(-1).mean()',
        # torch.reshape's two arguments are the tensor and ONE shape: 1-D here
        'F.mse_loss(torch.reshape(out, (-1,)), y.view(-1), reduction="none")'
        ".sum(-1).mean()",
        # proven 2-D, but `-2` of two dimensions is the batch's
        'F.kl_div(F.log_softmax(out, dim=1), y, reduction="none").sum(-2).mean()',
    ],
)
def test_a_reduction_from_the_end_of_an_unranked_loss_is_unknown(loss: str) -> None:
    backward, status, message = _am007(f"loss = {loss}\nloss.backward()")
    assert backward == "accel.backward(loss)"
    assert status == "needs-review"
    assert "over a dimension counted from the end" in message


@pytest.mark.parametrize(
    "loss",
    [
        # of fewer than two dimensions `.sum(1)` raises: per sample
        'F.mse_loss(out, y, reduction="none").sum(1).mean()',
        # a log-softmax over dimension 1: two dimensions or more
        'F.kl_div(F.log_softmax(out, dim=1), y, reduction="none").sum(-1).mean()',
        'F.kl_div(out.log_softmax(1), y, reduction="none").sum(-1).mean()',
        'F.mse_loss(out.view(4, -1), y, reduction="none").sum(-1).mean()',
    ],
)
def test_a_reduction_of_a_proven_2d_loss_is_per_sample(loss: str) -> None:
    backward, status, _ = _am007(f"loss = {loss}\nloss.backward()")
    assert backward == "accel.backward(loss)"
    assert status == "fixed"


def test_a_named_log_softmax_proves_the_rank() -> None:
    body = (
        "log_prob = F.log_softmax(out, dim=1)\n"
        'loss = F.kl_div(log_prob, y, reduction="none").sum(-1).mean()\n'
        "loss.backward()"
    )
    assert _am007(body)[1] == "fixed"


@pytest.mark.parametrize(
    "body",
    [
        'loss = F.cross_entropy(out, y, reduction="none")\n'
        "loss = loss[y != 0].mean()\nloss.backward()",
        'per = F.cross_entropy(out, y, reduction="none")\n'
        "keep = y > 0\nloss = per[keep].mean()\nloss.backward()",
        'per = F.cross_entropy(out, y, reduction="none")\n'
        "loss = torch.masked_select(per, y > 0).mean()\nloss.backward()",
        'per = F.cross_entropy(out, y, reduction="none")\n'
        "loss = per.masked_select(y > 0).mean()\nloss.backward()",
        'per = F.cross_entropy(out, y, reduction="none")\n'
        "loss = (per[y != 0] * 2.0).mean()\nloss.backward()",
    ],
)
def test_a_mean_of_masked_rows_is_unknown(body: str) -> None:
    backward, status, message = _am007(body)
    assert backward == "accel.backward(loss)"
    assert status == "needs-review"
    assert "a number that differs between the processes' shares" in message


def test_a_sum_of_masked_rows_is_a_sum() -> None:
    body = (
        'per = F.cross_entropy(out, y, reduction="none")\n'
        "loss = per[y != 0].sum()\nloss.backward()"
    )
    backward, status, _ = _am007(body)
    assert backward == 'accel.backward(loss, reduction="sum")'
    assert status == "fixed"


def test_a_mean_of_all_rows_is_still_a_mean() -> None:
    body = 'loss = F.cross_entropy(out, y, reduction="none").mean()\nloss.backward()'
    assert _am007(body)[:2] == ("accel.backward(loss)", "fixed")


@pytest.mark.parametrize(
    "loss",
    [
        # plain arithmetic, not a loss function (r32d): 1-D where `out` is
        "((out - y) ** 2).sum(-1).mean()",
        "(out - y).pow(2).mean(dim=-1).mean()",
        "torch.sum((out - y).abs(), -1).mean()",
    ],
)
def test_arithmetic_reduced_from_the_end_is_unknown(loss: str) -> None:
    backward, status, message = _am007(f"loss = {loss}\nloss.backward()")
    assert backward == "accel.backward(loss)"
    assert status == "needs-review"
    assert "over a dimension counted from the end" in message


@pytest.mark.parametrize(
    "body",
    [
        "loss = ((out.log_softmax(1) - y) ** 2).sum(-1).mean()\nloss.backward()",
        "z = out.view(4, -1)\nloss = (z * z).sum(-1).mean()\nloss.backward()",
        "loss = ((out - y) ** 2).sum(1).mean()\nloss.backward()",
        "loss = ((out - y) ** 2).mean()\nloss.backward()",
    ],
)
def test_arithmetic_of_a_proven_2d_operand_is_per_sample(body: str) -> None:
    assert _am007(body)[:2] == ("accel.backward(loss)", "fixed")


@pytest.mark.parametrize(
    "body",
    [
        "mask = y > 0\nloss = F.mse_loss(torch.masked_select(out, mask), "
        "torch.masked_select(y, mask))\nloss.backward()",
        "loss = F.l1_loss(out.masked_select(y > 0), y.masked_select(y > 0))\n"
        "loss.backward()",
        "picked = out[y > 0]\nloss = F.mse_loss(picked, y[y > 0])\nloss.backward()",
    ],
)
def test_a_mean_criterion_over_selected_inputs_is_unknown(body: str) -> None:
    backward, status, message = _am007(body)
    assert backward == "accel.backward(loss)"
    assert status == "needs-review"
    assert "averages over the rows" in message
