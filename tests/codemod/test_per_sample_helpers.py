"""A local module's function that returns a per-sample loss
(``reduction="none"``, also reduced over a dimension other than the batch's:
davda54/sam's ``smooth_crossentropy``, ``F.kl_div(..., reduction="none").sum(-1)``):
the project view reads its reduction as "none" where that dimension is not the
batch's (counted from the start, or from the end of a loss proven 2-D or more:
``F.log_softmax(pred, dim=1)``), and the script's
``loss.mean().backward()`` is a mean of the share, as a mean criterion's (AM007
fixed, no needs-review), where before the reduction was "not known"."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

LOSSES = """\
import torch
import torch.nn.functional as F


def smooth_crossentropy(pred, gold, smoothing=0.1):
    one_hot = F.one_hot(gold, pred.size(1)).float() * (1 - smoothing)
    log_prob = F.log_softmax(pred, dim=1)
    return F.kl_div(input=log_prob, target=one_hot, reduction="none").sum(-1)


def per_sample(pred, gold):
    return F.cross_entropy(pred, gold, reduction="none")


def over_batch(pred, gold):
    return F.cross_entropy(pred, gold, reduction="none").sum(0)


def by_name(pred, gold, dim):
    return F.cross_entropy(pred, gold, reduction="none").sum(dim)


def mean_of_rows(pred, gold):
    return F.cross_entropy(pred, gold, reduction="none").mean()


def bce_loss(logit, target):
    return F.binary_cross_entropy_with_logits(logit, target, reduction="none").sum(-1)


def bce_over_classes(logit, target):
    return F.binary_cross_entropy_with_logits(logit, target, reduction="none").sum(1)


def ce_last(pred, gold):
    return F.cross_entropy(pred, gold, reduction="none").sum(-1)


def reshaped_flat(pred, gold):
    return F.mse_loss(torch.reshape(pred, (-1,)), gold, reduction="none").sum(-1)


def kl_first_of_two(pred, gold):
    log_prob = F.log_softmax(pred, dim=1)
    return F.kl_div(log_prob, gold, reduction="none").sum(-2)
"""

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from losses import {name}

model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_set, batch_size=4, shuffle=True)
for x, y in loader:
    loss = {name}(model(x), y)
    opt.zero_grad()
    loss.{reduce}().backward()
    opt.step()
"""


def test_the_project_view_reads_a_per_sample_return(tmp_path: Path) -> None:
    (tmp_path / "losses.py").write_text(LOSSES)
    probe = tmp_path / "probe.py"
    probe.write_text("import losses\n")
    table = dict(read_project(str(probe)).helpers)
    reductions = {
        name: (table[f"losses.{name}"].returns, table[f"losses.{name}"].reduction)
        for name in (
            "smooth_crossentropy",
            "per_sample",
            "over_batch",
            "by_name",
            "mean_of_rows",
            "bce_loss",
            "bce_over_classes",
            "ce_last",
            "reshaped_flat",
            "kl_first_of_two",
        )
    }
    assert reductions == {
        "smooth_crossentropy": ("loss", "none"),  # summed over the classes
        "per_sample": ("loss", "none"),
        "over_batch": ("loss", "unknown"),  # summed over the batch's dimension
        "by_name": ("loss", "unknown"),  # a dimension the analysis cannot read
        "mean_of_rows": ("loss", "mean"),
        # of a 1-D logit (rev7's repro: `bce_loss(model(x).squeeze(1), y)`) the
        # last dimension is the batch's: not provably per sample
        "bce_loss": ("loss", "unknown"),
        "bce_over_classes": ("loss", "none"),  # of a 1-D logit `.sum(1)` raises
        "ce_last": ("loss", "unknown"),  # of 2-D logits a 1-D loss
        # `torch.reshape(x, (-1,))`: one shape argument, a 1-D tensor (rev9)
        "reshaped_flat": ("loss", "unknown"),
        # proven 2-D, but `-2` of two dimensions is the batch's (rev9)
        "kl_first_of_two": ("loss", "unknown"),
    }
    assert "per sample, reduction='none'" in table["losses.per_sample"].describe()
    # what is unknown, not "unknown-reduced" (r32d)
    described = table["losses.bce_loss"].describe()
    assert "unknown-reduced" not in described
    assert "whose reduction over the batch's samples" in described


def _am007(tmp_path: Path, name: str, reduce: str) -> tuple[str, list[str]]:
    (tmp_path / "losses.py").write_text(LOSSES)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT.format(name=name, reduce=reduce))
    result = migrate_source(script.read_text(), str(script))
    assert "accel.backward(" in result.output
    backward = next(
        line for line in result.output.splitlines() if "accel.backward(" in line
    )
    return backward.strip(), [
        f.message for f in result.needs_review if f.code == "AM007"
    ]


@pytest.mark.parametrize("name", ["smooth_crossentropy", "per_sample"])
def test_a_mean_of_a_per_sample_loss_is_a_mean(tmp_path: Path, name: str) -> None:
    backward, concerns = _am007(tmp_path, name, "mean")
    assert backward == "accel.backward(loss.mean())"
    assert concerns == []


def test_a_sum_of_a_per_sample_loss_is_a_sum(tmp_path: Path) -> None:
    backward, concerns = _am007(tmp_path, "per_sample", "sum")
    assert backward == 'accel.backward(loss.sum(), reduction="sum")'
    assert concerns == []


@pytest.mark.parametrize("name", ["over_batch", "bce_loss"])
def test_a_return_summed_over_the_batch_stays_unknown(
    tmp_path: Path, name: str
) -> None:
    _, concerns = _am007(tmp_path, name, "mean")
    assert len(concerns) == 1
    assert "the loss's reduction is not known" in concerns[0]
    assert "unknown-reduced" not in concerns[0]


def test_a_caller_reduction_from_the_end_of_a_per_sample_return_is_unknown(
    tmp_path: Path,
) -> None:
    backward, concerns = _am007(tmp_path, "per_sample", "sum(-1).mean")
    assert backward == "accel.backward(loss.sum(-1).mean())"
    assert len(concerns) == 1
    assert "over a dimension counted from the end" in concerns[0]
