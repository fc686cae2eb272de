"""The shared loss-reduction analysis, seen through the backward AM007 writes.

Each case is a training loop whose last line backpropagates ``loss``; the test
reads what the runtime is told.
"""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SETUP = (
    "import torch\n"
    "import torch.nn as nn\n"
    "import torch.nn.functional as F\n"
    "from torch.utils.data import DataLoader\n"
    "PAD = 0\n"
    "model = nn.Linear(4, 4)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loader = DataLoader(list(range(8)), batch_size=4)\n"
    "ce = nn.CrossEntropyLoss(ignore_index=PAD).to('cpu')\n"
    "summed = nn.L1Loss(reduction='sum')\n"
    "def helper(out, y):\n"
    "    part = F.mse_loss(out, y, reduction='sum')\n"
    "    return part + 0.5 * torch.sum(out ** 2)\n"
)


def _backward(body: str) -> tuple[str, str]:
    source = (
        SETUP
        + "for x, y in loader:\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
    )
    result = migrate_source(source, "train.py")
    line = next(
        text.strip()
        for text in str(result.output).splitlines()
        if "accel.backward(" in text
    )
    finding = next(f for f in result.findings if f.code == "AM007")
    return line, finding.status


@pytest.mark.parametrize(
    ("body", "call"),
    [
        ("loss = F.nll_loss(model(x), y)\nloss.backward()", "accel.backward(loss)"),
        ("loss = summed(model(x), y)\nloss.backward()", 'reduction="sum"'),
        ("loss = helper(model(x), y)\nloss.backward()", 'reduction="sum"'),
        (
            # the values of a dict literal, not a sum over the batch (was "sum")
            "d = {'a': F.mse_loss(model(x), y), 'b': F.l1_loss(model(x), y)}\n"
            "loss = sum(d.values())\nloss.backward()",
            "accel.backward(loss)",
        ),
        (
            "d = {'a': summed(model(x), y)}\nloss = sum(d.values())\nloss.backward()",
            'reduction="sum"',
        ),
        ("loss = helper(model(x), y) / 4\nloss.backward()", 'reduction="sum"'),
        (
            "loss = helper(model(x), y) / len(x)\nloss.backward()",
            "accel.backward(loss)",
        ),
        (
            "loss = ce(model(x), y.view(-1))\nloss.backward()",
            "count=(y.view(-1) != PAD).sum()",
        ),
        (
            "m = (y != PAD).float()\n"
            "loss = (F.mse_loss(model(x), y, reduction='none') * m).sum() / m.sum()\n"
            "loss.backward()",
            "count=m.sum()",
        ),
        (
            "loss = F.mse_loss(model(x), y)\nloss = loss / 2\nloss.backward()",
            "accel.backward(loss)",
        ),
        (
            # DnCNN's residual loss: a sum over the batch over twice its row
            # count, spelled `x.size()[0]` (was "cannot tell apart", t12c)
            "loss = F.mse_loss(model(x), y, reduction='sum') / (x.size()[0] * 2)\n"
            "loss.backward()",
            "accel.backward(loss)",
        ),
        (
            "loss = F.mse_loss(model(x), y, reduction='sum') / (2 * len(x))\n"
            "loss.backward()",
            "accel.backward(loss)",
        ),
        (
            # Labels padded with -100: cross_entropy's default ignore_index skips them.
            "y[y == PAD] = -100\n"
            "loss = F.cross_entropy(model(x).view(-1, 4), y.view(-1))\nloss.backward()",
            "count=(y.view(-1) != -100).sum()",
        ),
        (
            "loss = F.mse_loss(model(x), y) + 1e-3 * sum(p.abs().sum() for p in model.parameters())\n"
            "loss.backward()",
            "accel.backward(loss)",
        ),
        (
            # a mean of per-sample terms added to a mean: no statistic inside
            "loss = F.mse_loss(model(x), y) + 0.1 * torch.mean(torch.abs(model(x)))\n"
            "loss.backward()",
            "accel.backward(loss)",
        ),
        (
            # an L2 term of the weights, joined in one vector, next to a mean
            "l2 = torch.cat([p.view(-1) for p in model.parameters()]).pow(2).sum()\n"
            "loss = F.mse_loss(model(x), y) + args.wd * l2\nloss.backward()",
            "accel.backward(loss)",
        ),
        (
            # PPO's clipped surrogate: elementwise max of two per-sample terms
            "r = model(x)\nloss = torch.max(-r * y, -torch.clamp(r, 0.8, 1.2) * y).mean()\n"
            "loss.backward()",
            "accel.backward(loss)",
        ),
    ],
)
def test_known_reductions_are_told(body: str, call: str) -> None:
    line, status = _backward(body)
    assert call in line
    assert status == "fixed"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            "loss = F.mse_loss(model(x), y) + model(x).sum()\nloss.backward()",
            "a mean over the batch plus a sum over the batch",
        ),
        (
            "loss = torch.sqrt(F.mse_loss(model(x), y))\nloss.backward()",
            "through `torch.sqrt(...)`",
        ),
        (
            "loss = F.mse_loss(model(x), y, reduction=args.r)\nloss.backward()",
            "not written in the file",
        ),
        (
            "loss = ce(model(x), y)\ny = y + 1\nloss.backward()",
            "`y` is assigned in between",
        ),
        (
            "loss = ce(model(x), y)\ny.masked_fill_(y == 1, PAD)\nloss.backward()",
            "changed in place in between",
        ),
        (
            "loss = summed(model(x), y) + 1.0\nloss.backward()",
            "does not depend on the batch",
        ),
        (
            "out = model(x)\nloss = out.loss\nloss.backward()",
            "`out.loss` is computed inside the model",
        ),
        (
            "loss = model(x)['loss']\nloss.backward()",
            "is computed inside the model",
        ),
        (
            "loss = F.cross_entropy(model(x), y, **opts)\nloss.backward()",
            "takes its settings from `**opts`",
        ),
        (
            "loss_dict = model(x)\nloss = sum(v for v in loss_dict.values())\n"
            "loss.backward()",
            "computed inside `model(x)`",
        ),
        (
            "loss_dict = model(x)\nloss = sum(loss_dict.values())\nloss.backward()",
            "computed inside `model(x)`",
        ),
        (
            # was told reduction="sum": the dict's values are losses, not samples
            "parts = {'a': F.mse_loss(model(x), y)}\nparts['b'] = model(x).sum()\n"
            "loss = sum(parts.values())\nloss.backward()",
            # the grown dict is read (r34a): its terms mix a mean and a sum
            "the loss mixes reductions: a mean over the batch plus a sum",
        ),
        (
            "z = model(x)\nloss = F.cross_entropy(z @ z.t(), y)\nloss.backward()",
            "compares the samples of the batch with each other (`z @ z.t()`)",
        ),
        (
            "e = model(x)\nd = torch.cdist(e, e)\nloss = d.min(1)[0].mean()\n"
            "loss.backward()",
            "compares the samples of the batch with each other (`torch.cdist(e, e)`)",
        ),
        (
            # RaGAN: the batch's mean logit inside a per-sample loss (was a mean)
            "loss = F.binary_cross_entropy_with_logits(model(x) - torch.mean(model(y)), y)\n"
            "loss.backward()",
            "a statistic of the batch (`torch.mean(model(y))`)",
        ),
        (
            "loss = F.mse_loss(model(x) - model(y).mean(), y)\nloss.backward()",
            "a statistic of the batch (`model(y).mean()`)",
        ),
        (
            # was reduction="sum": the weights' L2 term is added once per process
            "l2 = torch.cat([p.view(-1) for p in model.parameters()]).pow(2).sum()\n"
            "loss = summed(model(x), y) + args.wd * l2\nloss.backward()",
            "does not depend on the batch",
        ),
        (
            "l2 = torch.nn.utils.parameters_to_vector(model.parameters()).norm()\n"
            "loss = summed(model(x), y) + l2\nloss.backward()",
            "does not depend on the batch",
        ),
        (
            # was a mean: advantages normalised over the batch
            "adv = y - y.mean()\nloss = (model(x) * adv).mean()\nloss.backward()",
            "shifted by their own mean",
        ),
        (
            "adv = y / (y.std() + 1e-8)\nloss = (model(x) * adv).mean()\nloss.backward()",
            "a statistic of the batch (`y.std()`)",
        ),
        (
            "w = y / y.sum()\nloss = (model(x) * w).sum()\nloss.backward()",
            "divides the batch's values by `y.sum()`",
        ),
    ],
)
def test_unknown_reductions_are_reported_with_their_reason(
    body: str, reason: str
) -> None:
    source = (
        SETUP
        + "for x, y in loader:\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
    )
    result = migrate_source(source, "train.py")
    finding = next(f for f in result.findings if f.code == "AM007")
    assert finding.status == "needs-review"
    assert reason in finding.message
    assert "reduction=" not in str(result.output).split("accel.backward(")[-1]


def test_a_second_run_changes_nothing() -> None:
    source = (
        SETUP + "for x, y in loader:\n    loss = ce(model(x), y)\n    loss.backward()\n"
    )
    once = str(migrate_source(source, "train.py").output)
    assert "count=(y != PAD).sum()" in once
    assert str(migrate_source(once, "train.py").output) == once


def test_dist_autograd_backward_is_never_rewritten() -> None:
    """RPC code is already distributed (the screen's to skip); AM007 never makes
    ``dist_autograd.backward(ctx, [loss])`` a tensor's backward."""
    source = (
        SETUP
        + "import torch.distributed.autograd as dist_autograd\n"
        + "with dist_autograd.context() as ctx:\n"
        + "    loss = F.mse_loss(model(torch.randn(2, 4)), torch.randn(2, 4))\n"
        + "    dist_autograd.backward(ctx, [loss])\n"
    )
    result = migrate_source(source, "train.py")
    assert "dist_autograd.backward(ctx, [loss])" in str(result.output)
    assert "accel.backward" not in str(result.output)


def test_default_ignore_index_is_a_mean_over_samples_without_minus_100() -> None:
    """Without -100 in the file (nor a collator that pads with it), the default
    ignore_index matches no target: a plain mean, and the output stays plain."""
    line, status = _backward(
        "loss = F.cross_entropy(model(x).view(-1, 4), y.view(-1))\nloss.backward()"
    )
    assert line == "accel.backward(loss)"
    assert status == "fixed"


def test_a_collator_that_pads_with_minus_100_makes_a_token_mean() -> None:
    source = (
        "from transformers import DataCollatorForSeq2Seq\n"
        + SETUP
        + "collate = DataCollatorForSeq2Seq(tok)\n"
        + "for x, y in loader:\n"
        + "    loss = F.cross_entropy(model(x), y)\n"
        + "    loss.backward()\n"
    )
    output = str(migrate_source(source, "train.py").output)
    assert "accel.backward(loss, count=(y != -100).sum())" in output


PACKED = (
    "import torch\n"
    "import torch.nn as nn\n"
    "from torch.nn.utils.rnn import pack_padded_sequence\n"
    "from torch.utils.data import DataLoader\n"
    "rnn = nn.LSTM(4, 4).cuda()\n"
    "head = nn.Linear(4, 3).cuda()\n"
    "opt = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)\n"
    "loader = DataLoader(data, batch_size=4)\n"
    "for x, y, lengths in loader:\n"
    "    out, _ = rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))\n"
    "    rows = pack_padded_sequence(y, lengths, enforce_sorted=False).data\n"
    "    loss = nn.functional.cross_entropy(head(out.data), rows)\n"
    "    loss.backward()\n"
)


def test_a_loss_over_packed_sequences_is_a_mean_over_their_tokens() -> None:
    result = migrate_source(PACKED, "train.py")
    output = str(result.output)
    assert "accel.backward(loss, count=rows.numel())" in output
    # `out.data` of a PackedSequence is its rows, not a detached tensor: the
    # forward reaches the backward and must keep its graph (AM021 leaves it).
    assert "no_grad" not in output
    assert not [f for f in result.findings if f.code == "AM021"]


IN_BATCH_NEGATIVES = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader


def scores_of(q, ctx):
    return torch.matmul(q, torch.transpose(ctx, 0, 1))


def nll_of_scores(q, ctx):
    scores = F.log_softmax(scores_of(q, ctx), dim=1)
    labels = torch.arange(q.size(0))
    return F.nll_loss(scores, labels), (scores.argmax(1) == labels).sum()


def cos_sim(a, b):
    return F.normalize(a, dim=1) @ F.normalize(b, dim=1).T


class RankingLoss(nn.Module):
    def __init__(self, scale=20.0, similarity_fct=cos_sim):
        super().__init__()
        self.scale = scale
        self.similarity_fct = similarity_fct

    def forward(self, a, b):
        scores = self.similarity_fct(a, b) * self.scale
        return F.cross_entropy(scores, torch.arange(len(scores)))


model = nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(list(range(8)), batch_size=4)
criterion = RankingLoss()
for x, y in loader:
"""


@pytest.mark.parametrize(
    ("body", "spelled"),
    [
        (
            # DPR: a tuple unpacked from a helper, torch.transpose's function form
            "loss, _ = nll_of_scores(model(x), model(y))\nloss.backward()",
            "`torch.matmul(q, torch.transpose(ctx, 0, 1))`",
        ),
        (
            # sentence-transformers: the similarity held in an attribute
            "loss = criterion(model(x), model(y))\nloss.backward()",
            "`F.normalize(a, dim=1) @ F.normalize(b, dim=1).T`",
        ),
        (
            "s = torch.einsum('id,jd->ij', model(x), model(y))\n"
            "loss = F.cross_entropy(s, torch.arange(4))\nloss.backward()",
            "`torch.einsum('id,jd->ij', model(x), model(y))`",
        ),
        (
            # Prototypical Networks: queries against prototypes, in the file
            "e = model(x)\nq = e.unsqueeze(1).expand(4, 2, 4)\n"
            "p = e[:2].unsqueeze(0).expand(4, 2, 4)\n"
            "loss = F.cross_entropy(-(q - p).pow(2).sum(2), y)\nloss.backward()",
            "`e.unsqueeze(1).expand(4, 2, 4) - e[:2].unsqueeze(0).expand(4, 2, 4)`",
        ),
        (
            "e = model(x)\nloss = (e[:, None] - e[None]).pow(2).sum(-1).mean()\n"
            "loss.backward()",
            "`e[:, None] - e[None]`",
        ),
        (
            # LearningToCompare's relation pairs: every query beside every
            # class feature, the query side rebound through a transpose
            "s = model(x)\nq = model(y)\ns_ext = s.unsqueeze(0).repeat(4, 1, 1)\n"
            "q_ext = q.unsqueeze(0).repeat(4, 1, 1)\n"
            "q_ext = torch.transpose(q_ext, 0, 1)\n"
            "pairs = torch.cat((s_ext, q_ext), 2).view(-1, 8)\n"
            "loss = F.mse_loss(pairs.sum(1), y)\nloss.backward()",
            "`torch.cat((s_ext, q_ext), 2)`",
        ),
        (
            "s = model(x)\n"
            "pairs = torch.cat([s.unsqueeze(1).expand(4, 4, 4), "
            "s.unsqueeze(0).expand(4, 4, 4)], -1)\n"
            "loss = pairs.pow(2).mean()\nloss.backward()",
            "`torch.cat([s.unsqueeze(1).expand(4, 4, 4), s.unsqueeze(0).expand(4, 4, 4)], -1)`",
        ),
    ],
)
def test_in_batch_negatives_are_comparisons_of_samples(body: str, spelled: str) -> None:
    source = IN_BATCH_NEGATIVES + "".join(f"    {line}\n" for line in body.splitlines())
    result = migrate_source(source, "train.py")
    finding = next(f for f in result.findings if f.code == "AM007")
    assert finding.status == "needs-review"
    assert f"with each other ({spelled})" in finding.message


@pytest.mark.parametrize(
    "body",
    [
        "e = model(x)\nloss = (e[:, 1] - e[:, 0]).pow(2).mean()\nloss.backward()",
        "e = model(x)\nloss = (e - e.mean(1).unsqueeze(1)).pow(2).mean()\n"
        "loss.backward()",
        "e = model(x)\nloss = (e.unsqueeze(0) - y.unsqueeze(0)).pow(2).mean()\n"
        "loss.backward()",
        # a token prepended to every row, both sides along dimension 0
        "e = model(x)\nt = torch.cat((y.unsqueeze(0).repeat(4, 1), e.unsqueeze(0)), 0)\n"
        "loss = t.pow(2).mean()\nloss.backward()",
        # rows joined side by side, neither broadcast
        "e = model(x)\nloss = torch.cat((e, torch.transpose(e, 0, 1)), 1).pow(2).mean()\n"
        "loss.backward()",
    ],
)
def test_a_difference_not_broadcast_row_against_row_compares_nothing(
    body: str,
) -> None:
    source = IN_BATCH_NEGATIVES + "".join(f"    {line}\n" for line in body.splitlines())
    result = migrate_source(source, "train.py")
    finding = next(f for f in result.findings if f.code == "AM007")
    assert "with each other" not in finding.message


def test_an_einsum_over_features_compares_nothing() -> None:
    body = (
        "s = torch.einsum('bd,bd->b', model(x), model(y))\n"
        "loss = F.mse_loss(s, y.float())\nloss.backward()"
    )
    source = IN_BATCH_NEGATIVES + "".join(f"    {line}\n" for line in body.splitlines())
    result = migrate_source(source, "train.py")
    finding = next(f for f in result.findings if f.code == "AM007")
    assert "with each other" not in finding.message


ROW_WEIGHTED = (
    "def vae_loss(out, y, mu, kld_weight):\n"
    "    return F.mse_loss(out, y) + kld_weight * torch.mean(mu ** 2)\n"
)


@pytest.mark.parametrize(
    ("body", "unknown"),
    [
        # a VAE's minibatch share of the dataset, written where the loss is
        (
            "mu = model(x)\n"
            "loss = F.mse_loss(mu, y) + x.size(0) / len(loader.dataset) * mu.mean()\n"
            "loss.backward()",
            True,
        ),
        # ... or handed to the function that computes it
        (
            "mu = model(x)\n"
            "loss = vae_loss(mu, y, mu, kld_weight=x.size(0) / len(loader.dataset))\n"
            "loss.backward()",
            True,
        ),
        (
            "mu = model(x)\nloss = vae_loss(mu, y, mu, len(x) * 0.01)\nloss.backward()",
            True,
        ),
        # a configured weight is the same on every process: a mean stays a mean
        (
            "mu = model(x)\nloss = vae_loss(mu, y, mu, kld_weight=0.25)\n"
            "loss.backward()",
            False,
        ),
        (
            "mu = model(x)\n"
            "loss = F.mse_loss(mu, y) + 1.0 / len(loader.dataset) * mu.mean()\n"
            "loss.backward()",
            False,
        ),
    ],
)
def test_a_term_weighed_by_the_row_count_has_no_known_reduction(
    body: str, unknown: bool
) -> None:
    source = (
        SETUP
        + ROW_WEIGHTED
        + "for x, y in loader:\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
    )
    result = migrate_source(source, "train.py")
    finding = next(f for f in result.findings if f.code == "AM007")
    assert (finding.status == "needs-review") is unknown, finding.message
    if unknown:
        assert "reads the batch's row count" in finding.message


def test_a_loss_computed_by_a_method_of_the_model_class_is_read() -> None:
    source = (
        SETUP
        + "class VAE(nn.Module):\n"
        + "    def __init__(self):\n"
        + "        super().__init__()\n"
        + "        self.fc = nn.Linear(4, 4)\n"
        + "    def forward(self, x):\n"
        + "        return self.fc(x)\n"
        + "    def loss_function(self, out, y, weight):\n"
        + "        return F.mse_loss(out, y, reduction='sum') + weight * out.abs().sum()\n"
        + "    def weighted(self, out, y, w):\n"
        + "        return F.mse_loss(out, y) + w * out.mean()\n"
        + "vae = VAE()\n"
        + "for x, y in loader:\n"
        + "    out = vae(x)\n"
        + "    loss = vae.loss_function(out, y, 0.5)\n"
        + "    loss.backward()\n"
        + "    other = vae.weighted(out, y, w=x.size(0) / len(loader.dataset))\n"
        + "    other.backward()\n"
    )
    result = migrate_source(source, "train.py")
    # the method's sum is read (a mean was assumed for a method's loss before)
    assert 'accel.backward(loss, reduction="sum")' in str(result.output)
    reviewed = [f for f in result.findings if f.code == "AM007"]
    assert reviewed[0].status == "fixed", reviewed[0].message
    assert reviewed[1].status == "needs-review"
    assert "reads the batch's row count" in reviewed[1].message
