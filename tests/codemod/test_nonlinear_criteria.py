"""A criterion class of a local module whose ``forward`` passes a loss that is
already a mean over the batch through a non-linear function
(``HelperFact.nonlinear_loss``, arcface-pytorch's ``FocalLoss``): the script's
backward is told the reduction is not known (AM007 needs-review), where before
it was weighed as a mean over samples and the losses differed silently."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

LOSSES = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class FocalLoss(nn.Module):
    def __init__(self, gamma=0, eps=1e-7):
        super(FocalLoss, self).__init__()
        self.gamma = gamma
        self.eps = eps
        self.ce = torch.nn.CrossEntropyLoss()

    def forward(self, input, target):
        logp = self.ce(input, target)
        p = torch.exp(-logp)
        loss = (1 - p) ** self.gamma * logp
        return loss.mean()


class PerSampleFocal(nn.Module):
    def __init__(self, gamma=2):
        super().__init__()
        self.gamma = gamma
        self.ce = nn.CrossEntropyLoss(reduction="none")

    def forward(self, input, target):
        logp = self.ce(input, target)
        p = torch.exp(-logp)
        return ((1 - p) ** self.gamma * logp).mean()


class LoggedPerplexity(nn.Module):
    def forward(self, input, target):
        loss = F.cross_entropy(input, target)
        self.ppl = torch.exp(loss).item()
        return loss


class SqrtMse(nn.Module):
    def forward(self, input, target):
        return F.mse_loss(input, target).sqrt()
"""

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from losses import {name}

model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_set, batch_size=4, shuffle=True)
if use_focal:
    criterion = {name}(gamma=2)
else:
    criterion = torch.nn.CrossEntropyLoss()
for x, y in loader:
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_the_fact_names_the_mean_and_the_function(tmp_path: Path) -> None:
    (tmp_path / "losses.py").write_text(LOSSES)
    probe = tmp_path / "probe.py"
    probe.write_text("import losses\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["losses.FocalLoss"].nonlinear_loss == (
        "`FocalLoss.forward` passes `self.ce(input, target)`, a mean over the "
        "batch, through `torch.exp(...)` (losses.py line 15)"
    )
    assert "`.sqrt(...)`" in table["losses.SqrtMse"].nonlinear_loss
    # per-sample losses first (reduction="none"), then their mean: a mean
    assert table["losses.PerSampleFocal"].nonlinear_loss == ""
    # the non-linear value is only logged, the mean itself is returned
    assert table["losses.LoggedPerplexity"].nonlinear_loss == ""


def _am007(tmp_path: Path, name: str) -> list[str]:
    (tmp_path / "losses.py").write_text(LOSSES)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT.format(name=name))
    result = migrate_source(script.read_text(), str(script))
    assert "accel.backward(loss" in result.output
    return [f.message for f in result.needs_review if f.code == "AM007"]


def test_the_backward_of_such_a_criterion_is_told(tmp_path: Path) -> None:
    """Built in one branch of two (the other a torch loss): still reported."""
    found = _am007(tmp_path, "FocalLoss")
    assert len(found) == 1
    assert (
        "the loss's reduction is not known (`criterion` may be a `FocalLoss` (losses.py)"
        in found[0]
    )
    assert "through `torch.exp(...)`" in found[0]


def test_a_mean_of_per_sample_terms_is_not_reported(tmp_path: Path) -> None:
    assert _am007(tmp_path, "PerSampleFocal") == []
