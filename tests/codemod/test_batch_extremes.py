"""The largest or smallest value of the batch (``x.max()``, ``x.max(0).values``,
``torch.amin(x, dim=0)``) is neither a mean nor a sum over its samples: a mean
of it is not made the global batch's by weighting each process's share, and a
printed one is combined with ``accel.reduce(..., op="max")``. Per sample
(``x.max(1)``) or elementwise with a second tensor (``torch.max(a, b)``) it is
as before."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
for (x,) in loader:
    opt.zero_grad()
    out = model(x)
    loss = LOSS
    loss.backward()
    opt.step()
    print(PRINTED.item())
"""


def _findings(loss: str, printed: str) -> list[str]:
    source = SCRIPT.replace("LOSS", loss).replace("PRINTED", printed)
    result = migrate_source(source, "train.py")
    return [f"{f.code} {f.status} {f.message}" for f in result.findings]


@pytest.mark.parametrize(
    "loss",
    ["out.max(0).values.mean()", "torch.amax(out, dim=0).mean()", "out.max()"],
)
def test_a_loss_through_the_batch_maximum_is_not_a_mean(loss: str) -> None:
    found = [f for f in _findings(loss, "out.mean()") if f.startswith("AM007")]
    assert found and all("needs-review" in f for f in found), found
    assert "statistic of the batch" in found[0]


@pytest.mark.parametrize(
    "loss",
    ["out.max(1).values.mean()", "torch.max(out, out.detach()).mean()"],
)
def test_per_sample_or_elementwise_extremes_stay_means(loss: str) -> None:
    found = [f for f in _findings(loss, "out.mean()") if f.startswith("AM007")]
    assert found and all(f.startswith("AM007 fixed") for f in found), found


@pytest.mark.parametrize(
    ("printed", "op"), [("out.max()", "max"), ("torch.min(out)", "min")]
)
def test_a_printed_batch_extreme_is_combined_with_its_op(printed: str, op: str) -> None:
    found = [
        f
        for f in _findings("out.mean()", printed)
        if f.startswith("AM008 needs-review")
    ]
    assert len(found) == 1, found
    assert f'accel.reduce(..., op="{op}")' in found[0]
