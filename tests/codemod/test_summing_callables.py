"""A criterion that is a lambda, a partial, a module picked from a dict or built
through getattr (``traced_criteria.traced_summing_callable``): where it sums,
its reduction is not taken for a mean over samples."""

from __future__ import annotations

import pytest

from accel_migrate.codemod.engine import migrate_source

SCRIPT = """\
import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
loader = DataLoader(data, batch_size=8, shuffle=True)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
{definition}


def train(loss_fn):
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()


train(loss_fn)
"""


@pytest.mark.parametrize(
    "definition",
    [
        'loss_fn = functools.partial(F.mse_loss, reduction="sum")',
        'loss_fn = lambda out, y: F.mse_loss(out, y, reduction="sum")',
        'loss_fn = getattr(nn, "MSELoss")(reduction="sum")',
        'loss_fn = {"l2": nn.MSELoss(reduction="sum"), "l1": nn.L1Loss()}["l2"]',
        "loss_fn = lambda out, y: ((out - y) ** 2).sum()",
    ],
    ids=["partial", "lambda", "getattr", "dict", "lambda-method"],
)
def test_a_summing_callable_is_not_weighed_as_a_mean(definition: str) -> None:
    """Each was migrated to a plain accel.backward(loss) with no finding: the
    runtime averaged the processes' sums, half the gradient at two processes."""
    result = migrate_source(SCRIPT.format(definition=definition), "train.py")
    reviews = [
        f for f in result.findings if f.code == "AM007" and f.status == "needs-review"
    ]
    assert reviews, [(f.code, f.status, f.message) for f in result.findings]
    assert "loss_fn" in reviews[0].message


@pytest.mark.parametrize(
    "definition",
    [
        "loss_fn = functools.partial(F.mse_loss)",
        "loss_fn = lambda out, y: F.mse_loss(out, y)",
    ],
    ids=["partial", "lambda"],
)
def test_a_callable_that_does_not_sum_is_a_mean_as_before(definition: str) -> None:
    result = migrate_source(SCRIPT.format(definition=definition), "train.py")
    assert "accel.backward(loss)\n" in result.output
    assert not [f for f in result.findings if f.status == "needs-review"]
