"""Losses collected in lists and dicts (issue 12, r34a).

Before: a loader's per-task target list (``for x, ys in loader``, default
collate keeps the dataset's list) walked by ``for t in ys`` was read as the
batch's samples and the backward became ``reduction="sum"`` (SILENT: the
migrated loss was 2x the original's at world 2); a loop over a parsed option
(``args.scales``), a dict grown by ``losses[k] = ...`` and ``losses = losses +
[term]`` were needs-review without a reason of their own; a term appended
under an ``if`` that reads the batch was read as a fixed count of means."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import argparse
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 0.5])
args = parser.parse_args()


class Pairs(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.ones(4) * i, [torch.ones(3) * i, torch.ones(3) * -i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 3), nn.Linear(4, 3)])

    def forward(self, x):
        return [h(x) for h in self.heads]


model = Net()
crit = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader({dataset}, batch_size=4)
for x, ys in loader:
    outs = model(x)
{lines}
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _backward(lines: str, dataset: str = "Pairs()") -> str:
    result = migrate_source(SCRIPT.format(lines=lines, dataset=dataset), "train.py")
    (found,) = [f for f in result.findings if f.code == "AM007"]
    return f"{found.status}: {found.message}"


PER_TASK = (
    "    losses = []\n    for i, t in enumerate(ys):\n"
    "        losses.append(crit(outs[i], t))\n    loss = sum(losses)",
    "    losses = []\n    for i in range(len(ys)):\n"
    "        losses.append(crit(outs[i], ys[i]))\n    loss = sum(losses)",
    "    losses = []\n    for t in list(ys):\n"
    "        losses.append(crit(outs[0], t))\n    loss = sum(losses)",
)


def test_a_collated_list_of_a_local_dataset_is_a_fixed_count_of_tasks() -> None:
    """``Pairs.__getitem__`` returns ``x, [a, b]``: the default collate keeps
    a list of two tensors, so the loop walks two tasks: a mean of means."""
    for lines in PER_TASK:
        assert _backward(lines) == "fixed: x.backward() -> accel.backward(x)", lines


def test_a_loop_over_a_loader_list_of_targets_is_not_the_samples() -> None:
    """Where the dataset's items are not read (a helper's dataset, a
    collate_fn of its own), the loader's part may be either."""
    for dataset in ("make_dataset()", "Pairs(), collate_fn=my_collate"):
        for lines in PER_TASK:
            found = _backward(lines, dataset)
            assert found.startswith("needs-review"), (lines, found)
            assert 'reduction="sum"' not in found
    # zip walks the shorter: a model's output may be its rows
    lines = (
        "    losses = []\n    for t, o in zip(ys, outs):\n"
        "        losses.append(crit(o, t))\n    loss = sum(losses)"
    )
    found = _backward(lines)
    assert found.startswith("needs-review") and 'reduction="sum"' not in found


def test_the_reason_names_a_per_task_list() -> None:
    assert "list of per-task targets" in _backward(PER_TASK[0], "make_dataset()")


def test_a_loader_target_read_as_a_tensor_walks_the_samples() -> None:
    """``ys.to(...)``: a list has no ``.to``; the loop walks the rows."""
    lines = (
        "    ys = ys.to('cpu')\n    losses = []\n    for t in ys:\n"
        "        losses.append(crit(outs[0].mean(0), t))\n    loss = sum(losses)"
    )
    assert _backward(lines).startswith(
        'fixed: x.backward() -> accel.backward(x, reduction="sum")'
    )


def test_a_loop_over_a_parsed_option_is_a_fixed_count() -> None:
    lines = (
        "    losses = []\n    for s in args.scales:\n"
        "        losses.append(s * crit(outs[0], ys[0]))\n    loss = sum(losses)"
    )
    assert _backward(lines) == "fixed: x.backward() -> accel.backward(x)"


def test_a_written_option_is_not_proven_fixed() -> None:
    lines = (
        "    args.scales = list(range(x.size(0)))\n    losses = []\n"
        "    for s in args.scales:\n"
        "        losses.append(s * crit(outs[0], ys[0]))\n    loss = sum(losses)"
    )
    found = _backward(lines)
    assert found.startswith("needs-review") and "parsed command line" in found


def test_a_config_list_names_why() -> None:
    lines = (
        "    losses = []\n    for w in cfg.loss_weights:\n"
        "        losses.append(w * crit(outs[0], ys[0]))\n    loss = sum(losses)"
    )
    found = _backward("    cfg = load_config()\n" + lines)
    assert found.startswith("needs-review")
    assert "`cfg.loss_weights`, an attribute the file neither binds" in found


def test_a_grown_dict_of_means_is_a_mean() -> None:
    lines = (
        "    losses = {}\n    losses['a'] = crit(outs[0], ys[0])\n"
        "    losses['b'] = crit(outs[1], ys[1])\n    loss = sum(losses.values())"
    )
    assert _backward(lines) == "fixed: x.backward() -> accel.backward(x)"


def test_a_grown_dict_of_sums_is_a_sum() -> None:
    lines = (
        "    losses = {}\n    for k in range(2):\n"
        "        losses[k] = nn.functional.mse_loss(outs[k], ys[k], reduction='sum')\n"
        "    loss = sum(losses.values())"
    )
    assert _backward(lines).startswith(
        'fixed: x.backward() -> accel.backward(x, reduction="sum")'
    )


def test_a_dict_stored_per_sample_or_mixed_is_unknown() -> None:
    for lines in (
        "    losses = {}\n    for i in range(x.size(0)):\n"
        "        losses[i] = crit(outs[0][i], ys[0][i])\n    loss = sum(losses.values())",
        "    losses = {'a': crit(outs[0], ys[0])}\n"
        "    losses['b'] = nn.functional.l1_loss(outs[1], ys[1], reduction='sum')\n"
        "    loss = sum(losses.values())",
        "    losses = {}\n    losses['a'] = crit(outs[0], ys[0])\n"
        "    losses.update(extra)\n    loss = sum(losses.values())",
        "    losses = {}\n    losses['a'] = crit(outs[0], ys[0])\n"
        "    add_terms(losses)\n    loss = sum(losses.values())",
    ):
        assert _backward(lines).startswith("needs-review"), lines


def test_a_list_concatenated_to_itself_is_read() -> None:
    lines = (
        "    losses = []\n    for k in range(2):\n"
        "        losses = losses + [crit(outs[k], ys[k])]\n    loss = sum(losses)"
    )
    assert _backward(lines) == "fixed: x.backward() -> accel.backward(x)"
    lines = (
        "    losses = []\n    for i in range(x.size(0)):\n"
        "        losses = losses + [crit(outs[0][i], ys[0][i])]\n    loss = sum(losses)"
    )
    assert _backward(lines).startswith(
        'fixed: x.backward() -> accel.backward(x, reduction="sum")'
    )


def test_a_term_added_under_a_batch_test_is_unknown() -> None:
    lines = (
        "    losses = []\n    for i in range(2):\n        if (ys[i] > 0).any():\n"
        "            losses.append(crit(outs[i], ys[i]))\n    loss = sum(losses)"
    )
    found = _backward(lines)
    assert found.startswith("needs-review") and "reads the batch" in found


def test_a_term_added_under_a_fixed_test_is_read() -> None:
    lines = (
        "    losses = []\n    for i in range(2):\n        if i > 0:\n"
        "            losses.append(crit(outs[i], ys[i]))\n    loss = sum(losses)"
    )
    assert _backward(lines) == "fixed: x.backward() -> accel.backward(x)"


def test_a_term_added_under_a_presence_test_is_read() -> None:
    """rev15: `if aux is not None: losses.append(...)` (an auxiliary head's
    output present or not) was reported as a test that reads the batch."""
    for test in (
        "outs[1] is not None",
        "outs[0] is None or not isinstance(outs[1], tuple)",
    ):
        lines = (
            f"    losses = [crit(outs[0], ys[0])]\n    if {test}:\n"
            "        losses.append(0.4 * crit(outs[1], ys[1]))\n    loss = sum(losses)"
        )
        assert _backward(lines) == "fixed: x.backward() -> accel.backward(x)", test
