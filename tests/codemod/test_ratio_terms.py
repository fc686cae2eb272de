"""AM009 combines the two terms of one ratio together or neither (fixk): with
``train_loss += loss.item() * batch_size`` left uncombined (the loss's
reduction is unknown) and ``count += batch_size`` combined, ``train_loss /
count`` printed this process's share of the loss sum over the whole data's
count (0.5857 vs 1.2134 on DGCNN, r33d): a number the original never printed.
Now the count is left alone too and both findings say so."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.findings import Finding

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(train_set, batch_size=4)
train_loss = 0.0
count = 0.0
for x, y in loader:
    batch_size = x.size(0)
    out = model(x)
    loss = {loss}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    count += batch_size
    train_loss += loss.item() * batch_size
{after}
"""

UNKNOWN = 'F.cross_entropy(out, y, reduction="none")[y > 0].mean()'


def _migrate(loss: str, after: str) -> tuple[str, dict[int, Finding]]:
    result = migrate_source(SCRIPT.format(loss=loss, after=after), "train.py")
    am009 = {f.line: f for f in result.findings if f.code == "AM009"}
    return result.output, am009


@pytest.mark.parametrize(
    "after",
    [
        'print(f"loss {train_loss / count:.6f}")',
        "print('loss', train_loss * 1.0 / count)",  # DGCNN's
        "avg = train_loss / count\nprint(avg)",
    ],
)
def test_a_declined_numerator_leaves_its_count_alone(after: str) -> None:
    code, am009 = _migrate(UNKNOWN, after)
    assert "accel.reduce" not in code
    count, numerator = am009[17], am009[18]
    assert count.status == "needs-review"
    assert "`count` is a term of `train_loss" in count.message
    assert "whose `train_loss` is not combined" in count.message
    assert numerator.status == "needs-review"
    assert "`count`, the other term of `train_loss" in numerator.message


def test_a_count_read_inside_the_loop_is_left_alone_too() -> None:
    script = SCRIPT.replace(
        "    train_loss += loss.item() * batch_size\n",
        "    train_loss += loss.item() * batch_size\n"
        "    print(train_loss / count)\n",
    )
    result = migrate_source(script.format(loss=UNKNOWN, after=""), "train.py")
    assert "accel.reduce" not in result.output
    count = next(f for f in result.findings if f.code == "AM009" and f.line == 17)
    assert count.status == "needs-review"


def test_a_count_in_no_ratio_with_the_declined_sum_is_still_combined() -> None:
    code, am009 = _migrate(UNKNOWN, "print(train_loss, len(loader.dataset) / count)")
    assert "count = accel.reduce(count)" in code
    assert am009[17].status == "fixed"
    assert "other term" not in am009[18].message


def test_both_terms_known_are_both_combined() -> None:
    code, am009 = _migrate("F.cross_entropy(out, y)", "print(train_loss / count)")
    assert "count = accel.reduce(count)" in code
    assert "train_loss = accel.reduce(train_loss)" in code
    assert am009[17].status == am009[18].status == "fixed"
