"""AM037: a model's forward that sets rows of its batch against rows of its
batch (``batch_pairs.py``).

YannDubs/disentangling-vae computes beta-TCVAE's minibatch stratified sampling
in the model's ``forward``: ``log_density(zs.view(B, 1, D), mu.view(1, B, D),
...)``, then a logsumexp over dimension 1, compares every sample with every
other; the loss-side search never enters a ``forward`` and the migration said
nothing (t16b, SILENT). A broadcast of the batch against the model's own
tensors (prototypes, centres) or against a value built only from shapes is
not a comparison of samples and stays unreported. Read in a model of the file
and in one of a local module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

MODEL = """\
import math

import torch
from torch import nn


def log_density(x, mu, logvar):
    return -0.5 * (math.log(2 * math.pi) + logvar + (x - mu) ** 2 / logvar.exp())


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 6)
        self.centers = nn.Parameter(torch.randn(5, 3))

    def terms(self, z, mu, logvar):
        n = z.size(0)
        pos = torch.arange(z.size(0)).unsqueeze(0)
        c = self.centers
        return {body}

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + logvar
        return self.terms(z, mu, logvar).mean()
"""

STEP = """\
import torch
from torch.utils.data import DataLoader

{model}
model = Model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(torch.randn(16, 4), batch_size=4)
for x in loader:
    optimizer.zero_grad()
    loss = model(x)
    loss.backward()
    optimizer.step()
"""


def _am037(tmp_path: Path, body: str, helper: bool) -> list[str]:
    model = MODEL.format(body=body)
    if helper:
        (tmp_path / "models.py").write_text(model)
        source = STEP.format(model="from models import Model\n")
    else:
        source = STEP.format(model=model)
    main = tmp_path / "main.py"
    main.write_text(source)
    facts = read_project(str(main))
    result = migrate_source(source, str(main), MigrateOptions(project=facts))
    return [f.message for f in result.findings if f.code == "AM037"]


PAIRED = [
    "log_density(z.view(n, 1, 3), mu.view(1, n, 3), logvar.view(1, n, 3))",
    "(z.unsqueeze(1) - mu.unsqueeze(0)).pow(2).sum(-1)",
    "(z[:, None] - z[None]).pow(2).sum(-1)",
    "z.reshape(n, 1, 3) * mu.reshape(1, n, 3).expand(n, n, 3)",
]


@pytest.mark.parametrize("helper", [False, True])
@pytest.mark.parametrize("body", PAIRED)
def test_rows_against_rows_of_the_batch(
    tmp_path: Path, body: str, helper: bool
) -> None:
    found = _am037(tmp_path, body, helper)
    assert len(found) == 1, found
    assert "sets rows of its batch against rows of its batch" in found[0]
    assert "`Model.terms`" in found[0]


NOT_PAIRED = [
    # prototypes / centres the model holds
    "(z.unsqueeze(1) - self.centers.unsqueeze(0)).pow(2).sum(-1)",
    "(z.unsqueeze(1) - c.unsqueeze(0)).pow(2).sum(-1)",
    "log_density(z.view(n, 1, 3), self.centers.view(1, 5, 3), logvar)",
    # a value built from the batch's shape only
    "z.view(n, 1, 3) + pos.view(1, -1, 1)",
    # per-sample broadcasts along other dimensions
    "z.unsqueeze(2) - mu.unsqueeze(1)",
]


@pytest.mark.parametrize("helper", [False, True])
@pytest.mark.parametrize("body", NOT_PAIRED)
def test_not_against_the_batch(tmp_path: Path, body: str, helper: bool) -> None:
    assert _am037(tmp_path, body, helper) == []


CRITERION = """\
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ContrastiveLoss(nn.Module):
    def forward(self, a, b):
        sim = F.cosine_similarity(a.unsqueeze(1), b.unsqueeze(0), dim=-1)
        return F.cross_entropy(sim, torch.arange(a.size(0)))


model = nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
criterion = ContrastiveLoss()
for (x,) in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), model(x * 2))
    loss.backward()
    optimizer.step()
"""


def test_a_loss_module_is_the_loss_sides_not_the_models() -> None:
    """A criterion with no state (``ContrastiveLoss``, only a ``forward``): no
    model is prepared from it, and AM007 already names the comparison at the
    backward; AM037 said it a second time (the golden
    tensor_backward/pairwise_batch)."""
    found = migrate_source(CRITERION, "train.py").findings
    assert not [f for f in found if f.code == "AM037"], found
    (am007,) = [f for f in found if f.code == "AM007"]
    assert am007.status == "needs-review" and "compares the samples" in am007.message
