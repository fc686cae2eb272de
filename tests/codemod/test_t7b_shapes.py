"""Shapes of the t7b soundness trial (CLIP, Barlow Twins, MAE, BERT MLM, NeRF,
PixelCNN projects): a matrix product over the batch in a model of a helper
module (AM037) or in a loss (AM007), a masking collator of a helper module
given as ``collate_fn`` (AM020), and two AM008 findings that were false (a
value of a script that splits no data; a test loss collected per batch, which
AM009 combines)."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.batch_contractions import (
    contracts_batch_ast,
    contracts_batch_cst,
    sums_first_index,
)
from accel_migrate.codemod.project_view import ProjectView, read_project


@pytest.mark.parametrize(
    ("expr", "contracts"),
    [
        ("bn(z1).T @ bn(z2)", True),
        ("z.t() @ z", True),
        ("z.transpose(0, 1) @ z", True),
        ("torch.mm(z.T, z)", True),
        ("torch.matmul(torch.t(z), z)", True),
        ("z.t().mm(z)", True),
        ('torch.einsum("bi,bj->ij", a, b)', True),
        ("z @ z.T", False),  # every sample against every other: AM007's pairs
        ("self.weight.T @ x", False),  # a layer's weights
        ("q @ k.transpose(-2, -1)", False),  # attention over tokens
        ("torch.mm(x, self.weight.t())", False),
        ('torch.einsum("id,jd->ij", a, b)', False),
    ],
)
def test_products_over_dimension_zero(expr: str, contracts: bool) -> None:
    """The helper modules' reading (ast) and the file's (libcst) agree."""
    node = ast.parse(expr, mode="eval").body
    dotted = {"torch.mm", "torch.matmul", "torch.einsum", "torch.t", "torch.transpose"}

    def name(func: ast.expr) -> str:
        spelled = ast.unparse(func)
        return spelled if spelled in dotted else ""

    assert bool(contracts_batch_ast(node, name)) is contracts
    tree = cst.parse_expression(expr)

    def qualnames(func: cst.CSTNode) -> set[str]:
        spelled = cst.Module([]).code_for_node(func)
        return {spelled} if spelled in dotted else set()

    assert contracts_batch_cst(tree, qualnames) is contracts


def test_einsum_equations() -> None:
    assert sums_first_index("bi, bj -> ij")
    assert not sums_first_index("bi,bj->bij")
    assert not sums_first_index("...i,...j->ij")


MODEL = """\
import torch
from torch import nn


class BarlowTwins(nn.Module):
    def __init__(self, batch_size):
        super().__init__()
        self.batch_size = batch_size
        self.backbone = nn.Linear(6, 4)
        self.bn = nn.BatchNorm1d(4, affine=False)

    def forward(self, y1, y2):
        c = self.bn(self.backbone(y1)).T @ self.bn(self.backbone(y2))
        c.div_(self.batch_size)
        return torch.diagonal(c).add_(-1).pow_(2).sum()
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import BarlowTwins

model = BarlowTwins(8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 6), torch.randn(16, 6)), batch_size=8)
for y1, y2 in loader:
    loss = model(y1, y2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _findings(tmp_path: Path, files: dict[str, str], batch: bool) -> list:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    script = tmp_path / "main.py"
    options = MigrateOptions()
    if batch:
        view = ProjectView([str(tmp_path / name) for name in files])
        options = MigrateOptions(project=view.facts_for(str(script)))
    return migrate_source(script.read_text(), str(script), options).findings


@pytest.mark.parametrize("batch", [False, True])
def test_cross_correlation_of_a_helper_model_is_named(
    tmp_path: Path, batch: bool
) -> None:
    """facebookresearch/barlowtwins' model in model.py (was SILENT in both modes)."""
    findings = _findings(tmp_path, {"model.py": MODEL, "main.py": MAIN}, batch)
    found = [f for f in findings if f.code == "AM037"]
    assert len(found) == 1 and found[0].status == "needs-review"
    assert (
        "`self.bn(self.backbone(y1)).T @ self.bn(self.backbone(y2))`"
        in found[0].message
    )
    assert "model.py line 13" in found[0].message
    table = dict(read_project(str(tmp_path / "main.py")).helpers)
    assert table["model.BarlowTwins"].batch_mixing.startswith("`BarlowTwins.forward`")


def test_cross_correlation_in_a_loss_is_a_statistic_of_the_batch(
    tmp_path: Path,
) -> None:
    """Without `.mean(0)` the loss was taken for a sum over the batch (and
    weighted as one): the square of a batch sum is not."""
    script = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def barlow_loss(z1, z2):
    c = torch.mm(z1.T, z2) / z1.size(0)
    return torch.diagonal(c).add_(-1).pow_(2).sum()


model = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for a, b in DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 4)), batch_size=8):
    loss = barlow_loss(model(a), model(b))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    findings = _findings(tmp_path, {"main.py": script}, False)
    found = next(f for f in findings if f.code == "AM007")
    assert found.status == "needs-review"
    assert (
        "statistic of the batch (`torch.mm(z1.T, z2)` in `barlow_loss`)"
        in found.message
    )


COLLATE = """\
import torch


class MLMCollator:
    def __init__(self, mask_id):
        self.mask_id = mask_id

    def __call__(self, examples):
        inputs = torch.stack(examples)
        return self.mask_tokens(inputs)

    def mask_tokens(self, inputs):
        labels = inputs.clone()
        masked = torch.bernoulli(torch.full(labels.shape, 0.15)).bool()
        labels[~masked] = -100
        inputs[masked] = self.mask_id
        return inputs, labels


def plain_collate(examples):
    return torch.stack(examples)
"""

MLM_MAIN = """\
import torch
from torch.utils.data import DataLoader

from collate import MLMCollator, plain_collate

model = torch.nn.Embedding(10, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.arange(6) % 10 for _ in range(16)]
loader = DataLoader(data, batch_size=4, collate_fn={collate})
for inputs, labels in loader:
    logits = model(inputs)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, 10), labels.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize("batch", [False, True])
def test_a_masking_collator_of_a_helper_module_draws(
    tmp_path: Path, batch: bool
) -> None:
    """HF DataCollatorForLanguageModeling-style masking in collate.py (the BERT
    project was SILENT in batch mode)."""
    files = {
        "collate.py": COLLATE,
        "main.py": MLM_MAIN.format(collate="MLMCollator(4)"),
    }
    findings = _findings(tmp_path, files, batch)
    found = [f for f in findings if f.code == "AM020"]
    assert len(found) == 1 and found[0].status == "needs-review"
    assert (
        "the `collate_fn` `MLMCollator.__call__` in collate.py (`torch.bernoulli`)"
        in (found[0].message)
    )


def test_a_collate_function_that_draws_nothing_is_not_reported(tmp_path: Path) -> None:
    files = {"collate.py": COLLATE, "main.py": MLM_MAIN.format(collate="plain_collate")}
    findings = _findings(tmp_path, files, False)
    assert not [f for f in findings if f.code == "AM020"]


NERF_HELPERS = """\
import torch

img2mse = lambda x, y: torch.mean((x - y) ** 2)
mse2psnr = lambda x: -10.0 * torch.log(x) / torch.log(torch.Tensor([10.0]))
"""

NERF = """\
import torch

from run_nerf_helpers import img2mse, mse2psnr

rays = torch.randn(64, 3)
target = torch.randn(64, 3)
model = torch.nn.Linear(3, 3)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
i_batch = 0
for i in range(10):
    batch = rays[i_batch : i_batch + 16]
    target_s = target[i_batch : i_batch + 16]
    i_batch = (i_batch + 16) % 64
    img_loss = img2mse(model(batch), target_s)
    psnr = mse2psnr(img_loss)
    optimizer.zero_grad()
    img_loss.backward()
    optimizer.step()
    with torch.no_grad():
        test_psnr = mse2psnr(img2mse(model(rays), target))
    print(f"iter {i} psnr {psnr.item()} test {test_psnr.item()}")
"""


def test_values_of_a_script_that_splits_no_data_are_not_shares(tmp_path: Path) -> None:
    """nerf-pytorch's rays sliced out of a tensor: every process computes the
    same PSNR; AM019 says the data is not split, AM008 must not say the printed
    values are this process's share (it did, for `psnr` and `test_psnr`)."""
    files = {"run_nerf_helpers.py": NERF_HELPERS, "main.py": NERF}
    findings = _findings(tmp_path, files, False)
    assert any(f.code == "AM019" and f.status == "needs-review" for f in findings)
    assert not [f for f in findings if f.code == "AM008" and f.status == "needs-review"]


PIXELCNN = """\
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

net = torch.nn.Linear(4, 3)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
tr = DataLoader(TensorDataset(torch.randn(16, 4), torch.arange(16) % 3), batch_size=4)
te = DataLoader(TensorDataset(torch.randn(8, 4), torch.arange(8) % 3), batch_size=4)
for epoch in range(2):
    for x, y in tr:
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    err_te = []
    with torch.no_grad():
        for x, y in te:
            loss = F.cross_entropy(net(x), y)
            err_te.append(loss.item())
    print(epoch, np.mean(err_te))
"""


def test_a_test_loss_collected_per_batch_is_not_a_training_loss_read_after(
    tmp_path: Path,
) -> None:
    """jzbontar/pixelcnn's ``err_te.append(loss.item())``: AM009 combines it; the
    AM008 finding "loss read outside the loop of its backward" was false."""
    findings = _findings(tmp_path, {"main.py": PIXELCNN}, False)
    assert any(
        f.code == "AM009" and f.status == "fixed" and "err_te.append" in f.message
        for f in findings
    )
    assert not [f for f in findings if f.code == "AM008" and f.status == "needs-review"]


ITERATION = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self):
        self.model = torch.nn.Linear(4, 5)
        self.optim = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        data = TensorDataset(torch.randn(16, 4), torch.arange(16) % 5 - 1)
        self.train_data = DataLoader(data, batch_size=4, shuffle=True)
        self.test_data = DataLoader(data, batch_size=4)

    def iteration(self, epoch, data_loader, train=True):
        avg_loss = 0.0
        for x, labels in data_loader:
            loss = F.cross_entropy(self.model(x), labels, ignore_index=-1)
            if train:
                self.optim.zero_grad()
                loss.backward()
                self.optim.step()
            avg_loss += loss.item()
        print(epoch, avg_loss / len(data_loader))


trainer = Trainer()
for epoch in range(2):
    trainer.iteration(epoch, trainer.train_data)
    with torch.no_grad():
        trainer.iteration(epoch, trainer.test_data, train=False)
"""


def test_a_loss_read_after_a_conditional_backward_carries_its_count(
    tmp_path: Path,
) -> None:
    """BERT-pytorch's ``iteration(..., train=False)``: the test pass runs no
    backward, so the runtime has no token weighting to reuse; the read says it
    (the test perplexity differed by 0.5% at world 2 before)."""
    script = tmp_path / "main.py"
    script.write_text(ITERATION)
    result = migrate_source(script.read_text(), str(script))
    assert "accel.backward(loss, count=(labels != -1).sum())" in result.output
    assert "avg_loss += accel.global_loss(loss, count=(labels != -1).sum()).item()" in (
        result.output
    )


@pytest.mark.parametrize("batch", [False, True])
def test_a_masking_collator_held_in_a_variable_is_reported_once(
    tmp_path: Path, batch: bool
) -> None:
    """The collator built on its own line, then handed as ``collate_fn=``: one
    AM020 (at the loader), not a second one for building a random transform."""
    main = MLM_MAIN.format(collate="collator").replace(
        "loader = DataLoader", "collator = MLMCollator(4)\nloader = DataLoader"
    )
    findings = _findings(tmp_path, {"collate.py": COLLATE, "main.py": main}, batch)
    found = [f for f in findings if f.code == "AM020"]
    assert [(f.line, f.status) for f in found] == [(10, "needs-review")]
    assert "the `collate_fn` `MLMCollator.__call__`" in found[0].message
