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


def test_a_grown_dict_is_read_never_a_sum() -> None:
    """A dict grown by item stores is read as a grown list (r34a): two
    means stored, a mean; never a sum over the batch."""
    lines = (
        f"    parts = {{}}\n    parts['mse'] = {MSE}\n    parts['l1'] = {L1}\n"
        "    loss = sum(parts.values())"
    )
    assert _stacked(lines) == "fixed: x.backward() -> accel.backward(x)", _stacked(
        lines
    )


def test_a_loop_over_the_samples_paired_with_targets_sums_the_batch() -> None:
    """``for o, t in zip(out, targets)`` walks the batch's samples: one mean
    per sample, their sum a sum over the batch. Before, it was read as a
    fixed number of means (``accel.backward(loss)``: SILENT at world 2)."""
    per_sample = [
        "    targets = list(y)\n    losses = []\n"
        "    for o, t in zip(out, targets):\n        losses.append(F.l1_loss(o, t))",
        "    losses = []\n    for o, t in zip(out, y):\n"
        "        losses.append(F.l1_loss(o, t))",
        "    losses = []\n    for t in y:\n        losses.append(F.l1_loss(out.mean(0), t))",
        "    losses = []\n    for i in range(x.size(0)):\n"
        "        losses.append(F.l1_loss(out[i], y[i]))",
        "    losses = []\n    for i in range(len(y)):\n"
        "        losses.append(F.l1_loss(out[i], y[i]))",
        "    losses = [F.l1_loss(o, t) for o, t in zip(out, y)]",
        "    losses = []\n    for i, (o, t) in enumerate(zip(out.unbind(0), y)):\n"
        "        losses.append(F.l1_loss(o, t))",
    ]
    for lines in per_sample:
        assert _reduction(lines) == "sum", lines


def test_a_loop_over_a_fixed_count_is_a_mean_of_means() -> None:
    fixed = [
        f"    losses = []\n    for k in range(3):\n        losses.append({MSE} * k)",
        f"    losses = []\n    for w in [0.5, 1.0]:\n        losses.append(w * {MSE})",
        f"    losses = []\n    for i, w in enumerate((1, 2)):\n        losses.append(w * {MSE})",
        f"    losses = []\n    for a, b in zip([1, 2], (3, 4)):\n"
        f"        losses.append(a * b * {MSE})",
        f"    losses = []\n    for k in range(len(SCALES)):\n        losses.append({MSE})",
    ]
    for lines in fixed:
        assert _reduction("    SCALES = [1, 2]\n" + lines) == "mean", lines


MODEL_HEADS = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 3) for _ in range(2)])

    def forward(self, x):
        return x


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 3)), batch_size=4)
for x, y in loader:
    feats = model(x)
    losses = []
    for head in model.heads:
        losses.append(F.mse_loss(head(feats), y))
    loss = sum(losses)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_loop_over_the_model_heads_is_a_mean_of_means() -> None:
    result = migrate_source(MODEL_HEADS, "train.py")
    (found,) = [f for f in result.findings if f.code == "AM007"]
    assert found.message == "x.backward() -> accel.backward(x)", found.message


def test_a_loop_not_proven_fixed_or_over_the_samples_is_unknown() -> None:
    """A model's output may be its rows or its heads (deep supervision);
    a loop over what the file does not bind: never read as a mean."""
    unproven = [
        "    losses = []\n    for o in out:\n        losses.append(F.l1_loss(o, y))",
        "    losses = []\n    for o in get_outputs(x):\n"
        "        losses.append(F.l1_loss(o, y))",
        "    losses = []\n    for k in range(n_terms):\n"
        "        losses.append(F.l1_loss(out, y))",
        "    losses = []\n    while len(losses) < 3:\n"
        "        losses.append(F.l1_loss(out, y))",
        "    losses = [F.l1_loss(o, y) for o in out]",
        "    losses = []\n    for a, o in zip([1, 2], y):\n"
        "        losses.append(a * F.l1_loss(out, o))",
    ]
    for lines in unproven:
        found = _backward(lines)
        assert found.startswith("needs-review") and "loop" in found, (lines, found)
