"""``B, N = targets.size()`` then ``loss.sum() / B``
(tugstugi/mongolian-speech-recognition's train.py divides its summed CTC loss by
the batch's row count read that way). Round fx37b: the unpacked first dimension
was not read as the batch's row count, so AM007/AM008 were needs-review
("cannot tell apart as this process's count or a constant"); it is now a mean
over samples, as ``targets.size(0)`` is. The second dimension stays unknown."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(32, 5), torch.randn(32, 3)), batch_size=8)
model = nn.Linear(5, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for inputs, targets in loader:
    UNPACK
    loss = ((model(inputs) - targets) ** 2).sum() / B
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
"""


@pytest.mark.parametrize("unpack", ["B, N = targets.size()", "B, N = targets.shape"])
def test_first_unpacked_dimension_counts_the_rows(unpack: str) -> None:
    result = migrate_source(SCRIPT.replace("UNPACK", unpack))
    am007 = [f for f in result.findings if f.code == "AM007"]
    assert [f.status for f in am007] == ["fixed"]
    assert "accel.backward(loss)\n" in str(result.output)
    am008 = [f for f in result.findings if f.code == "AM008"]
    assert all(f.status == "fixed" for f in am008)


@pytest.mark.parametrize(
    "unpack",
    [
        "N, B = targets.size()",  # the second dimension: not the rows
        "B, N = targets.size()\n    B = B + N",  # also assigned otherwise
    ],
)
def test_other_unpackings_stay_unknown(unpack: str) -> None:
    result = migrate_source(SCRIPT.replace("UNPACK", unpack))
    am007 = [f for f in result.findings if f.code == "AM007"]
    assert [f.status for f in am007] == ["needs-review"]
    assert "cannot tell apart" in am007[0].message
