"""A class-weighted criterion handed in as a parameter or chosen in branches
(kaidic/LDAM-DRW's cifar_train.py: ``nn.CrossEntropyLoss(weight=per_cls_weights)``
or ``LDAMLoss(..., weight=per_cls_weights)`` of losses.py, handed to
``train(..., criterion, ...)``). Round t8a: AM007 took ``criterion(output,
target)`` for a mean over samples (SILENT: the shares' weight sums differ)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

LOSSES = """\
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LDAMLoss(nn.Module):
    def __init__(self, cls_num_list, max_m=0.5, weight=None, s=30):
        super().__init__()
        m_list = 1.0 / np.sqrt(np.sqrt(cls_num_list))
        self.m_list = torch.FloatTensor(m_list * (max_m / np.max(m_list)))
        self.s = s
        self.weight = weight

    def forward(self, x, target):
        index = torch.zeros_like(x, dtype=torch.uint8)
        index.scatter_(1, target.data.view(-1, 1), 1)
        index_float = index.type(torch.FloatTensor)
        batch_m = torch.matmul(self.m_list[None, :], index_float.transpose(0, 1))
        x_m = x - batch_m.view((-1, 1))
        output = torch.where(index.bool(), x_m, x)
        return F.cross_entropy(self.s * output, target, weight=self.weight)


class PlainLoss(nn.Module):
    def forward(self, x, target):
        return F.cross_entropy(x, target)
"""

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from losses import LDAMLoss, PlainLoss


def train(loader, model, criterion, optimizer):
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main(mode, data):
    model = nn.Linear(4, 3)
    w = torch.ones(3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(data, batch_size=8, shuffle=True)
    ds = Thing(train=True)  # a keyword named like the function is no use of it
{build}
    train(loader, model, criterion, opt)
"""

BUILDS = {
    "branches": (
        "    if mode == 'CE':\n"
        "        criterion = nn.CrossEntropyLoss(weight=w)\n"
        "    else:\n"
        "        criterion = PlainLoss()\n",
        "one of 2 modules built in branches",
    ),
    "handed_ldam": (
        "    criterion = LDAMLoss([3, 2, 1], weight=w)\n",
        "`LDAMLoss.forward` in losses.py",
    ),
    "unweighted": ("    criterion = nn.CrossEntropyLoss()\n", ""),
    "plain_helper": ("    criterion = PlainLoss()\n", ""),
}


def test_the_view_reads_a_class_weighted_forward_and_no_pairs(tmp_path: Path) -> None:
    (tmp_path / "losses.py").write_text(LOSSES)
    probe = tmp_path / "probe.py"
    probe.write_text("import losses\n")
    table = dict(read_project(str(probe)).helpers)
    ldam = table["losses.LDAMLoss"]
    assert ldam.forward_loss is not None
    assert ldam.forward_loss.reduction == "token-mean"
    assert ldam.forward_loss.what.startswith("the class weights (`weight=self.weight`)")
    # each sample against the held margins, not against the other samples
    assert ldam.pairwise == ""
    plain = table["losses.PlainLoss"].forward_loss
    assert plain is not None and plain.reduction == "mean"


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("build", sorted(BUILDS))
def test_am007_names_a_class_weighted_criterion_handed_in(
    tmp_path: Path, build: str, batch: bool
) -> None:
    code, named = BUILDS[build]
    (tmp_path / "losses.py").write_text(LOSSES)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT.format(build=code))
    options = MigrateOptions()
    if batch:
        view = ProjectView([str(script), str(tmp_path / "losses.py")])
        options = MigrateOptions(project=view.facts_for(str(script)))
    result = migrate_source(script.read_text(), str(script), options)
    (finding,) = [f for f in result.findings if f.code == "AM007"]
    if named:
        assert finding.status == "needs-review"
        assert "a mean over the class weights of the targets" in finding.message
        assert named in finding.message
    else:
        assert finding.status == "fixed", finding.message


def test_a_handed_class_weighted_torch_module_writes_its_count(tmp_path: Path) -> None:
    """Round fx37b: a ``torch.nn`` module handed in reads as one built beside its
    call: the count over its class weights, read off the module
    (``criterion.weight``: ``w`` is ``main()``'s, not ``train()``'s)."""
    script = SCRIPT.format(build="    criterion = nn.CrossEntropyLoss(weight=w)\n")
    result = migrate_source(script)
    (finding,) = [f for f in result.findings if f.code == "AM007"]
    assert finding.status == "fixed", finding.message
    assert "accel.class_weight_count(criterion.weight, y)" in str(result.output)
