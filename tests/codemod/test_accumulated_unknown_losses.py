"""AM009 and AM007 agree on an accumulated loss: ``total += loss.item() *
x.size(0)`` is a sum over the share only where the loss is a mean over the
batch's samples. Where AM007 calls its reduction unknown (a mean of masked
rows, written-out arithmetic of unproven rank) or a mean over another count,
AM009 says needs-review with that reason, not "fixed" (r32d, issue 12)."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_set, batch_size=4)
total = 0.0
for x, y in loader:
    out = model(x)
    loss = {loss}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total += {added}
print(total)
"""


def _findings(loss: str, added: str = "loss.item() * x.size(0)") -> dict:
    result = migrate_source(SCRIPT.format(loss=loss, added=added), "train.py")
    return {f.code: f for f in result.findings if f.code in ("AM007", "AM009")}


@pytest.mark.parametrize(
    "loss",
    [
        'F.cross_entropy(out, y, reduction="none")[y > 0].mean()',
        "((out - y) ** 2).sum(-1).mean()",
    ],
)
@pytest.mark.parametrize(
    "added", ["loss.item() * x.size(0)", "x.size(0) * loss.item()"]
)
def test_a_loss_am007_calls_unknown_is_no_sum(loss: str, added: str) -> None:
    found = _findings(loss, added)
    assert found["AM007"].status == "needs-review"
    assert found["AM009"].status == "needs-review"
    message = found["AM009"].message
    assert "a loss times this process's batch size" in message
    assert "holds this process's share only" in message


def test_a_mean_loss_times_the_batch_size_is_still_a_sum() -> None:
    found = _findings("F.cross_entropy(out, y)")
    assert found["AM007"].status == "fixed"
    assert found["AM009"].status == "fixed"
    assert "accel.reduce(total)" in found["AM009"].message
