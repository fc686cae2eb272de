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


TOKEN_MEAN = "(F.cross_entropy(out, y, reduction='none') * mask).sum() / mask.sum()"


@pytest.mark.parametrize(
    "added", ["loss.item() * mask.sum().item()", "mask.sum().item() * loss.item()"]
)
def test_a_token_mean_times_its_own_count_is_a_sum(added: str) -> None:
    # bucket_batch_sampler_r19 (r33d): `epoch_loss += loss.item() *
    # lengths.sum().item()` of a loss divided by `lengths.sum()` is the share's
    # sum of tokens; it was reported as "a loss times this process's batch
    # size" and left uncombined while its count was combined (MATCH -> FLAGGED)
    result = migrate_source(
        SCRIPT.replace(
            "    out = model(x)\n", "    out = model(x)\n    mask = y > 0\n"
        ).format(loss=TOKEN_MEAN, added=added),
        "train.py",
    )
    found = {f.code: f for f in result.findings if f.code in ("AM007", "AM009")}
    assert found["AM007"].status == "fixed", found["AM007"].message
    assert "count=mask.sum()" in result.output
    assert found["AM009"].status == "fixed", found["AM009"].message
    assert "accel.reduce(total)" in result.output


def test_a_token_mean_times_another_count_is_no_sum() -> None:
    found = _findings(TOKEN_MEAN.replace("mask", "(y > 0)"), "loss.item() * x.size(0)")
    assert found["AM009"].status == "needs-review"
    assert "not over the batch's samples" in found["AM009"].message
