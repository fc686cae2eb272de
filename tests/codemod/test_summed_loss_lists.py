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


def _reduction(lines: str) -> str:
    """``mean``, ``sum`` or ``unknown`` (needs-review) of the migrated backward."""
    found = _backward(lines)
    if found.startswith("needs-review"):
        return "unknown"
    return "sum" if 'reduction="sum"' in found else "mean"


MSE = "F.mse_loss(out, y)"
L1 = "F.l1_loss(out, y)"
L1_SUM = 'F.l1_loss(out, y, reduction="sum")'


def test_appended_means_sum_to_a_mean() -> None:
    lines = f"    losses = []\n    losses.append({MSE})\n    losses.append({L1})"
    assert _backward(lines) == "fixed: x.backward() -> accel.backward(x)"


def test_grown_lists_of_means_are_means() -> None:
    grown = [
        f"    losses = [{MSE}]\n    losses += [{L1}]",
        f"    losses = []\n    losses.extend([{MSE}, {L1}])",
        f"    losses = [{MSE}]\n    losses.insert(0, {L1})",
        f"    losses = [{MSE} for _ in range(3)]",
        f"    losses = []\n    for scale in (1, 2):\n        losses.append(scale * {MSE})",
        f"    losses = [{MSE}]\n    losses.append({L1} / 2)",
    ]
    for lines in grown:
        assert _reduction(lines) == "mean", lines


def test_a_mix_with_a_summed_term_is_unknown() -> None:
    lines = f"    losses = []\n    losses.append({MSE})\n    losses.append({L1_SUM})"
    found = _backward(lines)
    assert found.startswith("needs-review"), found


def test_appended_sums_are_a_sum() -> None:
    lines = f"    losses = []\n    losses.append({L1_SUM})\n    losses += [{L1_SUM}]"
    assert _reduction(lines) == "sum"


def test_a_list_handed_to_a_function_is_unknown() -> None:
    lines = f"    losses = [{MSE}]\n    add_terms(losses, out)"
    found = _backward(lines)
    assert "handed to `add_terms(...)`" in found, found


def test_a_term_the_analysis_cannot_read_is_unknown() -> None:
    lines = f"    losses = [{MSE}]\n    losses.append(out.abs())"
    found = _backward(lines)
    assert found.startswith("needs-review") and "`out.abs()`" in found, found


def test_a_loop_over_len_is_unknown() -> None:
    lines = (
        "    losses = []\n    for i in range(len(out)):\n"
        "        losses.append(F.mse_loss(out[i], y[i]))"
    )
    found = _backward(lines)
    assert found.startswith("needs-review") and "range(len(out))" in found, found


STACKED = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 3)), batch_size=4)
for x, y in loader:
    out = model(x)
{lines}
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _stacked(lines: str) -> str:
    result = migrate_source(STACKED.format(lines=lines), "train.py")
    (found,) = [f for f in result.findings if f.code == "AM007"]
    return f"{found.status}: {found.message}"


def test_stacked_means_reduce_to_a_mean() -> None:
    grown = f"    losses = []\n    losses.append({MSE})\n    losses.append({L1})\n"
    for reduced in (
        "torch.stack(losses).sum()",
        "torch.stack(losses).sum(0)",
        "torch.stack(losses).mean()",
        "torch.sum(torch.stack(losses))",
        "sum(l for l in losses)",
    ):
        found = _stacked(grown + f"    loss = {reduced}")
        assert found == "fixed: x.backward() -> accel.backward(x)", (reduced, found)


def test_stacked_sample_terms() -> None:
    rows = (
        "    losses = []\n    for i in range(out.size(0)):\n"
        "        losses.append(F.mse_loss(out[i], y[i]))\n"
    )
    summed = _stacked(rows + "    loss = torch.stack(losses).sum()")
    assert 'reduction="sum"' in summed, summed
    mean = _stacked(rows + "    loss = torch.stack(losses).mean()")
    assert mean == "fixed: x.backward() -> accel.backward(x)", mean


def test_a_stack_of_what_is_not_proven_a_list_is_unknown() -> None:
    found = _stacked(f"    loss = torch.stack(get_losses({MSE})).sum()")
    assert found.startswith("needs-review"), found


def test_a_grown_dict_is_unknown_never_a_sum() -> None:
    """A dict grown by item stores is not read (yet): its sum has no known
    reduction, not a sum over the batch."""
    lines = (
        f"    parts = {{}}\n    parts['mse'] = {MSE}\n    parts['l1'] = {L1}\n"
        "    loss = sum(parts.values())"
    )
    assert _stacked(lines).startswith("needs-review"), _stacked(lines)
