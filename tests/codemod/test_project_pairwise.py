"""A loss that compares the batch's samples with each other, defined in a helper
module (round 21 of the soundness red team): sentence-transformers'
``MultipleNegativesRankingLoss`` in a ``losses.py``, DPR's score function. AM007
says so, naming the module, in file mode and in batch mode; a loss class of the
module that compares nothing is still a mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

LOSSES = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


def cos_sim(a, b):
    return torch.mm(F.normalize(a, dim=1), F.normalize(b, dim=1).transpose(0, 1))


class RankingLoss(nn.Module):
    def __init__(self, model, scale=20.0, similarity_fct=cos_sim):
        super().__init__()
        self.model = model
        self.scale = scale
        self.similarity_fct = similarity_fct

    def forward(self, a, b):
        scores = self.similarity_fct(self.model(a), self.model(b)) * self.scale
        return F.cross_entropy(scores, torch.arange(len(scores)))


class PairLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, a, b):
        return F.mse_loss(self.model(a), self.model(b))


def dpr_loss(q, ctx):
    scores = torch.einsum("id,jd->ij", q, ctx)
    return F.cross_entropy(scores, torch.arange(q.size(0)))
"""


def _script(criterion: str) -> str:
    return (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from losses import PairLoss, RankingLoss, dpr_loss\n\n"
        "model = torch.nn.Linear(4, 4)\n"
        f"criterion = {criterion}\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for a, b in DataLoader(pairs, batch_size=8):\n"
        "    loss = criterion(a, b)\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )


def test_the_view_reads_what_compares_samples(tmp_path: Path) -> None:
    (tmp_path / "losses.py").write_text(LOSSES)
    probe = tmp_path / "probe.py"
    probe.write_text("import losses\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["losses.RankingLoss"].pairwise == (
        "torch.mm(F.normalize(a, dim=1), F.normalize(b, dim=1).transpose(0, 1))"
    )
    assert table["losses.dpr_loss"].pairwise == "torch.einsum('id,jd->ij', q, ctx)"
    assert table["losses.PairLoss"].pairwise == ""


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize(
    ("criterion", "where"),
    [
        ("RankingLoss(model)", "`RankingLoss` in losses.py"),
        ("dpr_loss", "`dpr_loss` in losses.py"),
    ],
)
def test_am007_names_the_comparison_and_its_module(
    tmp_path: Path, criterion: str, where: str, batch: bool
) -> None:
    (tmp_path / "losses.py").write_text(LOSSES)
    script = tmp_path / "main.py"
    script.write_text(_script(criterion))
    options = MigrateOptions()
    if batch:
        view = ProjectView([str(script), str(tmp_path / "losses.py")])
        options = MigrateOptions(project=view.facts_for(str(script)))
    result = migrate_source(script.read_text(), str(script), options)
    finding = next(f for f in result.findings if f.code == "AM007")
    assert finding.status == "needs-review"
    assert "compares the samples of the batch with each other" in finding.message
    assert where in finding.message


def test_a_loss_class_that_compares_nothing_is_a_mean(tmp_path: Path) -> None:
    (tmp_path / "losses.py").write_text(LOSSES)
    script = tmp_path / "main.py"
    script.write_text(_script("PairLoss(model)"))
    result = migrate_source(script.read_text(), str(script))
    finding = next(f for f in result.findings if f.code == "AM007")
    assert finding.status == "fixed"


@pytest.mark.parametrize(
    ("difference", "paired"),
    [
        ("emb[triplets[:, 0]] - emb[triplets[:, 1]]", True),
        ("emb[anchors] - emb[negatives]", True),
        ("emb[:, 0] - emb[:, 1]", False),  # columns of every sample
        ("emb[0] - emb[1]", False),  # fixed rows
        ("emb[idx] - emb[idx]", False),  # one index on both sides
        ("emb[idx] - other[idx]", False),  # two tensors, row by row
    ],
)
def test_rows_picked_by_two_indices_and_subtracted_pair_samples(
    difference: str, paired: bool
) -> None:
    """An online triplet loss sets the rows a miner picked over the batch
    against each other: the helper module's side (ast) and this file's (cst)
    agree on which differences pair samples."""
    import ast

    import libcst as cst

    from accel_migrate.codemod import pairwise_helpers
    from accel_migrate.codemod.reduction import pairwise

    helper = ast.parse(difference, mode="eval").body
    assert isinstance(helper, ast.BinOp)
    assert pairwise_helpers._picked_rows_paired(helper) is paired
    local = cst.parse_expression(difference)
    assert isinstance(local, cst.BinaryOperation)
    assert pairwise._picked_rows_paired(local) is paired


TRIPLETS = """\
import torch.nn as nn
import torch.nn.functional as F


class OnlineTripletLoss(nn.Module):
    def __init__(self, margin, selector):
        super().__init__()
        self.margin = margin
        self.selector = selector

    def forward(self, emb, target):
        t = self.selector.get_triplets(emb, target)
        ap = (emb[t[:, 0]] - emb[t[:, 1]]).pow(2).sum(1)
        an = (emb[t[:, 0]] - emb[t[:, 2]]).pow(2).sum(1)
        return F.relu(ap - an + self.margin).mean(), len(t)
"""

TRAINER = """\
import torch


def fit(loader, model, loss_fn, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        outputs = loss_fn(model(x), y)
        loss = outputs[0] if type(outputs) in (tuple, list) else outputs
        loss.backward()
        optimizer.step()
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from losses import OnlineTripletLoss
from trainer import fit

model = torch.nn.Linear(4, 3)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.arange(8) % 2), batch_size=4)
fit(loader, model, OnlineTripletLoss(1.0, object()), torch.optim.SGD(model.parameters(), lr=0.1))
"""


def test_a_pairwise_loss_module_handed_to_a_parameter_is_named(tmp_path: Path) -> None:
    """Batch mode: trainer.fit's ``loss_fn`` is every call's OnlineTripletLoss
    instance (main.py); its forward pairs the rows its miner picked, so the
    backward in trainer.py is needs-review, not a mean (was SILENT)."""
    for name, text in (
        ("losses.py", TRIPLETS),
        ("trainer.py", TRAINER),
        ("main.py", MAIN),
    ):
        (tmp_path / name).write_text(text)
    view = ProjectView([str(tmp_path / n) for n in ("main.py", "trainer.py")])
    trainer = str(tmp_path / "trainer.py")
    result = migrate_source(
        TRAINER, trainer, MigrateOptions(project=view.facts_for(trainer))
    )
    am007 = [f for f in result.findings if f.code == "AM007"]
    assert am007 and am007[0].status == "needs-review", result.findings
    assert "emb[t[:, 0]] - emb[t[:, 1]]" in am007[0].message


PROTO = """\
import torch
import torch.nn.functional as F


def euclidean_dist(x, y):
    n, m, d = x.size(0), y.size(0), x.size(1)
    x = x.unsqueeze(1).expand(n, m, d)
    y = y.unsqueeze(0).expand(n, m, d)
    return torch.pow(x - y, 2).sum(2)


def proto_loss(emb, target, n_support):
    classes = torch.unique(target)
    support = [target.eq(c).nonzero()[:n_support].squeeze(1) for c in classes]
    prototypes = torch.stack([emb[idx].mean(0) for idx in support])
    query = torch.stack([target.eq(c).nonzero()[n_support:] for c in classes]).view(-1)
    log_p_y = F.log_softmax(-euclidean_dist(emb[query], prototypes), dim=1)
    loss_val = -log_p_y.max(1)[0].mean()
    acc_val = log_p_y.argmax(1).float().mean()
    return loss_val, acc_val


def offsets(x, y):
    return (x[:, 1] - x[:, 0]).abs().mean(), (y - x.unsqueeze(0)).mean()
"""


def test_the_view_reads_a_distance_matrix_of_a_loss_returning_its_accuracy(
    tmp_path: Path,
) -> None:
    """The Prototypical Networks' loss returns ``loss_val, acc_val`` (no loss
    kind is read from it); its ``euclidean_dist`` broadcasts rows against rows.
    A slice difference and a one-sided broadcast compare nothing."""
    (tmp_path / "proto.py").write_text(PROTO)
    probe = tmp_path / "probe.py"
    probe.write_text("import proto\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["proto.proto_loss"].returns == ""
    assert table["proto.proto_loss"].pairwise == (
        "x.unsqueeze(1).expand(n, m, d) - y.unsqueeze(0).expand(n, m, d)"
    )
    assert table["proto.offsets"].pairwise == ""


@pytest.mark.parametrize("batch", [False, True])
def test_am007_names_the_prototypes_distances_and_the_weighting(
    tmp_path: Path, batch: bool
) -> None:
    (tmp_path / "proto.py").write_text(PROTO)
    script = tmp_path / "main.py"
    script.write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from proto import proto_loss as loss_fn\n\n"
        "model = torch.nn.Linear(4, 4)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in DataLoader(episodes, batch_size=8):\n"
        "    opt.zero_grad()\n"
        "    loss, acc = loss_fn(model(x), target=y, n_support=2)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    options = MigrateOptions()
    if batch:
        view = ProjectView([str(script), str(tmp_path / "proto.py")])
        options = MigrateOptions(project=view.facts_for(str(script)))
    result = migrate_source(script.read_text(), str(script), options)
    finding = next(f for f in result.findings if f.code == "AM007")
    assert finding.status == "needs-review"
    assert (
        "(`x.unsqueeze(1).expand(n, m, d) - y.unsqueeze(0).expand(n, m, d)` in "
        "`proto_loss` in proto.py)" in finding.message
    )
    assert "weighs each process's loss as a mean over its share" in finding.message


MARGIN_LAYER = """\
import torch
import torch.nn as nn


def cosine_sim(x1, x2, dim=1, eps=1e-8):
    ip = torch.mm(x1, x2.t())
    w1 = torch.norm(x1, 2, dim)
    w2 = torch.norm(x2, 2, dim)
    return ip / torch.ger(w1, w2).clamp(min=eps)


class MarginCosineProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0, m=0.40):
        super().__init__()
        self.s, self.m = s, m
        self.weight = nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, input, label):
        cosine = cosine_sim(input, self.weight)
        one_hot = torch.zeros_like(cosine).scatter_(1, label.view(-1, 1), 1.0)
        return self.s * (cosine - one_hot * self.m)


class SelfSimilarity(nn.Module):
    def forward(self, input, label):
        return cosine_sim(input, input)
"""


def test_a_product_with_a_held_weight_handed_to_a_function_compares_nothing(
    tmp_path: Path,
) -> None:
    """CosFace's MarginCosineProduct: ``cosine_sim(input, self.weight)`` sets each
    sample against the class weights, not against the batch's other samples (AM007
    said it compared them); the same function called with the batch twice does."""
    (tmp_path / "layer.py").write_text(MARGIN_LAYER)
    probe = tmp_path / "probe.py"
    probe.write_text("import layer\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["layer.MarginCosineProduct"].pairwise == ""
    assert table["layer.SelfSimilarity"].pairwise == "torch.mm(x1, x2.t())"
