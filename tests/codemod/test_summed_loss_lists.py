"""``sum(losses)`` of a name bound to a fixed list of batch losses adds those
terms: before, it was read as a sum over the batch's samples, and the
backward became ``accel.backward(loss, reduction="sum")`` for a sum of two
means (SILENT: the processes' shares were summed, not averaged)."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 3)), batch_size=4)
for x, y in loader:
    out = model(x)
{lines}
    loss = sum(losses)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _backward(lines: str) -> str:
    result = migrate_source(SCRIPT.format(lines=lines), "train.py")
    (found,) = [f for f in result.findings if f.code == "AM007"]
    return f"{found.status}: {found.message}"


def test_a_fixed_list_of_means_sums_to_a_mean() -> None:
    found = _backward("    losses = [F.mse_loss(out, y), F.l1_loss(out, y)]")
    assert found == "fixed: x.backward() -> accel.backward(x)"


def test_a_fixed_list_of_sums_is_a_sum() -> None:
    found = _backward(
        '    losses = [F.mse_loss(out, y, reduction="sum"), '
        'F.l1_loss(out, y, reduction="sum")]'
    )
    assert found.startswith('fixed: x.backward() -> accel.backward(x, reduction="sum")')


def test_a_list_grown_over_the_samples_still_sums_the_batch() -> None:
    """Grown in a loop over the batch's rows, the list is not a fixed display:
    its ``sum`` is a sum over the samples, as before."""
    found = _backward(
        "    losses = []\n    for i in range(out.size(0)):\n"
        "        losses.append(F.mse_loss(out[i], y[i]))"
    )
    assert found.startswith('fixed: x.backward() -> accel.backward(x, reduction="sum")')
